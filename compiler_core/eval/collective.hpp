// A collective op (op_defs/collective.yaml) bound to its node: its group's communicator, the
// label its errors carry, and how its tensor lies in what the transport moves. MPI moves whole
// pieces, rank after rank: a tensor cut or joined along its first non-trivial axis already is
// that; along a later axis its pieces are packed into (or unpacked from) scratch first.
// The reference evaluator binds one per call; a backend binds one per launch, once.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dist/communicator.hpp"
#include "eval/host_tensor.hpp"
#include "ir/graph.hpp"

namespace esg::eval {

class Collective {
 public:
  Collective(const ir::Graph& g, ir::NodeId node);
  // Runs it on `in` (null for recv) into `out`, one call at a time; a failure of the exchange
  // is an ir::Error(Communication) naming the collective.
  void run(const TensorRef* in, const TensorRef& out) const;

  const std::string& label() const { return label_; }       // "all_reduce sum f32[4,8] over [0,1] (node 'x')"
  const std::vector<int>& ranks() const { return ranks_; }  // the group (the world's ranks, in order)
  int64_t bytes() const { return bytes_; }                  // what this rank sends or receives, once
  // What every member must agree on, hashed: the op, its attributes, dtype and shape. A send and
  // the matching recv hash alike (the peers' side swapped).
  uint64_t signature() const { return signature_; }
  ir::OpKind kind() const { return kind_; }
  ir::DType dtype() const { return dtype_; }
  dist::Reduce reduction() const { return reduce_; }  // all_reduce's and reduce_scatter's (else Sum)
  int64_t count() const { return count_; }             // the elements reduced per rank: all_reduce's input, reduce_scatter's result
  int root() const { return root_; }                   // a broadcast's, as a place in the group
  // The group's communicator, made the first time (by every member together: dist/world.hpp).
  dist::Communicator& communicator() const;
  int peer() const { return peer_; }  // a send's or recv's, in the world; else -1

 private:
  void transfer(const TensorRef* in, const TensorRef& out) const;

  ir::OpKind kind_;
  std::string label_;
  std::vector<int> ranks_;
  mutable std::shared_ptr<dist::Communicator> comm_;          // made under mu_
  mutable std::atomic<dist::Communicator*> made_{nullptr};  // comm_ once made, read without the lock
  ir::DType dtype_;
  dist::Reduce reduce_ = dist::Reduce::Sum;
  int root_ = 0, peer_ = -1;  // places in the group; peer_ in the world
  int64_t bytes_ = 0, count_ = 0;
  // The tensor as [outer, pieces of the group, inner bytes] on each side (a gather's output, a
  // scatter's input, an all_to_all's both): outer 1 is already in the transport's order.
  int64_t in_outer_ = 1, in_piece_ = 0, out_outer_ = 1, out_piece_ = 0;
  uint64_t signature_ = 0;
  mutable std::vector<uint8_t> send_scratch_, recv_scratch_;
  mutable std::mutex mu_;  // the communicator's making, and the scratch's use
};

// The kernel of the reference evaluator: binds the node, then runs it.
void run_collective(const ir::Graph& g, const ir::Node& n, const TensorRef* in, const TensorRef& out);

}  // namespace esg::eval
