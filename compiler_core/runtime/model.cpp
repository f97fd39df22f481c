#include "runtime/model.hpp"

#include <cstdint>
#include <fstream>

#include "dist/world.hpp"
#include "ir/cut.hpp"
#include "ir/error.hpp"
#include "ir/verify.hpp"

namespace esg::runtime {

using ir::Error;
using ir::ErrorCode;

namespace {

// The options once checked, and the graph verified, before anything is made from them.
CompileOptions checked(CompileOptions options, const ir::Graph& graph) {
  check_compile_options(options, graph);
  ir::verify(graph);
  return options;
}

}  // namespace

Model::Model(std::unique_ptr<ir::Graph> graph, CompileOptions options, std::shared_ptr<ThreadPool> pool)
    : Model(std::move(graph), std::move(options), PlanCache::Saved{}, std::move(pool)) {}

Model::Model(std::unique_ptr<ir::Graph> graph, CompileOptions options, const PlanCache::Saved& loaded)
    : Model(std::move(graph), std::move(options), loaded, nullptr) {}

Model::Model(std::unique_ptr<ir::Graph> graph, CompileOptions options, const PlanCache::Saved& loaded, std::shared_ptr<ThreadPool> pool)
    : graph_(std::move(graph)),
      options_(checked(std::move(options), *graph_)),
      symbols_(*graph_, options_),
      plans_(options_.max_plans),
      pool_(std::move(pool)) {
  const int threads = options_.pool_threads();
  if (threads > 1 && !pool_) pool_ = std::make_shared<ThreadPool>(threads);
  plans_.restore(loaded);
  // With every symbol of the inputs bound, compile now (unless loaded); otherwise on the first run.
  if (ir::has_sized_by_data(*graph_)) staged_ = std::make_unique<StagedModel>(*graph_, options_, pool_);
  else if (!symbols_.open()) plan_for(symbols_.inputs());
}

eval::RunControl Model::run_control(uint64_t started_at) const {
  // Made in place (it holds an atomic).
  return eval::RunControl{options_.max_loop_iterations, {0}, &cancels_, started_at, options_.max_memory_bytes};
}

void check_memory(const Plan& plan, int64_t max_memory_bytes) {
  if (max_memory_bytes <= 0) return;
  const ir::Graph& g = plan.graph();
  // Saturating: 4096 outputs of 2^51 bytes would overflow an int64 sum.
  int64_t bytes = plan.arena_bytes();
  auto add = [&](ir::ValueId v) {
    const int64_t n = g.shape(v).num_elements() * static_cast<int64_t>(ir::dtype_size(g.values[v].dtype));
    bytes = n > INT64_MAX - bytes ? INT64_MAX : bytes + n;
  };
  for (ir::ValueId v : g.outputs()) add(v);
  // Values in bodies live outside the arena (the loop's runner keeps each body's values).
  for (ir::ValueId v = 0; v < g.values.size(); ++v)
    if (g.values[v].region != 0 && g.shape(v).is_static()) add(v);
  if (bytes > max_memory_bytes)
    throw Error(ErrorCode::Limit, "the plan for these sizes needs " + std::to_string(bytes) + " bytes of working memory and outputs, more than max_memory_bytes (" +
                                      std::to_string(max_memory_bytes) + ")");
}

void Model::check_memory(const Plan& plan) const { runtime::check_memory(plan, options_.max_memory_bytes); }

std::shared_ptr<const CompiledPlan> Model::bind(const PlanCache::Symbolic& c, const std::vector<ir::Shape>& shapes) const {
  std::unique_ptr<Plan> bound = c.plan->bind(shapes);  // throws naming the op whose sizes disagree
  if (!bound) return nullptr;
  check_memory(*bound);
  auto made = std::make_shared<CompiledPlan>();
  made->plan = std::move(bound);
  try {
    made->program = options_.backend->lower(*made->plan, options_, c.donor ? c.donor->program.get() : nullptr, nullptr);
  } catch (const Error& e) {
    // A kernel the class's formats chose that these sizes do not have (a blocked convolution
    // oneDNN has no kernel for at them): these sizes get a plan of their own.
    if (e.code() != ErrorCode::Internal && e.code() != ErrorCode::Unsupported) throw;
    return nullptr;
  }
  return made;
}

std::shared_ptr<const CompiledPlan> Model::plan_for(const std::vector<ir::Shape>& shapes) const {
  if (std::shared_ptr<const CompiledPlan> kept = plans_.find(shapes)) return kept;
  PlanCache::Symbolic symbolic;
  if (symbols_.open()) {
    const InputSymbols::SizeClass size_class = symbols_.size_class(shapes);
    symbolic = plans_.symbolic(
        size_class.key, [&] { return std::make_shared<const Plan>(*graph_, symbols_.inputs(), options_, &size_class.largest); },
        options_.max_memory_bytes);
  }
  // Bound (or compiled) outside the cache's lock: runs of sizes already bound go on meanwhile.
  // The donor is held until its kernels are shared.
  std::shared_ptr<const CompiledPlan> c = symbolic.plan ? bind(symbolic, shapes) : nullptr;
  const bool bound = c != nullptr;
  if (!bound) {
    auto exact = std::make_shared<CompiledPlan>();
    exact->plan = std::make_unique<Plan>(*graph_, shapes, options_);
    check_memory(*exact->plan);  // before the backend allocates it
    exact->program = options_.backend->lower(*exact->plan, options_, nullptr, nullptr);
    c = std::move(exact);
  }
  return plans_.keep(shapes, std::move(c), bound ? &symbolic : nullptr);
}

Model::~Model() = default;

std::vector<ir::Shape> Model::output_shapes(const std::vector<ir::Shape>& input_shapes) const {
  symbols_.check(input_shapes, "");  // asked for by a run or by the caller: neither name is this function's
  if (staged_) return staged_->output_shapes(input_shapes);
  const std::shared_ptr<const CompiledPlan> c = plan_for(input_shapes);
  const Plan& p = *c->plan;
  std::vector<ir::Shape> out;
  for (ir::ValueId v : p.graph().outputs()) out.push_back(p.graph().shape(v));
  return out;
}

void Model::profile(const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs,
                    const std::string& path) const {
  std::vector<TraceEvent> trace;
  run(inputs, outputs, &trace);
  std::ofstream f(path);
  if (!f) throw Error(ErrorCode::Io, "profile: cannot write `" + path + "`");
  auto quoted = [](const std::string& s) {
    std::string q = "\"";
    for (char c : s) q += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
    return q + "\"";
  };
  f << "{\"traceEvents\": [\n";
  for (size_t i = 0; i < trace.size(); ++i)
    f << "  {\"name\": " << quoted(trace[i].name) << ", \"cat\": \"kernel\", \"ph\": \"X\", \"pid\": 0, \"tid\": "
      << trace[i].stream << ", \"ts\": " << trace[i].start_us << ", \"dur\": " << trace[i].duration_us << "}"
      << (i + 1 < trace.size() ? ",\n" : "\n");
  f << "], \"displayTimeUnit\": \"ns\"}\n";
  if (!f.flush()) throw Error(ErrorCode::Io, "profile: cannot write `" + path + "`");
}

std::vector<ir::Shape> Model::check_inputs(const std::vector<eval::TensorRef>& inputs, const char* call) const {
  const ir::Graph& g = *graph_;
  if (inputs.size() != g.inputs().size())
    throw Error(ErrorCode::InvalidArgument, std::string(call) + ": the model takes " + std::to_string(g.inputs().size()) + " input(s), got " +
                                                std::to_string(inputs.size()));
  std::vector<ir::Shape> shapes;
  shapes.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::ValueId v = g.inputs()[i];
    // The message is written only for an input that fails: a run checks, it does not format.
    auto what = [&] { return std::string(call) + ": input " + std::to_string(i) + " (" + g.value_name(v) + ": " + g.type_str(v) + ")"; };
    if (inputs[i].dtype != g.values[v].dtype)
      throw Error(ErrorCode::DType, what() + " got " + ir::dtype_name(inputs[i].dtype) + " data");
    const ir::Shape want = g.shape(v);
    bool fits = want.rank() == inputs[i].shape.rank();
    for (size_t d = 0; fits && d < want.rank(); ++d) fits = ir::dim_is_symbolic(want[d]) ? inputs[i].shape[d] >= 0 : want[d] == inputs[i].shape[d];
    if (!fits) throw Error(ErrorCode::Shape, what() + " got the shape " + g.shape_str(inputs[i].shape));
    if (!inputs[i].bytes && inputs[i].size() > 0) throw Error(ErrorCode::InvalidArgument, what() + " has no data");
    shapes.push_back(inputs[i].shape);
  }
  symbols_.check(shapes, call);
  return shapes;
}

std::vector<eval::HostTensor> Model::run(const std::vector<eval::TensorRef>& inputs, std::vector<TraceEvent>* trace) const {
  return run(inputs, trace, run_control(cancels_.load(std::memory_order_relaxed)));  // before compiling: a cancel then stops it too
}

std::vector<eval::HostTensor> Model::run(const std::vector<eval::TensorRef>& inputs, std::vector<TraceEvent>* trace,
                                         const eval::RunControl& control) const {
  if (staged_) {
    check_inputs(inputs, "run");
    return staged_->run(inputs, trace, control);
  }
  // The outputs made here to the plan's shapes: checked once, looked up once.
  const std::shared_ptr<const CompiledPlan> c = plan_for(check_inputs(inputs, "run"));
  const ir::Graph& g = c->plan->graph();
  std::vector<eval::HostTensor> out;
  std::vector<eval::TensorRef> refs;
  for (ir::ValueId v : g.outputs()) {
    out.emplace_back(g.values[v].dtype, g.shape(v), eval::HostTensor::Uninitialized{});
    refs.push_back(out.back().ref());
  }
  run_program(*c, inputs, refs, trace, control);
  return out;
}

void Model::run(const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs,
                std::vector<TraceEvent>* trace) const {
  run_into(inputs, outputs, trace, run_control(cancels_.load(std::memory_order_relaxed)));  // before compiling: a cancel then stops it too
}

void Model::run_into(const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs, std::vector<TraceEvent>* trace,
                     const eval::RunControl& control) const {
  const ir::Graph& g = *graph_;
  if (outputs.size() != g.outputs().size())
    throw Error(ErrorCode::InvalidArgument, "run: the model gives " + std::to_string(g.outputs().size()) + " output(s), got " +
                                                std::to_string(outputs.size()) + " buffer(s)");
  const std::vector<ir::Shape> shapes = check_inputs(inputs, "run");
  if (staged_) {
    // The sizes are known once the run is done: each output then must fit its buffer.
    std::vector<eval::HostTensor> made = staged_->run(inputs, trace, control);
    for (size_t i = 0; i < outputs.size(); ++i) {
      const ir::ValueId v = g.outputs()[i];
      auto what = [&] { return "run: output " + std::to_string(i) + " (" + g.value_name(v) + ": " + g.type_str(v) + ")"; };
      if (outputs[i].dtype != made[i].dtype) throw Error(ErrorCode::DType, what() + " got a " + ir::dtype_name(outputs[i].dtype) + " buffer");
      if (outputs[i].shape != made[i].shape)
        throw Error(ErrorCode::Shape, what() + " came to " + g.shape_str(made[i].shape) + " but its buffer is " + g.shape_str(outputs[i].shape) +
                                          " (a size the data decides: let the model allocate the outputs)");
      if (!outputs[i].bytes && made[i].size() > 0) throw Error(ErrorCode::InvalidArgument, what() + " has no data");
      eval::move_bytes(outputs[i].bytes, made[i].bytes.data(), made[i].bytes.size());
    }
    return;
  }
  const std::shared_ptr<const CompiledPlan> c = plan_for(shapes);  // kept alive by this run if the cache drops it
  check_outputs(*c->plan, outputs, "run");
  run_program(*c, inputs, outputs, trace, control);
}

void Model::check_outputs(const Plan& plan, const std::vector<eval::TensorRef>& outputs, const char* call) const {
  const ir::Graph& g = plan.graph();
  for (size_t i = 0; i < outputs.size(); ++i) {
    const ir::ValueId v = g.outputs()[i];
    auto what = [&] { return std::string(call) + ": output " + std::to_string(i) + " (" + g.type_str(v) + ")"; };
    if (outputs[i].dtype != g.values[v].dtype) throw Error(ErrorCode::DType, what() + " got a " + ir::dtype_name(outputs[i].dtype) + " buffer");
    if (outputs[i].shape != g.shape(v)) throw Error(ErrorCode::Shape, what() + " got a buffer of shape " + g.shape_str(outputs[i].shape));
    if (!outputs[i].bytes && outputs[i].size() > 0) throw Error(ErrorCode::InvalidArgument, what() + " has no data");
  }
}

std::unique_lock<std::mutex> Model::collective_turn(const CompiledPlan& c) const {
  const PlanCollectives& collectives = c.plan->collectives();
  if (!collectives.communicates()) return {};
  std::unique_lock<std::mutex> turn(dist::world().turn());
  collectives.agree();  // the ranks check that they agree before a plan's first run
  return turn;
}

void Model::run_program(const CompiledPlan& c, const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs,
                        std::vector<TraceEvent>* trace, const eval::RunControl& control) const {
  const std::unique_lock<std::mutex> turn = collective_turn(c);
  c.program->run(inputs, outputs, trace, pool_.get(), control);
}

std::unique_ptr<PreparedModelRun> Model::prepare(const std::vector<eval::TensorRef>& inputs,
                                                 const std::vector<eval::TensorRef>& outputs) const {
  const ir::Graph& g = *graph_;
  if (outputs.size() != g.outputs().size())
    throw Error(ErrorCode::InvalidArgument, "prepare: the model gives " + std::to_string(g.outputs().size()) + " output(s), got " +
                                                std::to_string(outputs.size()) + " buffer(s)");
  const std::vector<ir::Shape> shapes = check_inputs(inputs, "prepare");
  std::unique_ptr<PreparedModelRun> made(new PreparedModelRun(*this, inputs, outputs));
  if (staged_) return made;  // each run checks its outputs at the sizes it comes to
  made->compiled_ = plan_for(shapes);
  check_outputs(*made->compiled_->plan, outputs, "prepare");
  made->program_run_ = made->compiled_->program->prepare(inputs, outputs);
  return made;
}

void PreparedModelRun::run() {
  const eval::RunControl control = model_.run_control(model_.cancels_.load(std::memory_order_relaxed));
  // With collectives, the process's turn keeps this run to itself; else the flag does.
  const std::unique_lock<std::mutex> turn = compiled_ ? model_.collective_turn(*compiled_) : std::unique_lock<std::mutex>();
  if (!turn.owns_lock() && running_.exchange(true, std::memory_order_acquire))
    throw Error(ErrorCode::InvalidArgument, "run: this prepared run is running already, on another thread (one run at a time: "
                                            "prepare the buffers once per thread)");
  struct Done {
    std::atomic<bool>* running;
    ~Done() {
      if (running) running->store(false, std::memory_order_release);
    }
  } done{turn.owns_lock() ? nullptr : &running_};
  if (!program_run_) return model_.run_into(inputs_, outputs_, nullptr, control);
  program_run_->run(model_.pool_.get(), control);
}

std::string Model::to_dot() const { return staged_ ? staged_->to_dot() : plans_.to_dot(); }

Facts Model::facts() const {
  Facts f;
  if (!origin_.note.empty()) f.text("origin", origin_.note);
  f.count("cache_hits", origin_.cache_hits);
  f.count("cache_misses", origin_.cache_misses);
  f.count("cache_replaced", origin_.cache_replaced);  // a damaged entry compiled again
  if (staged_) {
    staged_->add_facts(f);
  } else {
    f.level("stages", 1);
    f.count("sized_ops", 0);
    plans_.add_facts(f, symbols_.open());
  }
  return f;
}

}  // namespace esg::runtime
