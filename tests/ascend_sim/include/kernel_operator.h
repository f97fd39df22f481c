// The subset of Ascend C (CANN's kernel_operator.h, namespace AscendC) that esgraph's kernel
// generator emits, implemented on the host CPU so that each generated kernel compiles with the
// host compiler and runs block by block on the simulated device. It is strict where the
// hardware is: Unified Buffer capacity, 32-byte alignment of UB tensors and of DataCopy sizes,
// queue protocol (AllocTensor → EnQue → DeQue → FreeTensor), operand sizes, and every global
// memory access is bounds-checked against the simulated device heap. It also tracks the order
// of the pipes per Unified Buffer byte range: a copy from global memory is ordered before the
// vector instructions by its queue (EnQue/DeQue) or an MTE2_V flag, before the scalar unit's
// accesses (and so everything it issues after) by an MTE2_S flag; the scalar unit's writes
// before the vector instructions by an S_V flag; the vector instructions before the scalar
// unit's accesses by a V_S flag, and before the next copy into the same bytes by
// FreeTensor/AllocTensor or a V_MTE2 flag, and before a copy out of them by their queue
// (EnQue/DeQue) or a V_MTE3 flag. In global memory, a copy out (MTE3) is ordered before
// a copy in of the same bytes (MTE2) only by an MTE3_MTE2 flag. An access nothing ordered is
// a fault. (A flag covers what its pipe did before SetFlag, for the WaitFlag of the same id.)
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <map>
#include <type_traits>
#include <vector>

#include "aclsim_block.h"

#define __global__
#define __aicore__
// CANN's compiler has `half` built in; GCC's _Float16 is IEEE binary16 too (arithmetic in float).
using half = _Float16;
// bfloat16: the upper half of an f32, converted to nearest even (what CANN's Cast<bfloat16_t,
// float> does with CAST_RINT); moved and converted only, as on Atlas A2.
struct bfloat16_t {
  uint16_t bits;
  explicit operator float() const {
    const uint32_t u = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};
#define __gm__
#define GM_ADDR uint8_t*

namespace AscendC {

// The Unified Buffer of one vector core (Ascend 910B: 192 KiB).
constexpr uint32_t kUbBytes = 192 * 1024;
constexpr uint32_t kUbAlign = 32;

namespace sim {
struct Range {
  uintptr_t lo, hi;
};
struct Core {
  AclSimBlock block{0, 1, nullptr};
  alignas(64) uint8_t ub[kUbBytes];
  uint32_t ub_used = 0;
  std::vector<Range> copied_in;         // written by copies from global memory, not yet ordered before the vector pipe
  std::vector<Range> copied_in_scalar;  // ... nor before the scalar unit
  std::vector<Range> scalar_written;    // written by the scalar unit, not yet ordered before the vector pipe
  std::vector<Range> vector_used;       // used by vector instructions since their buffer was last (re)allocated
  std::vector<Range> vector_for_scalar; // used by vector instructions, not yet ordered before the scalar unit
  std::vector<Range> vector_for_out;    // used by vector instructions, not yet ordered before a copy out
  std::vector<Range> copied_out;        // global bytes written by copies out, not yet ordered before a copy in
  std::map<int, std::vector<Range>> flagged;  // by event and id: what a set flag covers until its wait
  void* pipe = nullptr;                 // the block's TPipe (GetTPipePtr)
};
inline thread_local Core core;

[[noreturn]] inline void fault(const std::string& what) {
  throw std::runtime_error("Ascend C: " + what);
}
inline void add(std::vector<Range>& ranges, uintptr_t lo, uintptr_t hi) {
  if (lo == hi) return;
  if (!ranges.empty() && ranges.back().hi == lo) {  // a run of element accesses: one range
    ranges.back().hi = hi;
    return;
  }
  if (!std::any_of(ranges.begin(), ranges.end(), [&](const Range& r) { return r.lo <= lo && hi <= r.hi; })) ranges.push_back({lo, hi});
}
inline bool overlaps(const std::vector<Range>& ranges, uintptr_t lo, uintptr_t hi) {
  return std::any_of(ranges.begin(), ranges.end(), [&](const Range& r) { return r.lo < hi && lo < r.hi; });
}
inline void forget(std::vector<Range>& ranges, uintptr_t lo, uintptr_t hi) {
  ranges.erase(std::remove_if(ranges.begin(), ranges.end(), [&](const Range& r) { return r.lo < hi && lo < r.hi; }), ranges.end());
}
// A vector instruction's operand: it must not read or write bytes a copy in has not been ordered before.
inline void vector_access(const void* p, size_t bytes, const char* op) {
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p), hi = lo + bytes;
  if (overlaps(core.copied_in, lo, hi))
    fault(std::string(op) + " uses Unified Buffer bytes that a copy from global memory wrote with nothing ordering the copy before it "
                            "(the copy's queue: EnQue, then DeQue; or an MTE2_V flag)");
  if (overlaps(core.scalar_written, lo, hi))
    fault(std::string(op) + " uses Unified Buffer bytes the scalar unit wrote with nothing ordering the writes before it (an S_V flag)");
  add(core.vector_used, lo, hi);
  add(core.vector_for_scalar, lo, hi);
  add(core.vector_for_out, lo, hi);
}
// A scalar access (GetValue/SetValue) of [p, p + bytes).
inline void scalar_access(const void* p, size_t bytes, bool write) {
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p), hi = lo + bytes;
  if (overlaps(core.copied_in_scalar, lo, hi))
    fault(std::string(write ? "SetValue" : "GetValue") +
          " of Unified Buffer bytes that a copy from global memory wrote with nothing ordering the copy before it (an MTE2_S flag)");
  if (overlaps(core.vector_for_scalar, lo, hi))
    fault(std::string(write ? "SetValue" : "GetValue") +
          " of Unified Buffer bytes the vector pipe used with nothing ordering it before (a V_S flag)");
  if (write) add(core.scalar_written, lo, hi);
}
// A copy from global memory at `from` into [p, p + bytes).
inline void copy_in(const void* p, const void* from, size_t bytes, const char* op) {
  const uintptr_t src = reinterpret_cast<uintptr_t>(from);
  if (overlaps(core.copied_out, src, src + bytes))
    fault(std::string(op) + " from global memory reads bytes a copy out of this block wrote with nothing ordering that copy before "
                            "it (an MTE3_MTE2 flag)");
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p), hi = lo + bytes;
  if (overlaps(core.vector_used, lo, hi))
    fault(std::string(op) + " from global memory overwrites Unified Buffer bytes the vector pipe used, with nothing ordering it after "
                            "them (the buffer's queue: FreeTensor, then AllocTensor)");
  add(core.copied_in, lo, hi);
  add(core.copied_in_scalar, lo, hi);
}
inline void check_gm(const void* p, size_t bytes, const char* what) {
  if (core.block.check_device) core.block.check_device(p, bytes, what);
}
}  // namespace sim

inline int64_t GetBlockIdx() { return sim::core.block.index; }
inline int64_t GetBlockNum() { return sim::core.block.count; }

enum class TPosition { GM, VECIN, VECOUT, VECCALC, A1, A2, B1, B2, CO1, CO2 };
using QuePosition = TPosition;

template <class T>
class LocalTensor {
 public:
  LocalTensor() = default;
  LocalTensor(T* p, uint32_t size) : p_(p), size_(size) {}
  LocalTensor operator[](uint32_t offset) const {
    if (offset > size_) sim::fault("LocalTensor offset " + std::to_string(offset) + " beyond its " + std::to_string(size_) + " elements");
    return LocalTensor(p_ + offset, size_ - offset);
  }
  // The same bytes as elements of another type (the bitwise instructions take masks as uint16_t).
  template <class U>
  LocalTensor<U> ReinterpretCast() const {
    return LocalTensor<U>(reinterpret_cast<U*>(p_), static_cast<uint32_t>(uint64_t(size_) * sizeof(T) / sizeof(U)));
  }
  T GetValue(uint32_t i) const { return scalar(i, false); }
  void SetValue(uint32_t i, T v) { scalar(i, true) = v; }
  uint32_t GetSize() const { return size_; }
  // For the vector instructions: `count` elements from an aligned start, ordered after any copy in.
  T* span(uint32_t count, const char* op) const {
    raw(count, op);
    sim::vector_access(p_, count * sizeof(T), op);
    return p_;
  }
  // For copies and queues: the same checks without the pipes' order.
  T* raw(uint32_t count, const char* op) const {
    if (!p_) sim::fault(std::string(op) + ": an unallocated LocalTensor");
    if (count > size_) sim::fault(std::string(op) + " of " + std::to_string(count) + " elements on a tensor of " + std::to_string(size_));
    if (reinterpret_cast<uintptr_t>(p_) % kUbAlign) sim::fault(std::string(op) + ": UB tensor not 32-byte aligned");
    return p_;
  }

 private:
  T& scalar(uint32_t i, bool write) const {
    if (i >= size_) sim::fault("LocalTensor index " + std::to_string(i) + " beyond its " + std::to_string(size_) + " elements");
    sim::scalar_access(p_ + i, sizeof(T), write);
    return p_[i];
  }
  T* p_ = nullptr;
  uint32_t size_ = 0;
};

template <class T>
class GlobalTensor {
 public:
  void SetGlobalBuffer(T* p, uint64_t size) { p_ = p, size_ = size; }
  void SetGlobalBuffer(T* p) { p_ = p, size_ = UINT64_MAX; }
  GlobalTensor operator[](uint64_t offset) const {
    GlobalTensor g;
    g.p_ = p_ + offset;
    g.size_ = size_ == UINT64_MAX ? size_ : size_ - std::min(offset, size_);
    return g;
  }
  T GetValue(uint64_t i) const {
    sim::check_gm(p_ + i, sizeof(T), "GlobalTensor::GetValue");
    return p_[i];
  }
  T* span(uint64_t count, const char* op) const {
    if (count > size_) sim::fault(std::string(op) + " of " + std::to_string(count) + " elements beyond the global buffer's " + std::to_string(size_));
    sim::check_gm(p_, count * sizeof(T), op);
    return p_;
  }

 private:
  T* p_ = nullptr;
  uint64_t size_ = 0;
};

class TPipe;

// Flags between the pipes (SetFlag/WaitFlag): those the order of copies in and out, the scalar
// unit and the vector pipe needs.
enum class HardEvent { MTE2_V, V_MTE2, MTE2_S, S_V, V_S, MTE3_MTE2, V_MTE3 };
using event_t = int32_t;
namespace sim {
// What the first pipe of `e` did that its wait orders: the ranges still unordered.
inline std::vector<Range>& unordered(HardEvent e) {
  switch (e) {
    case HardEvent::MTE2_V: return core.copied_in;
    case HardEvent::V_MTE2: return core.vector_used;
    case HardEvent::MTE2_S: return core.copied_in_scalar;
    case HardEvent::S_V: return core.scalar_written;
    case HardEvent::V_S: return core.vector_for_scalar;
    case HardEvent::MTE3_MTE2: return core.copied_out;
    case HardEvent::V_MTE3: return core.vector_for_out;
  }
  return core.copied_in;
}
}  // namespace sim
template <HardEvent E>
void SetFlag(event_t id) {  // everything of the first pipe so far
  sim::core.flagged[int(E) * 256 + id] = sim::unordered(E);
}
template <HardEvent E>
void WaitFlag(event_t id) {  // ... is ordered before what the second pipe does next
  const auto it = sim::core.flagged.find(int(E) * 256 + id);
  if (it == sim::core.flagged.end()) sim::fault("WaitFlag of an event with no SetFlag before it");
  for (const sim::Range& r : it->second) {
    sim::forget(sim::unordered(E), r.lo, r.hi);
    // The scalar unit waits: what it issues after, vector instructions included, comes after the copy.
    if (E == HardEvent::MTE2_S) sim::forget(sim::core.copied_in, r.lo, r.hi);
  }
  sim::core.flagged.erase(it);
}

template <TPosition Pos, int Depth>
class TQue {
 public:
  template <class T>
  LocalTensor<T> AllocTensor() {
    for (int i = 0; i < num_; ++i)
      if (state_[i] == Free) {
        state_[i] = Allocated;
        sim::forget(sim::core.vector_used, reinterpret_cast<uintptr_t>(buf_[i]), reinterpret_cast<uintptr_t>(buf_[i]) + len_);
        return LocalTensor<T>(reinterpret_cast<T*>(buf_[i]), len_ / sizeof(T));
      }
    sim::fault("TQue::AllocTensor: all " + std::to_string(num_) + " buffers in use");
  }
  template <class T>
  void EnQue(const LocalTensor<T>& t) {
    const int i = index_of(t.raw(0, "EnQue"), "EnQue");
    if (state_[i] != Allocated) sim::fault("TQue::EnQue of a buffer not allocated");
    state_[i] = Queued;
    order_[tail_++ % Depth] = i;
  }
  template <class T>
  LocalTensor<T> DeQue() {
    if (head_ == tail_) sim::fault("TQue::DeQue of an empty queue");
    const int i = order_[head_++ % Depth];
    state_[i] = Dequeued;
    // The queue orders the pipe that filled the buffer before the one that takes it: a copy in
    // before the vector pipe, the vector pipe before a copy out.
    for (auto* ranges : {&sim::core.copied_in, &sim::core.copied_in_scalar, &sim::core.vector_for_out})
      sim::forget(*ranges, reinterpret_cast<uintptr_t>(buf_[i]), reinterpret_cast<uintptr_t>(buf_[i]) + len_);
    return LocalTensor<T>(reinterpret_cast<T*>(buf_[i]), len_ / sizeof(T));
  }
  template <class T>
  void FreeTensor(const LocalTensor<T>& t) {
    const int i = index_of(t.raw(0, "FreeTensor"), "FreeTensor");
    if (state_[i] == Free || state_[i] == Queued) sim::fault("TQue::FreeTensor of a buffer not dequeued");
    state_[i] = Free;
  }

 private:
  friend class TPipe;
  enum State { Free, Allocated, Queued, Dequeued };
  int index_of(const void* p, const char* op) const {
    for (int i = 0; i < num_; ++i)
      if (buf_[i] == p) return i;
    sim::fault(std::string("TQue::") + op + " of a tensor that is not one of its buffers");
  }
  uint8_t* buf_[Depth] = {};
  State state_[Depth] = {};
  int order_[Depth] = {};
  int num_ = 0;
  uint32_t len_ = 0;
  uint64_t head_ = 0, tail_ = 0;
};

template <TPosition Pos>
class TBuf {
 public:
  template <class T>
  LocalTensor<T> Get() const { return LocalTensor<T>(reinterpret_cast<T*>(p_), len_ / sizeof(T)); }
  template <class T>
  LocalTensor<T> Get(uint32_t count) const {
    if (count * sizeof(T) > len_) sim::fault("TBuf::Get of more than the buffer holds");
    return LocalTensor<T>(reinterpret_cast<T*>(p_), count);
  }

 private:
  friend class TPipe;
  uint8_t* p_ = nullptr;
  uint32_t len_ = 0;
};

// Allocates queues and buffers from the core's Unified Buffer, 32-byte aligned; one pipe per
// kernel run (its buffers are the core's until the block ends).
class TPipe {
 public:
  TPipe() {
    sim::core.ub_used = 0;
    for (auto* ranges : {&sim::core.copied_in, &sim::core.copied_in_scalar, &sim::core.scalar_written, &sim::core.vector_used,
                         &sim::core.vector_for_scalar, &sim::core.vector_for_out, &sim::core.copied_out})
      ranges->clear();
    sim::core.flagged.clear();
    sim::core.pipe = this;
  }
  int32_t FetchEventID(HardEvent) { return next_event_++ % 8; }
  template <TPosition Pos, int Depth>
  void InitBuffer(TQue<Pos, Depth>& q, int num, uint32_t len) {
    if (num < 1 || num > Depth) sim::fault("TPipe::InitBuffer: " + std::to_string(num) + " buffers for a queue of depth " + std::to_string(Depth));
    q.num_ = num, q.len_ = len;
    for (int i = 0; i < num; ++i) q.buf_[i] = take(len);
  }
  template <TPosition Pos>
  void InitBuffer(TBuf<Pos>& b, uint32_t len) {
    b.p_ = take(len), b.len_ = len;
  }

 private:
  static uint8_t* take(uint32_t len) {
    const uint32_t at = (sim::core.ub_used + kUbAlign - 1) / kUbAlign * kUbAlign;
    if (uint64_t(at) + len > kUbBytes)
      sim::fault("the Unified Buffer holds " + std::to_string(kUbBytes) + " bytes; this kernel asks for " + std::to_string(uint64_t(at) + len));
    sim::core.ub_used = at + len;
    return sim::core.ub + at;
  }
  int32_t next_event_ = 0;
};
inline TPipe* GetTPipePtr() { return static_cast<TPipe*>(sim::core.pipe); }

// ---- data movement --------------------------------------------------------------------------
struct DataCopyExtParams {
  uint16_t blockCount = 1;
  uint32_t blockLen = 0;  // bytes
  uint32_t srcStride = 0, dstStride = 0;
  uint32_t rsv = 0;
};
template <class T>
struct DataCopyPadExtParams {
  bool isPad = false;
  uint8_t leftPadding = 0, rightPadding = 0;
  T paddingValue = 0;
};

namespace sim {
// Both directions of both copies: the hardware's rules checked, then the bytes moved.
template <class T>
void copy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, uint32_t count, const char* op) {
  T* to = dst.raw(count, op);
  const T* from = src.span(count, op);
  copy_in(to, from, count * sizeof(T), op);
  std::memcpy(to, from, count * sizeof(T));
}
template <class T>
void copy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, uint32_t count, const char* op) {
  T* to = dst.span(count, op);
  const T* from = src.raw(count, op);
  const uintptr_t ub = reinterpret_cast<uintptr_t>(from);
  if (overlaps(core.vector_for_out, ub, ub + count * sizeof(T)))
    fault(std::string(op) + " to global memory reads Unified Buffer bytes the vector pipe used with nothing ordering it before "
                            "(the buffer's queue: EnQue, then DeQue; or a V_MTE3 flag)");
  std::memcpy(to, from, count * sizeof(T));
  const uintptr_t lo = reinterpret_cast<uintptr_t>(to);
  add(core.copied_out, lo, lo + count * sizeof(T));
}
inline void whole_blocks(uint64_t bytes) {
  if (bytes % 32) fault("DataCopy of " + std::to_string(bytes) + " bytes: not a multiple of 32 (use DataCopyPad)");
}
template <class T>
uint32_t pad_count(const DataCopyExtParams& p) {
  if (p.blockCount != 1 || p.blockLen % sizeof(T)) fault("DataCopyPad: only one block of whole elements is simulated");
  return p.blockLen / sizeof(T);
}
}  // namespace sim

template <class T>
void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, uint32_t count) {
  sim::whole_blocks(uint64_t(count) * sizeof(T));
  sim::copy<T>(dst, src, count, "DataCopy");
}
template <class T>
void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, uint32_t count) {
  sim::whole_blocks(uint64_t(count) * sizeof(T));
  sim::copy<T>(dst, src, count, "DataCopy");
}
template <class T>
void DataCopyPad(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyExtParams& p, const DataCopyPadExtParams<T>&) {
  sim::copy<T>(dst, src, sim::pad_count<T>(p), "DataCopyPad");
}
template <class T>
void DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyExtParams& p) {
  sim::copy<T>(dst, src, sim::pad_count<T>(p), "DataCopyPad");
}

// ---- vector instructions ----------------------------------------------------------------------
#define ACLSIM_BINARY(Name, expr)                                                                    \
  template <class T>                                                                                 \
  void Name(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, int32_t n) { \
    T* d = dst.span(n, #Name);                                                                       \
    const T *x = a.span(n, #Name), *y = b.span(n, #Name);                                             \
    for (int32_t i = 0; i < n; ++i) d[i] = (expr);                                                   \
  }
ACLSIM_BINARY(Add, x[i] + y[i])
ACLSIM_BINARY(Sub, x[i] - y[i])
ACLSIM_BINARY(Mul, x[i] * y[i])
ACLSIM_BINARY(Div, x[i] / y[i])
ACLSIM_BINARY(Max, std::max(x[i], y[i]))
ACLSIM_BINARY(Min, std::min(x[i], y[i]))
#undef ACLSIM_BINARY

// The scalar is of the tiles' own type, as in CANN's headers: a float scalar on half tiles
// does not compile there, so it does not here either.
#define ACLSIM_SCALAR(Name, expr)                                                             \
  template <class T>                                                                          \
  void Name(const LocalTensor<T>& dst, const LocalTensor<T>& a, const T& scalar, int32_t n) { \
    T* d = dst.span(n, #Name);                                                                \
    const T* x = a.span(n, #Name);                                                            \
    const T s = scalar;                                                                       \
    for (int32_t i = 0; i < n; ++i) d[i] = (expr);                                            \
  }
ACLSIM_SCALAR(Adds, x[i] + s)
ACLSIM_SCALAR(Muls, x[i] * s)
ACLSIM_SCALAR(Maxs, std::max(x[i], s))
ACLSIM_SCALAR(Mins, std::min(x[i], s))
#undef ACLSIM_SCALAR

#define ACLSIM_UNARY(Name, expr)                                                    \
  template <class T>                                                                \
  void Name(const LocalTensor<T>& dst, const LocalTensor<T>& a, int32_t n) {        \
    T* d = dst.span(n, #Name);                                                      \
    const T* x = a.span(n, #Name);                                                  \
    for (int32_t i = 0; i < n; ++i) {                                               \
      const float v = static_cast<float>(x[i]);                                     \
      d[i] = static_cast<T>(expr);                                                  \
    }                                                                               \
  }
ACLSIM_UNARY(Exp, std::exp(v))
ACLSIM_UNARY(Ln, std::log(v))
ACLSIM_UNARY(Abs, std::fabs(v))
ACLSIM_UNARY(Sqrt, std::sqrt(v))
ACLSIM_UNARY(Rsqrt, 1 / std::sqrt(v))
ACLSIM_UNARY(Reciprocal, 1 / v)
ACLSIM_UNARY(Relu, std::max(v, 0.0f))
#undef ACLSIM_UNARY

// The higher-level math, in its sharedTmpBuffer forms: like the hardware's, it refuses a
// destination that overlaps a source, and a temporary buffer below CANN's minimum for the type
// (GetXxxMaxMinTmpSize's minValue on Atlas A2, in bytes: float, half), unaligned, or over an
// operand. A larger one only saves passes.
namespace sim {
template <class T>
void math_buffer(const LocalTensor<uint8_t>& tmp, uint32_t least_f32, uint32_t least_f16, const void* d, const void* x, const void* y,
                 uint32_t n, const char* op) {
  const uint32_t least = sizeof(T) == 2 ? least_f16 : least_f32;
  if (tmp.GetSize() < least || tmp.GetSize() == 0)
    fault(std::string(op) + " needs a temporary buffer of at least " + std::to_string(least) + " bytes for " + (sizeof(T) == 2 ? "half" : "float") +
          " (CANN's Get" + op + "MaxMinTmpSize), has " + std::to_string(tmp.GetSize()));
  const uint8_t* t = tmp.raw(tmp.GetSize(), op);
  for (const void* operand : {d, x, y}) {
    const uint8_t* o = static_cast<const uint8_t*>(operand);
    if (o && t < o + n * sizeof(T) && o < t + tmp.GetSize()) fault(std::string(op) + ": the temporary buffer overlaps an operand");
  }
}
}  // namespace sim
namespace sim {
// Tanh and Erf as asc-devkit computes them (v8.5.0, impl/adv_api/detail/math/tanh and erf), each
// step a vector instruction rounded to f32 (half is computed in f32 and cast back): CANN
// publishes no error bounds for them, so the simulated results carry the formulas' error rather
// than libm's better accuracy, and the tolerances of the tests and of ascend-check are set by it.
// Exp is one instruction whose accuracy nothing published states: it stays libm's, in f32.
inline float tanh_as_devkit(float x) {
  const float clipped = std::min(std::max(x, -8.8f), 8.8f);  // Mins, Maxs
  const float e = std::exp(2.0f * clipped);                   // Muls, Exp
  return (e - 1.0f) / (e + 1.0f);                             // Adds, Adds, Div
}
inline float erf_as_devkit(float x) {
  const float c = std::min(std::max(x, -3.92f), 3.92f);
  const float x2 = c * c;
  // P(x) = x (((((p5 x² + p4) x² + p3) x² + p2) x² + p1) x² + p0), one instruction a step.
  float p = x2 * 0.053443748819f;
  for (const float k : {0.75517016694e1f, 0.10162808918e3f, 0.13938061484e4f, 0.50637915060e4f}) {
    p = p + k;
    p = x2 * p;
  }
  p = c * (p + 0.29639384698e5f);
  // Q(x) = ((((x² + q4) x² + q3) x² + q2) x² + q1) x² + q0.
  float q = x2 + 0.31212858877e2f;
  for (const float k : {0.39856963806e3f, 0.30231248150e4f, 0.13243365831e5f}) {
    q = x2 * q;
    q = q + k;
  }
  q = x2 * q + 0.26267224157e5f;
  return p / q;
}
}  // namespace sim
#define ACLSIM_MATH(Name, least_f32, least_f16, expr)                                                               \
  template <class T>                                                                                                \
  void Name(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<uint8_t>& tmp, int32_t n) {       \
    T* d = dst.span(n, #Name);                                                                                      \
    const T* x = a.span(n, #Name);                                                                                  \
    if (d < x + n && x < d + n) sim::fault(#Name ": the destination overlaps the source (not supported)");         \
    sim::math_buffer<T>(tmp, least_f32, least_f16, d, x, nullptr, static_cast<uint32_t>(n), #Name);                 \
    for (int32_t i = 0; i < n; ++i) {                                                                               \
      const float v = static_cast<float>(x[i]);                                                                     \
      d[i] = static_cast<T>(expr);                                                                                  \
    }                                                                                                               \
  }
ACLSIM_MATH(Tanh, 256, 1024, sim::tanh_as_devkit(v))
ACLSIM_MATH(Erf, 768, 2048, sim::erf_as_devkit(v))
ACLSIM_MATH(Sin, 768, 2048, std::sin(v))
ACLSIM_MATH(Cos, 768, 2048, std::cos(v))
ACLSIM_MATH(Tan, 1024, 2560, std::tan(v))
ACLSIM_MATH(Asin, 512, 1536, std::asin(v))
ACLSIM_MATH(Acos, 512, 1536, std::acos(v))
ACLSIM_MATH(Atan, 1280, 3072, std::atan(v))
ACLSIM_MATH(Sinh, 256, 1024, std::sinh(v))
ACLSIM_MATH(Cosh, 512, 1536, std::cosh(v))
ACLSIM_MATH(Asinh, 768, 768, std::asinh(v))
ACLSIM_MATH(Acosh, 256, 512, std::acosh(v))
ACLSIM_MATH(Floor, 0, 512, std::floor(v))
ACLSIM_MATH(Ceil, 256, 512, std::ceil(v))
ACLSIM_MATH(Round, 0, 256, std::nearbyint(v))  // half to even, as CANN documents Round
ACLSIM_MATH(Sign, 768, 768, static_cast<float>((v > 0) - (v < 0)))  // NaN gives 0, as CANN documents Sign
#undef ACLSIM_MATH

// Power: base and exponent tensors, or either one a scalar; never over a source.
namespace sim {
// CANN's minimum: tensor-tensor float 1280, half 2048; with a scalar float 1536, half 2048.
template <class T, class B, class E>
void power(const LocalTensor<T>& dst, B base, E exponent, const LocalTensor<uint8_t>& tmp, uint32_t n, const T* a, const T* b) {
  T* d = dst.span(n, "Power");
  for (const T* x : {a, b})
    if (x && d < x + n && x < d + n) fault("Power: the destination overlaps a source (not supported)");
  math_buffer<T>(tmp, a && b ? 1280 : 1536, 2048, d, a, b, n, "Power");
  for (uint32_t i = 0; i < n; ++i) d[i] = static_cast<T>(std::pow(static_cast<float>(base(i)), static_cast<float>(exponent(i))));
}
}  // namespace sim
template <class T>
void Power(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, const LocalTensor<uint8_t>& tmp, uint32_t n) {
  const T *x = a.span(n, "Power"), *y = b.span(n, "Power");
  sim::power(dst, [x](uint32_t i) { return x[i]; }, [y](uint32_t i) { return y[i]; }, tmp, n, x, y);
}
template <class T>
void Power(const LocalTensor<T>& dst, const LocalTensor<T>& a, const T& s, const LocalTensor<uint8_t>& tmp, uint32_t n) {
  const T* x = a.span(n, "Power");
  sim::power(dst, [x](uint32_t i) { return x[i]; }, [s](uint32_t) { return s; }, tmp, n, x, static_cast<const T*>(nullptr));
}
template <class T>
void Power(const LocalTensor<T>& dst, const T& s, const LocalTensor<T>& b, const LocalTensor<uint8_t>& tmp, uint32_t n) {
  const T* y = b.span(n, "Power");
  sim::power(dst, [s](uint32_t) { return s; }, [y](uint32_t i) { return y[i]; }, tmp, n, static_cast<const T*>(nullptr), y);
}

// ---- reductions: the count forms, as on Atlas A2 (a tree within each 256-byte repeat, the
// repeats' results in order); the result at dst[0]. The scratch must hold CANN's documented
// minimum: one result per repeat (two for ReduceMax, which may keep an index), in whole blocks.
namespace sim {
template <class T, class F>
void reduce(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& scratch, int32_t n, bool two_per_repeat, F combine,
            const char* op) {
  if (n < 1) fault(std::string(op) + " of " + std::to_string(n) + " elements");
  constexpr uint32_t per_repeat = 256 / sizeof(T), per_block = 32 / sizeof(T);
  const uint32_t repeats = (static_cast<uint32_t>(n) + per_repeat - 1) / per_repeat;
  const uint32_t need = (repeats * (two_per_repeat ? 2 : 1) + per_block - 1) / per_block * per_block;
  if (scratch.GetSize() < need)
    fault(std::string(op) + " of " + std::to_string(n) + " elements needs " + std::to_string(need) + " elements of scratch, has " +
          std::to_string(scratch.GetSize()));
  const T* x = src.span(static_cast<uint32_t>(n), op);
  T* work = scratch.span(need, op);
  T* d = dst.span(1, op);
  for (uint32_t r = 0; r < repeats; ++r) {  // pairwise within the repeat
    T lane[per_repeat];
    uint32_t m = std::min<uint32_t>(per_repeat, static_cast<uint32_t>(n) - r * per_repeat);
    std::copy_n(x + r * per_repeat, m, lane);
    while (m > 1) {
      const uint32_t half = m / 2;
      for (uint32_t i = 0; i < half; ++i) lane[i] = combine(lane[2 * i], lane[2 * i + 1]);
      if (m % 2) lane[half] = lane[m - 1];
      m = half + m % 2;
    }
    work[r] = lane[0];
  }
  T acc = work[0];
  for (uint32_t r = 1; r < repeats; ++r) acc = combine(acc, work[r]);
  d[0] = acc;
}
}  // namespace sim
template <class T>
void ReduceSum(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& scratch, int32_t n) {
  sim::reduce(dst, src, scratch, n, false, [](T a, T b) { return static_cast<T>(a + b); }, "ReduceSum");
}
// The maximum; NaN as the hardware's is undocumented: here, like std::max, the first operand
// wins a comparison with NaN.
template <class T>
void ReduceMax(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& scratch, int32_t n, bool cal_index = false) {
  if (cal_index) sim::fault("ReduceMax: the index is not simulated");
  sim::reduce(dst, src, scratch, n, true, [](T a, T b) { return std::max(a, b); }, "ReduceMax");
}

template <class T>
void Duplicate(const LocalTensor<T>& dst, const T& scalar, int32_t n) {
  std::fill_n(dst.span(n, "Duplicate"), n, scalar);
}

// ---- conversions ---------------------------------------------------------------------------------
enum class RoundMode { CAST_NONE, CAST_RINT, CAST_FLOOR, CAST_CEIL, CAST_ROUND, CAST_TRUNC, CAST_ODD };

// Cast<dst, src>: only the pairs and modes the generator emits, each as CANN documents it for
// Atlas A2; any other pair does not compile, any other mode faults.
namespace sim {
template <class D, class S>
D convert(S v, RoundMode mode);
// Widening conversions are exact: CAST_NONE only, as CANN's table has them.
template <class D, class S>
D widen(S v, RoundMode mode, const char* pair) {
  if (mode != RoundMode::CAST_NONE) fault(std::string("Cast ") + pair + ": CAST_NONE only");
  return static_cast<D>(v);
}
template <>
inline float convert<float, half>(half v, RoundMode mode) { return widen<float>(v, mode, "half -> float"); }
template <>
inline float convert<float, bfloat16_t>(bfloat16_t v, RoundMode mode) { return widen<float>(v, mode, "bfloat16_t -> float"); }
template <>
inline half convert<half, uint8_t>(uint8_t v, RoundMode mode) { return widen<half>(v, mode, "uint8_t -> half"); }
template <>
inline half convert<half, float>(float v, RoundMode mode) {
  if (mode != RoundMode::CAST_RINT && mode != RoundMode::CAST_NONE) fault("Cast float -> half: the simulator rounds to nearest even only");
  return static_cast<half>(v);  // to nearest, ties to even
}
template <>
inline bfloat16_t convert<bfloat16_t, float>(float v, RoundMode mode) {
  if (mode != RoundMode::CAST_RINT) fault("Cast float -> bfloat16_t: the simulator rounds to nearest even only (CAST_RINT)");
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bfloat16_t{uint16_t((u >> 16) | 0x40)};  // NaN stays NaN
  return bfloat16_t{uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}
template <>
inline uint8_t convert<uint8_t, half>(half v, RoundMode mode) {
  if (mode != RoundMode::CAST_ROUND) fault("Cast half -> uint8_t: the simulator implements CAST_ROUND only");
  const float r = std::round(static_cast<float>(v));  // half away from zero, saturating
  return static_cast<uint8_t>(r != r ? 0.0f : std::min(255.0f, std::max(0.0f, r)));
}
}  // namespace sim

template <class D, class S>
void Cast(const LocalTensor<D>& dst, const LocalTensor<S>& src, const RoundMode& mode, uint32_t n) {
  D* d = dst.span(n, "Cast");
  const S* x = src.span(n, "Cast");
  for (uint32_t i = 0; i < n; ++i) d[i] = sim::convert<D, S>(x[i], mode);
}

// ---- comparisons and selection: a bit per element, in uint8_t tensors --------------------------
enum class CMPMODE { LT, GT, EQ, LE, GE, NE };
enum class SELMODE { VSEL_CMPMASK_SPR, VSEL_TENSOR_SCALAR_MODE, VSEL_TENSOR_TENSOR_MODE };

namespace sim {
// The count forms work in whole 256-byte repeats of the operands.
template <class T>
void whole_repeats(uint32_t n, const char* op) {
  if (uint64_t(n) * sizeof(T) % 256) fault(std::string(op) + " of " + std::to_string(n) + " elements: not whole 256-byte repeats");
}
inline bool compare(CMPMODE mode, float a, float b) {
  switch (mode) {
    case CMPMODE::LT: return a < b;
    case CMPMODE::GT: return a > b;
    case CMPMODE::EQ: return a == b;
    case CMPMODE::LE: return a <= b;
    case CMPMODE::GE: return a >= b;
    case CMPMODE::NE: return a != b;
  }
  return false;
}
template <class T, class B>
void compare_into(const LocalTensor<uint8_t>& dst, const T* x, B b, CMPMODE mode, uint32_t n, const char* op) {
  whole_repeats<T>(n, op);
  uint8_t* bits = dst.span(n / 8, op);
  for (uint32_t i = 0; i < n; i += 8) {
    uint8_t byte = 0;
    for (uint32_t k = 0; k < 8; ++k) byte |= uint8_t(compare(mode, static_cast<float>(x[i + k]), static_cast<float>(b(i + k))) << k);
    bits[i / 8] = byte;
  }
}
inline bool bit(const uint8_t* bits, uint32_t i) { return (bits[i / 8] >> (i % 8)) & 1; }
}  // namespace sim

template <class T, class U>
void Compare(const LocalTensor<U>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, CMPMODE mode, uint32_t n) {
  static_assert(std::is_same<U, uint8_t>::value, "Compare: masks are uint8_t tensors here");
  const T *x = a.span(n, "Compare"), *y = b.span(n, "Compare");
  sim::compare_into(dst, x, [y](uint32_t i) { return y[i]; }, mode, n, "Compare");
}
template <class T, class U>
void CompareScalar(const LocalTensor<U>& dst, const LocalTensor<T>& a, const T scalar, CMPMODE mode, uint32_t n) {
  static_assert(std::is_same<U, uint8_t>::value, "CompareScalar: masks are uint8_t tensors here");
  const T* x = a.span(n, "CompareScalar");
  sim::compare_into(dst, x, [scalar](uint32_t) { return scalar; }, mode, n, "CompareScalar");
}
// dst[i] = bit i of the mask ? a[i] : b[i] (or the scalar b).
namespace sim {
// Select keeps 8 KB of the Unified Buffer as scratch on Atlas A2: what the kernel allocated must
// leave it free.
inline void select_scratch() {
  if (kUbBytes - core.ub_used < 8 * 1024) fault("Select: less than 8 KB of the Unified Buffer left for its scratch");
}
}  // namespace sim

template <class T, class U>
void Select(const LocalTensor<T>& dst, const LocalTensor<U>& mask, const LocalTensor<T>& a, const LocalTensor<T>& b, SELMODE mode, uint32_t n) {
  if (mode != SELMODE::VSEL_TENSOR_TENSOR_MODE) sim::fault("Select: a second tensor operand needs VSEL_TENSOR_TENSOR_MODE");
  sim::select_scratch();
  sim::whole_repeats<T>(n, "Select");
  const uint8_t* bits = mask.span(n / 8, "Select");
  T* d = dst.span(n, "Select");
  const T *x = a.span(n, "Select"), *y = b.span(n, "Select");
  for (uint32_t i = 0; i < n; ++i) d[i] = sim::bit(bits, i) ? x[i] : y[i];
}
template <class T, class U>
void Select(const LocalTensor<T>& dst, const LocalTensor<U>& mask, const LocalTensor<T>& a, T scalar, SELMODE mode, uint32_t n) {
  if (mode != SELMODE::VSEL_TENSOR_SCALAR_MODE) sim::fault("Select: a scalar operand needs VSEL_TENSOR_SCALAR_MODE");
  sim::select_scratch();
  sim::whole_repeats<T>(n, "Select");
  const uint8_t* bits = mask.span(n / 8, "Select");
  T* d = dst.span(n, "Select");
  const T* x = a.span(n, "Select");
  for (uint32_t i = 0; i < n; ++i) d[i] = sim::bit(bits, i) ? x[i] : scalar;
}

// Bitwise, on 16-bit elements (masks viewed as uint16_t).
#define ACLSIM_BITWISE(Name, expr)                                                                          \
  template <class T>                                                                                        \
  void Name(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, int32_t n) {       \
    static_assert(sizeof(T) == 2, #Name ": 16-bit elements");                                             \
    T* d = dst.span(n, #Name);                                                                              \
    const T *x = a.span(n, #Name), *y = b.span(n, #Name);                                                   \
    for (int32_t i = 0; i < n; ++i) d[i] = static_cast<T>(expr);                                            \
  }
ACLSIM_BITWISE(And, x[i] & y[i])
ACLSIM_BITWISE(Or, x[i] | y[i])
#undef ACLSIM_BITWISE
template <class T>
void Not(const LocalTensor<T>& dst, const LocalTensor<T>& a, int32_t n) {
  static_assert(sizeof(T) == 2, "Not: 16-bit elements");
  T* d = dst.span(n, "Not");
  const T* x = a.span(n, "Not");
  for (int32_t i = 0; i < n; ++i) d[i] = static_cast<T>(~x[i]);
}

}  // namespace AscendC

// The entry the simulated device calls before each block (one definition: a kernel binary is
// one translation unit).
extern "C" __attribute__((visibility("default"))) void aclsim_enter_block(const AclSimBlock* block) {
  AscendC::sim::core.block = *block;
  AscendC::sim::core.copied_out.clear();  // a block's copies out are ordered before the next launch's
}
