// The evaluator's kernels for non-elementwise ops, looked up by op.
#pragma once
#include <functional>
#include <vector>

#include "eval/host_tensor.hpp"
#include "ir/graph.hpp"
#include "ir/op_attrs.gen.hpp"

namespace esg::eval {

// Where a kernel may spread independent pieces of its work: piece(i) for i < pieces, on any
// threads (possibly all on the calling one), returning when all are done; then the first
// exception a piece threw, if any, is rethrown.
class Parallel {
 public:
  virtual ~Parallel() = default;
  virtual int threads() const = 0;
  // The threads a kernel may use right now: threads(), or 1 while the pool runs another job.
  virtual int free_threads() const = 0;
  virtual void run(int64_t pieces, const std::function<void(int64_t)>& piece) const = 0;
  // The same, but every piece on its own thread at once, so pieces may wait for each other;
  // false, having run nothing, when that many threads are not free.
  virtual bool run_together(int64_t pieces, const std::function<void(int64_t)>& piece) const = 0;
};

struct KernelCall {
  const ir::Graph& graph;
  const ir::Node& node;
  std::vector<const TensorRef*> in;  // declared inputs; nullptr for an absent optional one
  std::vector<const TensorRef*> out;  // shaped, with their memory, by the caller
  const Parallel* parallel = nullptr;  // none: the kernel runs on the calling thread

  // The node's typed attribute view (ir/op_attrs.gen.hpp), e.g. attrs<ir::SoftmaxAttrs>().axis.
  template <class A>
  A attrs() const { return A(graph, node); }
};

using Kernel = void (*)(const KernelCall&);

// nullptr for elementwise ops (see elementwise.hpp), constants and control flow.
Kernel find_kernel(const ir::OpSchema& op);

}  // namespace esg::eval
