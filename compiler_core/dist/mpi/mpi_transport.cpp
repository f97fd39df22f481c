// The Open MPI transport, built as its own library (libesgraph_mpi.so) that the world loads when
// an MPI launcher started the process (dist/world.cpp), so that nothing of MPI is needed to use
// esgraph on one process. A rank that never arrives makes the others fail, naming it, rather
// than hang: calls up to ESG_MPI_BLOCKING_BELOW bytes are MPI's blocking ones, under a watchdog
// that ends the job at the deadline; larger ones, and the agreement check, are nonblocking
// (MPI_I*), polled until the deadline, and fail with an error the caller can catch.
//
// Naming the rank: each group keeps an RMA window of one counter per member, the number of the
// group's calls it has entered; a member stores its own before each call, and a member whose
// wait ran out reads the others' (passive target: they need not take part) and names those
// behind it.
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dist/communicator.hpp"
#include "ir/half.hpp"

namespace esg::dist {
namespace {

// Each MPI call under one lock: the process may have MPI at less than MPI_THREAD_MULTIPLE (a
// caller's own MPI_Init), and collectives of two models may run on two threads.
std::mutex mpi_mu;

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, static_cast<size_t>(len));
}

// The two 16-bit floats reduce in f32 through ops of our own; MPI has neither type.
MPI_Datatype f16_type = MPI_DATATYPE_NULL, bf16_type = MPI_DATATYPE_NULL;

template <typename F>
void reduce_halves(void* in, void* inout, int* len, MPI_Datatype* type, F combine) {
  auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  const bool bf = *type == bf16_type;
  for (int i = 0; i < *len; ++i) {
    const float x = bf ? ir::bf16_to_float(a[i]) : ir::f16_to_float(a[i]);
    const float y = bf ? ir::bf16_to_float(b[i]) : ir::f16_to_float(b[i]);
    const float r = combine(x, y);
    b[i] = bf ? ir::float_to_bf16(r) : ir::float_to_f16(r);
  }
}
void half_sum(void* a, void* b, int* n, MPI_Datatype* t) { reduce_halves(a, b, n, t, [](float x, float y) { return x + y; }); }
void half_max(void* a, void* b, int* n, MPI_Datatype* t) { reduce_halves(a, b, n, t, [](float x, float y) { return std::max(x, y); }); }
void half_min(void* a, void* b, int* n, MPI_Datatype* t) { reduce_halves(a, b, n, t, [](float x, float y) { return std::min(x, y); }); }
void half_prod(void* a, void* b, int* n, MPI_Datatype* t) { reduce_halves(a, b, n, t, [](float x, float y) { return x * y; }); }
MPI_Op half_ops[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};

void make_half_types() {
  MPI_Type_contiguous(2, MPI_BYTE, &f16_type);
  MPI_Type_commit(&f16_type);
  MPI_Type_contiguous(2, MPI_BYTE, &bf16_type);
  MPI_Type_commit(&bf16_type);
  MPI_Op_create(&half_sum, 1, &half_ops[0]);
  MPI_Op_create(&half_max, 1, &half_ops[1]);
  MPI_Op_create(&half_min, 1, &half_ops[2]);
  MPI_Op_create(&half_prod, 1, &half_ops[3]);
}

MPI_Datatype mpi_type(ir::DType t) {
  switch (t) {
    case ir::DType::F32: return MPI_FLOAT;
    case ir::DType::F64: return MPI_DOUBLE;
    case ir::DType::F16: return f16_type;
    case ir::DType::BF16: return bf16_type;
    case ir::DType::I8: return MPI_INT8_T;
    case ir::DType::I16: return MPI_INT16_T;
    case ir::DType::I32: return MPI_INT32_T;
    case ir::DType::I64: return MPI_INT64_T;
    case ir::DType::U8: return MPI_UINT8_T;
    case ir::DType::U16: return MPI_UINT16_T;
    case ir::DType::U32: return MPI_UINT32_T;
    case ir::DType::U64: return MPI_UINT64_T;
    case ir::DType::Bool: return MPI_C_BOOL;
    default: return MPI_DATATYPE_NULL;
  }
}

// The bytes of an element: also what a call's size, which picks the blocking call or not, is in.
int64_t element_bytes(ir::DType t) {
  int bytes = 0;
  MPI_Type_size(mpi_type(t), &bytes);
  return bytes;
}

MPI_Op mpi_op(ir::DType t, Reduce r) {
  const int k = r == Reduce::Avg ? 0 : static_cast<int>(r);  // an average is a sum, then divided
  if (t == ir::DType::F16 || t == ir::DType::BF16) return half_ops[k];
  const MPI_Op ops[4] = {MPI_SUM, MPI_MAX, MPI_MIN, MPI_PROD};
  return ops[k];
}

// An average's sum, divided by the group's size (the rules allow it for floating dtypes only).
void divide(void* data, int64_t count, ir::DType t, int n) {
  const float inv = 1.0f / static_cast<float>(n);
  if (t == ir::DType::F32)
    for (int64_t i = 0; i < count; ++i) static_cast<float*>(data)[i] *= inv;
  else if (t == ir::DType::F64)
    for (int64_t i = 0; i < count; ++i) static_cast<double*>(data)[i] /= n;
  else {
    auto* h = static_cast<uint16_t*>(data);
    const bool bf = t == ir::DType::BF16;
    for (int64_t i = 0; i < count; ++i)
      h[i] = bf ? ir::float_to_bf16(ir::bf16_to_float(h[i]) / static_cast<float>(n))
                : ir::float_to_f16(ir::f16_to_float(h[i]) / static_cast<float>(n));
  }
}

int checked_count(int64_t n, const Call& c) {
  if (n > INT32_MAX) throw Error(c.label + ": more than 2^31-1 elements in one MPI call");
  return static_cast<int>(n);
}

class MpiTransport;
class MpiCommunicator;

constexpr int64_t kNeverBlocking = -1;
constexpr int kCheckTag = 1;  // the agreement check's messages (data: tag 0)
constexpr int kGroupTag = 2;  // the tokens of a group's making

// The largest call made blocking: ESG_MPI_BLOCKING_BELOW bytes, 16 MiB by default (beyond it,
// Open MPI 4.1's blocking allreduce on shared memory is many times slower than its
// nonblocking one: bench/RESULTS.md).
int64_t blocking_below() {
  const char* v = std::getenv("ESG_MPI_BLOCKING_BELOW");
  return v && *v ? std::strtoll(v, nullptr, 10) : int64_t{16} << 20;
}

// Watches the blocking call under way (one at a time: the callers hold dist::World::turn()):
// past its deadline it prints who is behind and aborts the job, since a blocking MPI call cannot
// be left. A thread of its own, started with the first call, looks every 20 ms and times a call
// from when it first sees it, so arming and disarming cost a store and a compare-and-swap (a
// 1 KiB all_reduce is about a microsecond). A call outliving its deadline is
// claimed by swapping its number for kFiring: its caller cannot disarm it after that, so its
// label stays valid while the message is written.
class Watchdog {
 public:
  ~Watchdog() { stop(); }
  // The call's number, for disarm.
  uint64_t arm(MpiCommunicator& comm, const Call& c, int peer) {
    if (!started_.load(std::memory_order_acquire)) start();
    comm_ = &comm;
    label_ = &c.label;
    peer_ = peer;
    timeout_ms_.store(c.timeout_ms, std::memory_order_relaxed);
    const uint64_t call = ++calls_;
    armed_.store(call, std::memory_order_release);  // publishes the fields above
    return call;
  }
  void disarm(uint64_t call) {
    uint64_t armed = call;
    if (armed_.compare_exchange_strong(armed, 0, std::memory_order_acq_rel)) return;
    if (armed != kFiring) {  // another call armed meanwhile: a caller without dist::World::turn()
      std::fprintf(stderr, "esgraph: internal error: two collectives of this process at once (call %llu armed over %llu)\n",
                   static_cast<unsigned long long>(armed), static_cast<unsigned long long>(call));
      std::abort();
    }
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // claimed: the watchdog is ending the job
  }
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_.store(true);
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  static constexpr uint64_t kFiring = ~uint64_t{0};
  void start() {
    std::lock_guard<std::mutex> lock(mu_);
    if (started_.load() || stopping_.load()) return;
    thread_ = std::thread([this] { watch(); });
    started_.store(true, std::memory_order_release);
  }
  void watch();

  std::mutex mu_;  // starting and stopping the thread only
  std::thread thread_;
  std::atomic<bool> started_{false}, stopping_{false};
  std::atomic<uint64_t> armed_{0};  // the number of the call under way; 0: none
  uint64_t calls_ = 0;              // calls armed so far (by the callers, in turn)
  std::atomic<int64_t> timeout_ms_{0};
  MpiCommunicator* comm_ = nullptr;
  const std::string* label_ = nullptr;
  int peer_ = -1;
};

class MpiCommunicator final : public Communicator {
 public:
  // Makes the group's arrival counters (a window of one per member), with every member.
  MpiCommunicator(MpiTransport& t, MPI_Comm comm, std::vector<int> world_ranks, int rank);
  void end_epoch() { MPI_Win_unlock_all(board_); }
  // The communicator and its window are left to MPI_Finalize: freeing either is collective,
  // and a peer may be gone by the time this one is destroyed.
  ~MpiCommunicator() override = default;

  void all_reduce(const void* in, void* out, int64_t count, ir::DType type, Reduce op, const Call& c) override {
    // A 16-bit float's average is each rank's share summed: summing first would round every
    // partial sum to 16 bits and overflow where the average does not.
    const bool halves = type == ir::DType::F16 || type == ir::DType::BF16;
    if (op == Reduce::Avg && halves) {
      if (in != out) std::memcpy(out, in, static_cast<size_t>(count) * 2);
      divide(out, count, type, this->size());
      in = out;
      op = Reduce::Sum;
    }
    // Counts beyond an int go in pieces (a reduction is elementwise).
    const int64_t step = INT32_MAX / 2, size = element_bytes(type);
    for (int64_t at = 0; at < count || at == 0; at += step) {
      const int n = static_cast<int>(std::min(step, count - at));
      const void* src = in == out ? MPI_IN_PLACE : static_cast<const uint8_t*>(in) + at * size;
      run(c, n * size, [&](MPI_Request* q) {
        uint8_t* dst = static_cast<uint8_t*>(out) + at * size;
        return q ? MPI_Iallreduce(src, dst, n, mpi_type(type), mpi_op(type, op), comm_, q)
                 : MPI_Allreduce(src, dst, n, mpi_type(type), mpi_op(type, op), comm_);
      });
      if (count == 0) break;
    }
    if (op == Reduce::Avg) divide(out, count, type, this->size());
  }
  void all_gather(const void* in, void* out, int64_t bytes, const Call& c) override {
    const int n = checked_count(bytes, c);
    run(c, bytes, [&](MPI_Request* q) {
      return q ? MPI_Iallgather(in, n, MPI_BYTE, out, n, MPI_BYTE, comm_, q) : MPI_Allgather(in, n, MPI_BYTE, out, n, MPI_BYTE, comm_);
    });
  }
  void reduce_scatter(const void* in, void* out, int64_t count, ir::DType type, Reduce op, const Call& c) override {
    const int n = checked_count(count * this->size(), c) / this->size();
    // A 16-bit float's average: each rank's share summed, as all_reduce's (its input is read-only).
    std::vector<uint16_t> shares;
    if (op == Reduce::Avg && (type == ir::DType::F16 || type == ir::DType::BF16)) {
      shares.assign(static_cast<const uint16_t*>(in), static_cast<const uint16_t*>(in) + count * this->size());
      divide(shares.data(), count * this->size(), type, this->size());
      in = shares.data();
      op = Reduce::Sum;
    }
    run(c, count * this->size() * element_bytes(type), [&](MPI_Request* q) {
      return q ? MPI_Ireduce_scatter_block(in, out, n, mpi_type(type), mpi_op(type, op), comm_, q)
               : MPI_Reduce_scatter_block(in, out, n, mpi_type(type), mpi_op(type, op), comm_);
    });
    if (op == Reduce::Avg) divide(out, count, type, this->size());
  }
  void broadcast(void* buffer, int64_t bytes, int root, const Call& c) override {
    const int n = checked_count(bytes, c);
    run(c, bytes, [&](MPI_Request* q) { return q ? MPI_Ibcast(buffer, n, MPI_BYTE, root, comm_, q) : MPI_Bcast(buffer, n, MPI_BYTE, root, comm_); });
  }
  void all_to_all(const void* in, void* out, int64_t bytes, const Call& c) override {
    const int n = checked_count(bytes, c);
    run(c, bytes * this->size(), [&](MPI_Request* q) {
      return q ? MPI_Ialltoall(in, n, MPI_BYTE, out, n, MPI_BYTE, comm_, q) : MPI_Alltoall(in, n, MPI_BYTE, out, n, MPI_BYTE, comm_);
    });
  }
  void send(const void* in, int64_t bytes, int peer, const Call& c) override {
    const int n = checked_count(bytes, c);
    run(c, bytes, [&](MPI_Request* q) { return q ? MPI_Isend(in, n, MPI_BYTE, peer, 0, comm_, q) : MPI_Send(in, n, MPI_BYTE, peer, 0, comm_); }, peer);
  }
  void recv(void* out, int64_t bytes, int peer, const Call& c) override {
    const int n = checked_count(bytes, c);
    run(c, bytes, [&](MPI_Request* q) {
      return q ? MPI_Irecv(out, n, MPI_BYTE, peer, 0, comm_, q) : MPI_Recv(out, n, MPI_BYTE, peer, 0, comm_, MPI_STATUS_IGNORE);
    }, peer);
  }
  std::vector<uint64_t> swap(const std::vector<uint64_t>& values, int peer, const Call& c) override {
    std::vector<uint64_t> theirs(values.size());
    const int n = checked_count(static_cast<int64_t>(values.size()), c);
    // Both ways at once, on a tag of its own, polled with the deadline like the check's exchange.
    MPI_Request back = MPI_REQUEST_NULL;
    run(c, kNeverBlocking, [&](MPI_Request* q) {
      const int rc = MPI_Irecv(theirs.data(), n, MPI_UINT64_T, peer, kCheckTag, comm_, &back);
      return rc != MPI_SUCCESS ? rc : MPI_Isend(values.data(), n, MPI_UINT64_T, peer, kCheckTag, comm_, q);
    }, peer);
    run(c, kNeverBlocking, [&](MPI_Request* q) {
      *q = back;
      return MPI_SUCCESS;
    }, peer);
    return theirs;
  }
  std::vector<uint64_t> exchange(const std::vector<uint64_t>& values, const Call& c) override {
    std::vector<uint64_t> all(values.size() * static_cast<size_t>(size()));
    const int n = checked_count(static_cast<int64_t>(values.size()), c);
    // Always nonblocking: a rank that never arrives here is an error the caller can catch.
    run(c, kNeverBlocking, [&](MPI_Request* q) { return MPI_Iallgather(values.data(), n, MPI_UINT64_T, all.data(), n, MPI_UINT64_T, comm_, q); });
    return all;
  }

  // Who is behind, read from the members' counters: the error of a call past its deadline.
  std::string timeout_message(const Call& c, int peer);

 private:
  // Starts a call and waits for it until the deadline. `bytes`: what it moves, which picks the
  // blocking or the nonblocking call (kNeverBlocking: always the latter). `peer`: the one member
  // a send or a receive waits for (-1: all of them).
  template <typename Start>
  void run(const Call& c, int64_t bytes, Start start, int peer = -1);

  MpiTransport& transport_;
  MPI_Comm comm_;
  MPI_Win board_ = MPI_WIN_NULL;
  int64_t* entered_board_ = nullptr;  // this member's counter, in the window
  // Whether the window has separate public and private copies, so a store reaches the others'
  // reads only through MPI_Win_sync. In the unified model (Open MPI's, on shared memory and on
  // networks alike) it reaches them by itself, soon enough for a read made at a timeout; there
  // the sync, which also runs MPI's progress engine, would cost a small call a tenth of its time.
  bool separate_ = true;
  int64_t entered_ = 0;
};

class MpiTransport final : public Transport {
 public:
  // Makes the world's communicator now, while every rank is starting MPI anyway (a blocking
  // step): the agreement check and the world's collectives then wait with a deadline only.
  MpiTransport(MPI_Comm world, bool finalize, bool multiple) : world_(world), finalize_(finalize), multiple_(multiple) {
    MPI_Comm_size(world_, &size_);
    MPI_Comm_rank(world_, &rank_);
    std::vector<int> all(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) all[static_cast<size_t>(r)] = r;
    world_group_ = std::make_unique<MpiCommunicator>(*this, world_, all, rank_);
  }
  const char* name() const override { return "mpi"; }
  int size() const override { return size_; }
  int rank() const override { return rank_; }
  bool broken() const override { return broken_.load(); }
  void mark_broken() { broken_.store(true); }
  // Whether a call moving `bytes` is made blocking: under MPI_THREAD_MULTIPLE only (the
  // watchdog reads the counters while the caller waits in MPI), up to blocking_below().
  bool blocking(int64_t bytes) const { return multiple_ && bytes != kNeverBlocking && bytes <= largest_blocking_; }
  Watchdog& watchdog() { return watchdog_; }
  // Held around each MPI call unless MPI runs at MPI_THREAD_MULTIPLE (a caller's own
  // MPI_Init may have asked for less).
  std::unique_lock<std::mutex> serialize() { return multiple_ ? std::unique_lock<std::mutex>() : std::unique_lock<std::mutex>(mpi_mu); }

  // The world's communicator is handed over once (dist::World keeps each group's). Another
  // group is made by its members once all of them are known to be here: each sends every other
  // a token and waits for theirs with the deadline, so the blocking MPI_Comm_create_group that
  // follows is never left waiting for a member that does not come.
  std::unique_ptr<Communicator> group(const std::vector<int>& world_ranks, int64_t timeout_ms) override {
    if (world_group_ && world_ranks == world_group_->world_ranks()) return std::move(world_group_);
    const std::string what = "making the communicator of the group " + ranks_str(world_ranks);
    if (broken_) throw Error(what + ": an earlier collective of this process timed out, so its transport is unusable");
    rendezvous(world_ranks, timeout_ms, what);
    std::unique_lock<std::mutex> lock = serialize();
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Group all = MPI_GROUP_NULL, some = MPI_GROUP_NULL;
    int rc = MPI_Comm_group(world_, &all);
    if (rc == MPI_SUCCESS) rc = MPI_Group_incl(all, static_cast<int>(world_ranks.size()), world_ranks.data(), &some);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_create_group(world_, some, 0, &comm);
    if (some != MPI_GROUP_NULL) MPI_Group_free(&some);
    if (all != MPI_GROUP_NULL) MPI_Group_free(&all);
    if (rc != MPI_SUCCESS) throw Error(what + ": " + mpi_error(rc));
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    return std::make_unique<MpiCommunicator>(*this, comm, world_ranks, rank);
  }

  void shutdown() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;  // the caller's MPI_Finalize ran release() first
    release();
    if (finalize_) MPI_Finalize();
  }
  // Before MPI ends, whoever ends it (a caller's own MPI_Finalize reaches here through the
  // attribute on MPI_COMM_SELF that open() sets): the watchdog stopped, the groups' windows out
  // of their access epochs; or, if a call timed out, the job aborted, since finalizing would
  // wait for that call forever.
  void release() {
    if (released_.exchange(true)) return;
    watchdog_.stop();
    if (broken_) MPI_Abort(world_, 1);
    for (MpiCommunicator* c : groups_) c->end_epoch();
  }
  void made(MpiCommunicator* c) { groups_.push_back(c); }

 private:
  // A token to every other member of `members` and one from each, within `timeout_ms`; else an
  // Error naming those whose token did not come (the transport is then broken: the requests
  // stay pending).
  void rendezvous(const std::vector<int>& members, int64_t timeout_ms, const std::string& what) {
    const int token = 1;
    std::vector<int> tokens(members.size(), 0);
    std::vector<MPI_Request> recvs(members.size(), MPI_REQUEST_NULL), sends(members.size(), MPI_REQUEST_NULL);
    {
      std::unique_lock<std::mutex> lock = serialize();
      for (size_t i = 0; i < members.size(); ++i) {
        if (members[i] == rank_) continue;
        MPI_Irecv(&tokens[i], 1, MPI_INT, members[i], kGroupTag, world_, &recvs[i]);
        MPI_Isend(&token, 1, MPI_INT, members[i], kGroupTag, world_, &sends[i]);
      }
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      int all_done = 0;
      {
        std::unique_lock<std::mutex> lock = serialize();
        int received = 0, sent = 0;
        MPI_Testall(static_cast<int>(recvs.size()), recvs.data(), &received, MPI_STATUSES_IGNORE);
        MPI_Testall(static_cast<int>(sends.size()), sends.data(), &sent, MPI_STATUSES_IGNORE);
        all_done = received && sent;
      }
      if (all_done) return;
      if (std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::yield();
    }
    broken_ = true;
    std::string missing;
    for (size_t i = 0; i < members.size(); ++i)
      if (members[i] != rank_ && recvs[i] != MPI_REQUEST_NULL) missing += (missing.empty() ? "" : ", ") + std::to_string(members[i]);
    throw Error(what + " did not finish within " + std::to_string(timeout_ms) + " ms: rank " + missing +
                " did not come (ESG_COLLECTIVE_TIMEOUT_MS sets the timeout; the job ends when this process exits)");
  }

  MPI_Comm world_;
  std::unique_ptr<MpiCommunicator> world_group_;
  bool finalize_, multiple_;
  const int64_t largest_blocking_ = blocking_below();
  std::atomic<bool> broken_{false}, released_{false};
  std::vector<MpiCommunicator*> groups_;  // every group's, for release(); each lives until the process ends
  Watchdog watchdog_;
  int size_ = 1, rank_ = 0;
};

MpiCommunicator::MpiCommunicator(MpiTransport& t, MPI_Comm comm, std::vector<int> world_ranks, int rank)
    : Communicator(std::move(world_ranks), rank), transport_(t), comm_(comm) {
  const int rc = MPI_Win_allocate(sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, comm_, &entered_board_, &board_);
  if (rc != MPI_SUCCESS) throw Error("making the arrival counters of a group: " + mpi_error(rc));
  *entered_board_ = 0;
  int* model = nullptr;
  int found = 0;
  if (MPI_Win_get_attr(board_, MPI_WIN_MODEL, &model, &found) == MPI_SUCCESS && found) separate_ = *model != MPI_WIN_UNIFIED;
  MPI_Win_lock_all(MPI_MODE_NOCHECK, board_);
  MPI_Barrier(comm_);  // every member's counter is 0 before anyone reads it
  t.made(this);
}

template <typename Start>
void MpiCommunicator::run(const Call& c, int64_t bytes, Start start, int peer) {
  // Up to blocking_below() bytes, the blocking call (Open MPI's coll/tuned algorithms, faster
  // there than the nonblocking schedules of coll/libnbc) under the watchdog; beyond it, and for
  // the agreement check, the nonblocking one polled with a deadline.
  // (One call at a time, the caller holding dist::World::turn(): the watchdog watches one.)
  const bool blocking = transport_.blocking(bytes);
  // A call that timed out is still pending in MPI, and would match this one on the other ranks.
  if (transport_.broken())
    throw Error(c.label + ": an earlier collective of this process timed out, so its transport is unusable; the job ends when "
                          "this process exits");
  MPI_Request request = MPI_REQUEST_NULL;
  {
    std::unique_lock<std::mutex> lock = transport_.serialize();
    __atomic_store_n(entered_board_, ++entered_, __ATOMIC_RELAXED);  // whole: others may read it meanwhile
    if (separate_) MPI_Win_sync(board_);
    if (blocking) {  // (no lock held: blocking means MPI_THREAD_MULTIPLE)
      const uint64_t call = transport_.watchdog().arm(*this, c, peer);
      const int rc = start(nullptr);
      transport_.watchdog().disarm(call);
      if (rc != MPI_SUCCESS) throw Error(c.label + ": " + mpi_error(rc));
      return;
    }
    const int rc = start(&request);
    if (rc != MPI_SUCCESS) throw Error(c.label + ": " + mpi_error(rc));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(c.timeout_ms);
  for (uint64_t spin = 0;; ++spin) {
    int done = 0, rc = MPI_SUCCESS;
    {
      std::unique_lock<std::mutex> lock = transport_.serialize();
      rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    }
    if (rc != MPI_SUCCESS) throw Error(c.label + ": " + mpi_error(rc));
    if (done) return;
    if ((spin & 1023) == 1023) {
      if (std::chrono::steady_clock::now() > deadline) {
        transport_.mark_broken();
        throw Error(timeout_message(c, peer));
      }
      // Past the first milliseconds the wait is a long one: leave the core to compute.
      if (spin > (1u << 16)) std::this_thread::yield();
    }
  }
}

std::string MpiCommunicator::timeout_message(const Call& c, int peer) {
  std::string behind;
  bool unread = false;
  {
    std::unique_lock<std::mutex> lock = transport_.serialize();
    for (int r = 0; r < size(); ++r) {
      if (r == rank() || (peer >= 0 && r != peer)) continue;
      // A request-based read, given two seconds: where the window is not shared memory, reading
      // may need the target's progress, which a rank stuck outside MPI never makes.
      int64_t theirs = 0;
      MPI_Request read = MPI_REQUEST_NULL;
      int done = 0;
      if (MPI_Rget(&theirs, 1, MPI_INT64_T, r, 0, 1, MPI_INT64_T, board_, &read) == MPI_SUCCESS) {
        const auto grace = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        while (!done && std::chrono::steady_clock::now() < grace) MPI_Test(&read, &done, MPI_STATUS_IGNORE);
      }
      if (!done) {
        unread = true;
        continue;
      }
      if (theirs < entered_)
        behind += (behind.empty() ? "" : "; ") + std::string("rank ") + std::to_string(world_ranks()[static_cast<size_t>(r)]) +
                  " has entered " + std::to_string(theirs) + " of this group's collectives, this rank " + std::to_string(entered_);
    }
  }
  const std::string who = !behind.empty() ? behind
                          : unread        ? std::string("the other ranks' arrival counters could not be read")
                                          : std::string("every rank reached it, so one is stuck inside it or left the job");
  return c.label + " did not finish within " + std::to_string(c.timeout_ms) + " ms: " + who + " (ESG_COLLECTIVE_TIMEOUT_MS sets the timeout)";
}

int release_at_finalize(MPI_Comm, int, void* transport, void*) {
  static_cast<MpiTransport*>(transport)->release();
  return MPI_SUCCESS;
}

void Watchdog::watch() {
  uint64_t seen = 0;  // the call under way at the last look, and when it was first seen
  auto since = std::chrono::steady_clock::now();
  while (!stopping_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    uint64_t call = armed_.load(std::memory_order_acquire);
    const auto now = std::chrono::steady_clock::now();
    if (call != seen) {
      seen = call;
      since = now;
      continue;
    }
    const int64_t timeout_ms = timeout_ms_.load(std::memory_order_relaxed);
    if (call == 0 || now - since < std::chrono::milliseconds(timeout_ms)) continue;
    if (!armed_.compare_exchange_strong(call, kFiring, std::memory_order_acq_rel)) continue;  // it ended meanwhile
    const std::string message = comm_->timeout_message({*label_, timeout_ms}, peer_);
    std::fprintf(stderr, "esgraph: %s; ending the job\n", message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

}  // namespace
}  // namespace esg::dist

// The plugin's entry point (dist/world.cpp): a transport over `comm` (an MPI_Comm*; null for
// MPI_COMM_WORLD), starting MPI unless the caller already has.
extern "C" __attribute__((visibility("default"))) esg::dist::Transport* esg_mpi_transport_open(const void* comm, char* error,
                                                                                                 size_t error_size) {
  auto fail = [&](const std::string& message) -> esg::dist::Transport* {
    std::snprintf(error, error_size, "%s", message.c_str());
    return nullptr;
  };
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    if (comm) return fail("a communicator was handed over but MPI is not initialized");
    int provided = 0;
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) return fail("MPI_Init_thread failed: " + esg::dist::mpi_error(rc));
  }
  MPI_Comm world = MPI_COMM_NULL;
  const int rc = MPI_Comm_dup(comm ? *static_cast<const MPI_Comm*>(comm) : MPI_COMM_WORLD, &world);
  if (rc != MPI_SUCCESS) return fail("MPI_Comm_dup failed: " + esg::dist::mpi_error(rc));
  MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
  esg::dist::make_half_types();
  int level = 0;
  MPI_Query_thread(&level);
  if (level < MPI_THREAD_SERIALIZED)
    return fail("MPI runs at thread level " + std::to_string(level) + ", below MPI_THREAD_SERIALIZED: esgraph makes its calls on the "
                "threads of a model's pool; start MPI with MPI_Init_thread and MPI_THREAD_MULTIPLE (or MPI_THREAD_SERIALIZED, "
                "with no MPI call of your own while a model runs)");
  auto* transport = new esg::dist::MpiTransport(world, !initialized, level == MPI_THREAD_MULTIPLE);
  // MPI_Finalize deletes MPI_COMM_SELF's attributes first: ours releases the transport then.
  int key = MPI_KEYVAL_INVALID;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, &esg::dist::release_at_finalize, &key, nullptr);
  MPI_Comm_set_attr(MPI_COMM_SELF, key, transport);
  return transport;
}
