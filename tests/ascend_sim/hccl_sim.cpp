// The simulated HCCL (libhccl.so next to the simulated AscendCL): the functions the backend
// resolves (compiler_core/ascend/hccl_api.hpp), with CANN's argument rules for Atlas A2
// (docs/ascend.md), each collective queued on its simulated stream. The ranks of an mpirun job
// are the devices: a communicator of several ranks runs over MPI (each rank its own process, as
// each NPU has its own), one of a single rank copies. The exchange itself is the simplest that
// is right: every member's bytes to every member, reduced locally in double, so the simulator
// checks esgraph's calls, not an algorithm of its own.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef ACLSIM_HCCL_MPI
#include <mpi.h>
#endif

#include "aclnn_sim.hpp"
#include "ascend/hccl_api.hpp"
#include "ir/half.hpp"

namespace {

using esg::ascend::hccl::Comm;
using esg::ascend::hccl::DataType;
using esg::ascend::hccl::ReduceOp;
using esg::ascend::hccl::Result;
using esg::ascend::hccl::RootInfo;
namespace hccl = esg::ascend::hccl;

constexpr Result kSuccess = 0, kParam = 1, kPtr = 2, kInternal = 4, kNotSupport = 5;
constexpr uint64_t kMaxCount = 0x7FFFFFFFFull;  // SYS_MAX_COUNT
constexpr char kMagic[] = "ACLSIM-HCCL-ROOT";

struct RootData {  // what HcclGetRootInfo writes into the opaque bytes
  char magic[sizeof kMagic];
  int world_rank;  // the root's, in MPI_COMM_WORLD
  int id;          // distinguishes the root infos of one process
};

struct SimComm {
  uint32_t size = 1, rank = 0;
#ifdef ACLSIM_HCCL_MPI
  MPI_Comm comm = MPI_COMM_NULL;
#endif
};

std::mutex mu;
std::set<SimComm*> live;
thread_local std::string last_error;

Result fail(Result code, const char* call, const std::string& message) {
  last_error = message;
  aclsim_fail(call, message.c_str());
  return code;
}

SimComm* find(Comm comm) {
  std::lock_guard<std::mutex> lock(mu);
  return live.count(static_cast<SimComm*>(comm)) ? static_cast<SimComm*>(comm) : nullptr;
}

size_t element_size(DataType t) {
  switch (t) {
    case hccl::kInt8: case hccl::kUint8: return 1;
    case hccl::kInt16: case hccl::kUint16: case hccl::kFp16: case hccl::kBf16: return 2;
    case hccl::kInt32: case hccl::kUint32: case hccl::kFp32: return 4;
    case hccl::kInt64: case hccl::kUint64: case hccl::kFp64: return 8;
  }
  return 0;
}

double load(const uint8_t* p, DataType t) {
  switch (t) {
    case hccl::kInt8: return *reinterpret_cast<const int8_t*>(p);
    case hccl::kInt16: return *reinterpret_cast<const int16_t*>(p);
    case hccl::kInt32: return *reinterpret_cast<const int32_t*>(p);
    case hccl::kInt64: return static_cast<double>(*reinterpret_cast<const int64_t*>(p));
    case hccl::kFp16: return esg::ir::f16_to_float(*reinterpret_cast<const uint16_t*>(p));
    case hccl::kBf16: return esg::ir::bf16_to_float(*reinterpret_cast<const uint16_t*>(p));
    case hccl::kFp32: return *reinterpret_cast<const float*>(p);
    default: return 0;
  }
}

void store(uint8_t* p, DataType t, double v) {
  switch (t) {
    case hccl::kInt8: *reinterpret_cast<int8_t*>(p) = static_cast<int8_t>(v); break;
    case hccl::kInt16: *reinterpret_cast<int16_t*>(p) = static_cast<int16_t>(v); break;
    case hccl::kInt32: *reinterpret_cast<int32_t*>(p) = static_cast<int32_t>(v); break;
    case hccl::kInt64: *reinterpret_cast<int64_t*>(p) = static_cast<int64_t>(v); break;
    case hccl::kFp16: *reinterpret_cast<uint16_t*>(p) = esg::ir::float_to_f16(static_cast<float>(v)); break;
    case hccl::kBf16: *reinterpret_cast<uint16_t*>(p) = esg::ir::float_to_bf16(static_cast<float>(v)); break;
    case hccl::kFp32: *reinterpret_cast<float*>(p) = static_cast<float>(v); break;
    default: break;
  }
}

// Atlas A2's reductions: int8, int16, int32, int64, fp16, fp32, bf16; prod not on int16 or bf16.
std::string reduction_refusal(DataType t, ReduceOp op) {
  if (op < hccl::kSum || op > hccl::kMin) return "op " + std::to_string(op) + " is no HcclReduceOp";
  const bool typed = t == hccl::kInt8 || t == hccl::kInt16 || t == hccl::kInt32 || t == hccl::kInt64 || t == hccl::kFp16 ||
                     t == hccl::kFp32 || t == hccl::kBf16;
  if (!typed) return "data type " + std::to_string(t) + " cannot be reduced on Atlas A2";
  if (op == hccl::kProd && (t == hccl::kInt16 || t == hccl::kBf16)) return "HCCL_REDUCE_PROD takes no int16 or bf16";
  return "";
}

// Every member's `bytes` at `in`, gathered in rank order (a communicator of one: its own).
std::vector<uint8_t> everyone(SimComm& c, const void* in, size_t bytes) {
  std::vector<uint8_t> all(bytes * c.size);
  if (c.size == 1) {
    std::memcpy(all.data(), in, bytes);
    return all;
  }
#ifdef ACLSIM_HCCL_MPI
  if (MPI_Allgather(in, static_cast<int>(bytes), MPI_BYTE, all.data(), static_cast<int>(bytes), MPI_BYTE, c.comm) != MPI_SUCCESS)
    throw std::runtime_error("MPI_Allgather failed");
#endif
  return all;
}

// The checks every call makes: a live communicator, device memory of the call's extent, a count
// within SYS_MAX_COUNT, buffers aligned to their elements; then the work queued on `stream`.
Result queue(const char* call, Comm comm, std::initializer_list<std::pair<const void*, uint64_t>> buffers, uint64_t count, DataType type,
             void* stream, std::function<void(SimComm&)> work) {
  SimComm* c = find(comm);
  if (!c) return fail(kPtr, call, "not a communicator (HcclCommInitRootInfo makes them)");
  if (!stream) return fail(kPtr, call, "the stream is null");
  if (element_size(type) == 0) return fail(kNotSupport, call, "data type " + std::to_string(type) + " is not supported");
  if (count > kMaxCount) return fail(kParam, call, "count " + std::to_string(count) + " is beyond SYS_MAX_COUNT");
  for (const auto& [p, elements] : buffers) {
    if (!p) return fail(kPtr, call, "a buffer is null");
    if (reinterpret_cast<uintptr_t>(p) % element_size(type))
      return fail(kParam, call, "a buffer is not aligned to its " + std::to_string(element_size(type)) + "-byte elements");
    try {
      aclsim_check_device(p, elements * element_size(type), call);
    } catch (const std::exception& e) {
      return fail(kParam, call, e.what());
    }
  }
  std::function<void()> task = [c, work] { work(*c); };
  return aclsim_enqueue(stream, call, &task) == 0 ? kSuccess : kParam;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) const char* HcclGetErrorString(Result code) {
  static thread_local std::string text;
  text = "HCCL error " + std::to_string(code) + (last_error.empty() ? "" : " (" + last_error + ")");
  return text.c_str();
}

__attribute__((visibility("default"))) Result HcclGetRootInfo(RootInfo* info) {
  if (!info) return fail(kPtr, "HcclGetRootInfo", "rootInfo is null");
  static int next_id = 0;
  RootData d{};
  std::memcpy(d.magic, kMagic, sizeof kMagic);
#ifdef ACLSIM_HCCL_MPI
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) MPI_Comm_rank(MPI_COMM_WORLD, &d.world_rank);
#endif
  d.id = next_id++;
  std::memset(info, 0, sizeof *info);
  std::memcpy(info->internal, &d, sizeof d);
  aclsim_log("HcclGetRootInfo");
  return kSuccess;
}

__attribute__((visibility("default"))) Result HcclCommInitRootInfo(uint32_t n, const RootInfo* info, uint32_t rank, Comm* comm) {
  const char* call = "HcclCommInitRootInfo";
  if (!info || !comm) return fail(kPtr, call, "rootInfo or comm is null");
  RootData d;
  std::memcpy(&d, info->internal, sizeof d);
  if (std::memcmp(d.magic, kMagic, sizeof kMagic) != 0) return fail(kParam, call, "rootInfo is not one HcclGetRootInfo made");
  if (n == 0 || rank >= n) return fail(kParam, call, "rank " + std::to_string(rank) + " of " + std::to_string(n) + " ranks");
  auto c = std::make_unique<SimComm>();
  c->size = n, c->rank = rank;
  if (n > 1) {
#ifdef ACLSIM_HCCL_MPI
    int initialized = 0, level = 0, me = 0;
    MPI_Initialized(&initialized);
    if (!initialized) return fail(kNotSupport, call, "the simulated HCCL runs several ranks as the processes of an mpirun job");
    MPI_Query_thread(&level);
    if (level != MPI_THREAD_MULTIPLE) return fail(kNotSupport, call, "the simulated HCCL needs MPI_THREAD_MULTIPLE (its streams are threads)");
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    // The members tell the root their world ranks; the root tells them all the group's.
    const int tag = 7000 + d.id % 1000;
    std::vector<int> members(n, -1);
    if (me == d.world_rank) {
      members[rank] = me;
      for (uint32_t k = 1; k < n; ++k) {
        int hello[2];
        MPI_Recv(hello, 2, MPI_INT, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (hello[0] < 0 || static_cast<uint32_t>(hello[0]) >= n || members[static_cast<size_t>(hello[0])] >= 0)
          return fail(kParam, call, "two members claim rank " + std::to_string(hello[0]));
        members[static_cast<size_t>(hello[0])] = hello[1];
      }
      for (uint32_t k = 0; k < n; ++k)
        if (members[k] != me) MPI_Send(members.data(), static_cast<int>(n), MPI_INT, members[k], tag, MPI_COMM_WORLD);
    } else {
      const int hello[2] = {static_cast<int>(rank), me};
      MPI_Send(hello, 2, MPI_INT, d.world_rank, tag, MPI_COMM_WORLD);
      MPI_Recv(members.data(), static_cast<int>(n), MPI_INT, d.world_rank, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Group world_group, group;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    MPI_Group_incl(world_group, static_cast<int>(n), members.data(), &group);
    MPI_Comm_create_group(MPI_COMM_WORLD, group, tag, &c->comm);
    MPI_Group_free(&group);
    MPI_Group_free(&world_group);
#else
    return fail(kNotSupport, call, "this simulated HCCL was built without MPI: one rank only");
#endif
  }
  std::lock_guard<std::mutex> lock(mu);
  *comm = c.get();
  live.insert(c.release());
  aclsim_log(("HcclCommInitRootInfo " + std::to_string(rank) + "/" + std::to_string(n)).c_str());
  return kSuccess;
}

__attribute__((visibility("default"))) Result HcclCommDestroy(Comm comm) {
  std::lock_guard<std::mutex> lock(mu);
  auto* c = static_cast<SimComm*>(comm);
  if (!live.erase(c)) return fail(kPtr, "HcclCommDestroy", "not a communicator");
  delete c;
  return kSuccess;
}

__attribute__((visibility("default"))) Result HcclGetRankSize(Comm comm, uint32_t* size) {
  SimComm* c = find(comm);
  if (!c || !size) return fail(kPtr, "HcclGetRankSize", "not a communicator, or size is null");
  *size = c->size;
  return kSuccess;
}

__attribute__((visibility("default"))) Result HcclGetRankId(Comm comm, uint32_t* rank) {
  SimComm* c = find(comm);
  if (!c || !rank) return fail(kPtr, "HcclGetRankId", "not a communicator, or rank is null");
  *rank = c->rank;
  return kSuccess;
}

__attribute__((visibility("default"))) Result HcclAllReduce(void* send, void* recv, uint64_t count, DataType type, ReduceOp op, Comm comm,
                                                           void* stream) {
  if (const std::string why = reduction_refusal(type, op); !why.empty()) return fail(kNotSupport, "HcclAllReduce", why);
  return queue("HcclAllReduce", comm, {{send, count}, {recv, count}}, count, type, stream, [=](SimComm& c) {
    const size_t bytes = count * element_size(type);
    const std::vector<uint8_t> all = everyone(c, send, bytes);
    for (uint64_t i = 0; i < count; ++i) {
      double v = load(all.data() + i * element_size(type), type);
      for (uint32_t r = 1; r < c.size; ++r) {
        const double w = load(all.data() + r * bytes + i * element_size(type), type);
        v = op == hccl::kSum ? v + w : op == hccl::kProd ? v * w : op == hccl::kMax ? std::max(v, w) : std::min(v, w);
      }
      store(static_cast<uint8_t*>(recv) + i * element_size(type), type, v);
    }
  });
}

__attribute__((visibility("default"))) Result HcclReduceScatter(void* send, void* recv, uint64_t count, DataType type, ReduceOp op, Comm comm,
                                                               void* stream) {
  if (const std::string why = reduction_refusal(type, op); !why.empty()) return fail(kNotSupport, "HcclReduceScatter", why);
  SimComm* c0 = find(comm);
  const uint64_t members = c0 ? c0->size : 1;
  return queue("HcclReduceScatter", comm, {{send, count * members}, {recv, count}}, count, type, stream, [=](SimComm& c) {
    const size_t bytes = count * c.size * element_size(type);
    const std::vector<uint8_t> all = everyone(c, send, bytes);
    for (uint64_t i = 0; i < count; ++i) {
      const uint64_t at = (c.rank * count + i) * element_size(type);
      double v = load(all.data() + at, type);
      for (uint32_t r = 1; r < c.size; ++r) {
        const double w = load(all.data() + r * bytes + at, type);
        v = op == hccl::kSum ? v + w : op == hccl::kProd ? v * w : op == hccl::kMax ? std::max(v, w) : std::min(v, w);
      }
      store(static_cast<uint8_t*>(recv) + i * element_size(type), type, v);
    }
  });
}

__attribute__((visibility("default"))) Result HcclAllGather(void* send, void* recv, uint64_t count, DataType type, Comm comm, void* stream) {
  SimComm* c0 = find(comm);
  const uint64_t members = c0 ? c0->size : 1;
  return queue("HcclAllGather", comm, {{send, count}, {recv, count * members}}, count, type, stream, [=](SimComm& c) {
    const std::vector<uint8_t> all = everyone(c, send, count * element_size(type));
    std::memcpy(recv, all.data(), all.size());
  });
}

__attribute__((visibility("default"))) Result HcclBroadcast(void* buffer, uint64_t count, DataType type, uint32_t root, Comm comm, void* stream) {
  SimComm* c0 = find(comm);
  if (c0 && root >= c0->size) return fail(kParam, "HcclBroadcast", "root " + std::to_string(root) + " of " + std::to_string(c0->size) + " ranks");
  return queue("HcclBroadcast", comm, {{buffer, count}}, count, type, stream, [=](SimComm& c) {
    const size_t bytes = count * element_size(type);
    const std::vector<uint8_t> all = everyone(c, buffer, bytes);
    std::memcpy(buffer, all.data() + root * bytes, bytes);
  });
}

__attribute__((visibility("default"))) Result HcclAlltoAll(const void* send, uint64_t send_count, DataType send_type, const void* recv,
                                                          uint64_t recv_count, DataType recv_type, Comm comm, void* stream) {
  const char* call = "HcclAlltoAll";
  if (recv_count != send_count || recv_type != send_type) return fail(kParam, call, "recvCount and recvType must equal sendCount and sendType");
  if (send == recv) return fail(kParam, call, "recvBuf must not be sendBuf");
  SimComm* c0 = find(comm);
  const uint64_t members = c0 ? c0->size : 1;
  return queue(call, comm, {{send, send_count * members}, {recv, send_count * members}}, send_count, send_type, stream, [=](SimComm& c) {
    const size_t piece = send_count * element_size(send_type), bytes = piece * c.size;
    const std::vector<uint8_t> all = everyone(c, send, bytes);  // every member's pieces for everyone
    for (uint32_t r = 0; r < c.size; ++r)
      std::memcpy(static_cast<uint8_t*>(const_cast<void*>(recv)) + r * piece, all.data() + r * bytes + c.rank * piece, piece);
  });
}

__attribute__((visibility("default"))) Result HcclSend(void* send, uint64_t count, DataType type, uint32_t dest, Comm comm, void* stream) {
  SimComm* c0 = find(comm);
  if (c0 && (dest >= c0->size || dest == c0->rank)) return fail(kParam, "HcclSend", "destRank " + std::to_string(dest) + " is not another member");
  return queue("HcclSend", comm, {{send, count}}, count, type, stream, [=](SimComm& c) {
#ifdef ACLSIM_HCCL_MPI
    // Synchronous, as HCCL's: it ends when the peer's HcclRecv has taken the data, or fails
    // with HCCL_E_TIMEOUT after HCCL_EXEC_TIMEOUT seconds (CANN's default 1836) as CANN's does.
    MPI_Request request;
    if (MPI_Issend(send, static_cast<int>(count * element_size(type)), MPI_BYTE, static_cast<int>(dest), 0, c.comm, &request) != MPI_SUCCESS)
      throw std::runtime_error("MPI_Issend failed");
    const char* limit = std::getenv("HCCL_EXEC_TIMEOUT");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(limit && *limit ? std::atoll(limit) : 1836);
    for (int done = 0; !done;) {
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (!done && std::chrono::steady_clock::now() > deadline)
        throw std::runtime_error("HCCL_E_TIMEOUT: no HcclRecv of rank " + std::to_string(dest) + " took this send (HCCL's sends are synchronous: pair them)");
    }
#else
    (void)c;
#endif
  });
}

__attribute__((visibility("default"))) Result HcclRecv(void* recv, uint64_t count, DataType type, uint32_t src, Comm comm, void* stream) {
  SimComm* c0 = find(comm);
  if (c0 && (src >= c0->size || src == c0->rank)) return fail(kParam, "HcclRecv", "srcRank " + std::to_string(src) + " is not another member");
  return queue("HcclRecv", comm, {{recv, count}}, count, type, stream, [=](SimComm& c) {
#ifdef ACLSIM_HCCL_MPI
    if (MPI_Recv(recv, static_cast<int>(count * element_size(type)), MPI_BYTE, static_cast<int>(src), 0, c.comm, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      throw std::runtime_error("MPI_Recv failed");
#else
    (void)c;
#endif
  });
}

}  // extern "C"
