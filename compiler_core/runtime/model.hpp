// A compiled model: a graph compiled for a backend (plan.hpp), once per size class of its
// symbolic sizes (input_symbols.hpp), its plans kept in a bounded cache (plan_cache.hpp), and
// run through the backend's program. A run walks the program's launch list;
// nothing is looked up or allocated per op.
//
// A symbol bound in the options is fixed (a run with another size is refused). The others stay
// symbolic: one plan per size class (a declared range is one class; a free symbol's sizes fall
// in classes up to the next power of two) is compiled, its memory planned for the class's
// largest size, and each new set of sizes binds it (Plan::bind: shapes inferred again and
// checked, the backend's kernels bound where sizes changed, the rest shared). A graph a symbolic
// plan cannot follow (a body, a size an `if` picks) compiles a plan per set of input shapes
// instead. At most CompileOptions::max_plans bindings or plans are kept, and as many symbolic
// plans, the least recently run dropped first (a run under way keeps its plan alive until it ends).
//
// A graph with ops whose output sizes the data decides (nonzero, unique, non_max_suppression)
// runs in stages instead (staged_model.hpp): a model per stage, those ops on the host between.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "eval/host_tensor.hpp"
#include "ir/graph.hpp"
#include "runtime/backend.hpp"
#include "runtime/input_symbols.hpp"
#include "runtime/plan.hpp"
#include "runtime/plan_cache.hpp"
#include "runtime/staged_model.hpp"
#include "runtime/facts.hpp"
#include "runtime/thread_pool.hpp"

namespace esg::runtime {

class PreparedModelRun;

// Throws ir::Error(Limit) when `plan`'s working memory and outputs exceed max_memory_bytes (0:
// no cap), before a backend allocates them.
void check_memory(const Plan& plan, int64_t max_memory_bytes);

class Model {
 public:
  // Runs on `pool` when given (models may share one), else on a pool of its own when the options
  // ask for more than one thread.
  Model(std::unique_ptr<ir::Graph> graph, CompileOptions options, std::shared_ptr<ThreadPool> pool = nullptr);
  // A model whose plans were read from a compiled-model file (model_file.hpp): kept as compiled
  // ones, so that a run finds them and nothing is compiled for their sizes.
  Model(std::unique_ptr<ir::Graph> graph, CompileOptions options, const PlanCache::Saved& loaded);
  ~Model();

  const ir::Graph& graph() const { return *graph_; }
  const CompileOptions& options() const { return options_; }
  bool staged() const { return staged_ != nullptr; }  // run in stages (ops sized by data)
  PlanCache::Saved saved_plans() const { return plans_.saved(); }
  // Where the model came from, for its facts: the compile cache's part.
  struct Origin {
    int64_t cache_hits = 0, cache_misses = 0, cache_replaced = 0;
    std::string note;  // what the cache did, in words
  };
  void set_origin(Origin origin) { origin_ = std::move(origin); }
  // Checks the inputs and outputs against the graph's types, then runs the plan for their shapes.
  // An output whose size the data decides must come to its buffer's shape.
  void run(const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs,
           std::vector<TraceEvent>* trace = nullptr) const;
  // The same into outputs allocated here, at the sizes the run came to.
  std::vector<eval::HostTensor> run(const std::vector<eval::TensorRef>& inputs, std::vector<TraceEvent>* trace = nullptr) const;
  // The same as a part of a larger run, which `control` stops: its cancels, its loops' cap.
  std::vector<eval::HostTensor> run(const std::vector<eval::TensorRef>& inputs, std::vector<TraceEvent>* trace,
                                    const eval::RunControl& control) const;
  // The same, writing the kernels' times as a Chrome trace (one row per stream; Perfetto and
  // chrome://tracing open it).
  void profile(const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs,
               const std::string& path) const;
  // The output shapes for these input shapes (compiling their plan if needed); a size the data
  // decides stays symbolic (ir::dim_is_symbolic).
  std::vector<ir::Shape> output_shapes(const std::vector<ir::Shape>& input_shapes) const;
  // Stops the runs under way, from any thread: each fails with ir::Error Cancelled at its next
  // launch or loop iteration. Runs that start later are not affected.
  void cancel() const { cancels_.fetch_add(1, std::memory_order_relaxed); }
  // Runs to come on these buffers, checked and their plan found once (PreparedModelRun). The
  // model must outlive it.
  std::unique_ptr<PreparedModelRun> prepare(const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs) const;
  // Everything the model knows of itself (runtime/facts.hpp): where it came from, its plans
  // (the figures of the one run last at the top), its stages; the report renders it.
  Facts facts() const;
  std::string report() const { return render(facts()); }
  std::string to_dot() const;  // of every plan compiled so far

 private:
  Model(std::unique_ptr<ir::Graph> graph, CompileOptions options, const PlanCache::Saved& loaded, std::shared_ptr<ThreadPool> pool);
  // The plan for these input shapes: the cache's, else a binding of their size class's symbolic
  // plan, else a plan compiled for them alone; kept in the cache.
  std::shared_ptr<const CompiledPlan> plan_for(const std::vector<ir::Shape>& input_shapes) const;
  // `c`'s plan bound to the shapes and lowered; nullptr when the sizes outgrow it or its kernels
  // (a plan of their own then).
  std::shared_ptr<const CompiledPlan> bind(const PlanCache::Symbolic& c, const std::vector<ir::Shape>& input_shapes) const;
  // Throws ir::Error(Limit) when `plan`'s working memory and outputs exceed max_memory_bytes.
  void check_memory(const Plan& plan) const;
  friend class PreparedModelRun;
  // Before a run of `c`'s program: the process's turn for collectives (dist::World::turn()),
  // held until the returned lock goes, and the collectives' check (runtime/collectives.hpp);
  // nothing without collectives.
  std::unique_lock<std::mutex> collective_turn(const CompiledPlan& c) const;
  // Runs `c`'s program, in its collective turn.
  void run_program(const CompiledPlan& c, const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs,
                   std::vector<TraceEvent>* trace, const eval::RunControl& control) const;
  // What stops a run that began when the cancel counter read `started_at`.
  eval::RunControl run_control(uint64_t started_at) const;
  // run() into the caller's outputs, stopped by `control`.
  void run_into(const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs, std::vector<TraceEvent>* trace,
                const eval::RunControl& control) const;
  // The inputs' shapes, each input checked against the graph's (dtype, shape, symbols, data).
  std::vector<ir::Shape> check_inputs(const std::vector<eval::TensorRef>& inputs, const char* what) const;
  // Each output checked against `plan`'s (dtype, shape, data).
  void check_outputs(const Plan& plan, const std::vector<eval::TensorRef>& outputs, const char* what) const;

  std::unique_ptr<ir::Graph> graph_;
  CompileOptions options_;
  InputSymbols symbols_;
  PlanCache plans_;
  std::shared_ptr<ThreadPool> pool_;  // none with one thread
  std::unique_ptr<StagedModel> staged_;  // the graph's stages, when it has ops sized by data
  Origin origin_;  // set once, by the compile cache, before the model is handed out
  mutable std::atomic<uint64_t> cancels_{0};
};

// A model's runs on buffers fixed once (Model::prepare): checked, and their plan found, when
// prepared; each run then goes straight to the backend's prepared run (cpu: an arena of its own,
// every launch's operands resolved), about 0.05 µs beyond its kernels. The buffers' bytes
// may change between runs, not their places or shapes. A graph run in stages runs each time as
// Model::run does. One run at a time: a second thread's run fails (prepare once per thread),
// or, with collectives, waits for the process's turn as every run with collectives does.
class PreparedModelRun {
 public:
  void run();

 private:
  friend class Model;
  PreparedModelRun(const Model& model, std::vector<eval::TensorRef> inputs, std::vector<eval::TensorRef> outputs)
      : model_(model), inputs_(std::move(inputs)), outputs_(std::move(outputs)) {}
  const Model& model_;
  const std::vector<eval::TensorRef> inputs_, outputs_;
  std::shared_ptr<const CompiledPlan> compiled_;  // null for a staged graph
  std::unique_ptr<PreparedRun> program_run_;         // compiled_'s program on the buffers
  std::atomic<bool> running_{false};
};

}  // namespace esg::runtime
