// A compiled model: a graph compiled for a backend once per set of input shapes (plan.hpp) and
// run through the backend's program. A run walks the program's launch list; nothing is looked
// up or allocated per op.
//
// Graphs with symbolic dimensions compile once per set of input shapes: bound in the options
// (then fixed: a run with another size is refused), or on the first run with new shapes. At
// most CompileOptions::max_plans plans are kept, the least recently run dropped first with its
// working memory (a run under way keeps its plan alive until it ends).
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "eval/host_tensor.hpp"
#include "ir/graph.hpp"
#include "runtime/backend.hpp"
#include "runtime/plan.hpp"
#include "runtime/stats.hpp"
#include "runtime/thread_pool.hpp"

namespace esg::runtime {

class Model {
 public:
  Model(std::unique_ptr<ir::Graph> graph, CompileOptions options);
  ~Model();

  const ir::Graph& graph() const { return *graph_; }
  // Checks the inputs and outputs against the graph's types, then runs the plan for their shapes.
  void run(const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs,
           std::vector<TraceEvent>* trace = nullptr) const;
  // The same, writing the kernels' times as a Chrome trace (one row per stream; Perfetto and
  // chrome://tracing open it).
  void profile(const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs,
               const std::string& path) const;
  // The output shapes for these input shapes (compiling their plan if needed).
  std::vector<ir::Shape> output_shapes(const std::vector<ir::Shape>& input_shapes) const;
  // Stops the runs under way, from any thread: each fails with ir::Error Cancelled at its next
  // launch or loop iteration. Runs that start later are not affected.
  void cancel() const { cancels_.fetch_add(1, std::memory_order_relaxed); }
  std::string report() const;
  Stats stats() const;  // the plan compiled last (Stats::plans counts them all)
  std::string to_dot() const;  // of every plan compiled so far

 private:
  // A plan, and the backend's program for it, which refers to the plan: declared after it, so
  // destroyed first.
  struct Compiled {
    std::unique_ptr<Plan> plan;
    std::unique_ptr<Program> program;
  };
  struct Cached {
    std::shared_ptr<const Compiled> compiled;
    uint64_t last_run = 0;  // the cache's clock when it was last asked for
  };
  std::shared_ptr<const Compiled> plan_for(const std::vector<ir::Shape>& input_shapes) const;
  // Refuses shapes whose symbolic sizes disagree with a size the options bind, or with each
  // other (one symbol, two sizes); `what` names the call.
  void check_symbols(const std::vector<ir::Shape>& input_shapes, const char* what) const;

  std::unique_ptr<ir::Graph> graph_;
  CompileOptions options_;
  struct SymbolLimits {
    int64_t min, max;  // the sizes a symbol may take: its bound size, its range, or any
    bool bound;        // fixed in the options (rather than a range)
  };
  std::vector<SymbolLimits> symbol_limits_;  // per symbol of the graph
  struct SymbolicAxis {
    size_t input, axis;
    uint32_t symbol;
    size_t first;  // the index here of the symbol's first axis, whose size every other must match
  };
  std::vector<SymbolicAxis> symbolic_axes_;  // the inputs' symbolic axes, in input order
  mutable std::mutex mu_;
  mutable std::map<std::vector<std::vector<int64_t>>, Cached> plans_;
  mutable std::shared_ptr<const Compiled> latest_;
  mutable uint64_t clock_ = 0;     // counts lookups, for least-recently-run eviction
  mutable int64_t compiled_ = 0;   // plans compiled so far, dropped ones included
  std::unique_ptr<ThreadPool> pool_;  // none with one thread
  mutable std::atomic<uint64_t> cancels_{0};
};

}  // namespace esg::runtime
