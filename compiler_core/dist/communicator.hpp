// A group of ranks that exchange tensors: the one interface the collectives' kernels call, with
// one implementation per transport (Open MPI on the host, loaded as a plugin: dist/mpi/; a
// group of one process: local_communicator.cpp). Every call blocks until its part is done or
// the timeout passes; nothing of a transport leaks above this header.
#pragma once
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/dtype.hpp"

namespace esg::dist {

enum class Reduce : uint8_t { Sum, Max, Min, Prod, Avg };  // the order of the ops' `op` enum
const char* reduce_name(Reduce r);
// "[0,1]", as messages and reports name groups (inline: the MPI plugin links no library of ours).
inline std::string ranks_str(const std::vector<int>& ranks) {
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? "," : "") + std::to_string(ranks[i]);
  return s + "]";
}

// A collective that failed: a rank that never arrived within the timeout, ranks that disagree
// on what they run, or the transport's own error. The message names the collective and the
// ranks. A transport whose collective timed out is broken for good (its request can never be
// withdrawn): the process then aborts the job when it exits (world.hpp) rather than hang.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What a call is, for its messages: "all_reduce sum f32[1024] (node 'mlp.out', #3)".
struct Call {
  const std::string& label;
  int64_t timeout_ms;
};

// Calls come one at a time: their callers hold dist::World::turn().
class Communicator {
 public:
  virtual ~Communicator() = default;
  int size() const { return static_cast<int>(ranks_.size()); }
  int rank() const { return rank_; }  // this process's place in the group
  const std::vector<int>& world_ranks() const { return ranks_; }

  // `count` elements of `type` from every rank, reduced, into every rank's `out` (may be `in`).
  virtual void all_reduce(const void* in, void* out, int64_t count, ir::DType type, Reduce op, const Call& c) = 0;
  // `bytes` from every rank; out holds size() pieces in the group's order.
  virtual void all_gather(const void* in, void* out, int64_t bytes, const Call& c) = 0;
  // size() pieces of `count` elements each, reduced; this rank keeps piece rank().
  virtual void reduce_scatter(const void* in, void* out, int64_t count, ir::DType type, Reduce op, const Call& c) = 0;
  // `bytes` of `root` (a place in the group) into every rank's `buffer`.
  virtual void broadcast(void* buffer, int64_t bytes, int root, const Call& c) = 0;
  // Piece i (of `bytes`) of `in` to place i; piece j of `out` from place j.
  virtual void all_to_all(const void* in, void* out, int64_t bytes, const Call& c) = 0;
  virtual void send(const void* in, int64_t bytes, int peer, const Call& c) = 0;  // peer: a place in the group
  virtual void recv(void* out, int64_t bytes, int peer, const Call& c) = 0;
  // Every member's `values` (the same count on each), gathered in the group's order: the
  // agreement check a model makes before its first run.
  virtual std::vector<uint64_t> exchange(const std::vector<uint64_t>& values, const Call& c) = 0;
  // `values` to `peer` and as many of its back, both at once: the check of a pair's sends and
  // receives. Like exchange, it fails with the deadline rather than end the job.
  virtual std::vector<uint64_t> swap(const std::vector<uint64_t>& values, int peer, const Call& c) = 0;

 protected:
  Communicator(std::vector<int> world_ranks, int rank) : ranks_(std::move(world_ranks)), rank_(rank) {}

 private:
  std::vector<int> ranks_;
  int rank_;
};

// A transport: the world it runs in and how it makes groups of it. The MPI plugin is one.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  virtual int size() const = 0;
  virtual int rank() const = 0;
  // The communicator of `world_ranks` (this process among them), made by every member together;
  // an Error naming the members that did not come within `timeout_ms`. Called under
  // dist::World::turn(), as every communicator's calls are.
  virtual std::unique_ptr<Communicator> group(const std::vector<int>& world_ranks, int64_t timeout_ms) = 0;
  // Whether a collective timed out (then the job aborts at exit instead of finalizing).
  virtual bool broken() const = 0;
  // Called once at exit: finalize what it started, or abort the job when broken.
  virtual void shutdown() = 0;
};

}  // namespace esg::dist
