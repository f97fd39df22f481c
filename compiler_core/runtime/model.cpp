#include "runtime/model.hpp"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <thread>

#include "dist/world.hpp"
#include "ir/cut.hpp"
#include "ir/error.hpp"
#include "ir/verify.hpp"

namespace esg::runtime {
namespace {

using ir::Error;
using ir::ErrorCode;

// Drops the least recently run entry of `cache` but `keep` while it holds more than `limit` (0:
// no limit).
template <class Map>
void drop_oldest(Map& cache, typename Map::iterator keep, int64_t limit) {
  if (limit <= 0 || static_cast<int64_t>(cache.size()) <= limit) return;
  auto oldest = cache.end();
  for (auto it = cache.begin(); it != cache.end(); ++it)
    if (it != keep && (oldest == cache.end() || it->second.last_run < oldest->second.last_run)) oldest = it;
  cache.erase(oldest);
}

// Every option the caller set is one the backend declares, within its range.
void check_backend_options(const Backend& backend, const BackendOptions& given) {
  const std::vector<BackendOption> declared = backend.options();
  for (const auto& given_option : given.values()) {
    const std::string& name = given_option.first;
    const int64_t value = given_option.second;
    const auto it = std::find_if(declared.begin(), declared.end(), [&](const BackendOption& o) { return name == o.name; });
    if (it == declared.end()) {
      std::string known;
      for (const BackendOption& o : declared) known += (known.empty() ? "" : ", ") + std::string(o.name);
      throw Error(ErrorCode::InvalidArgument, "compile: backend '" + std::string(backend.name()) + "' has no option `" + name + "`" +
                                                  (known.empty() ? " (it takes none)" : " (it takes " + known + ")"));
    }
    if (value < it->min || value > it->max)
      throw Error(ErrorCode::InvalidArgument, "compile: " + std::string(backend.name()) + " option " + name + " " + std::to_string(value) +
                                                  " (" + std::to_string(it->min) + " .. " + std::to_string(it->max) + ")");
  }
}

}  // namespace

Model::Model(std::unique_ptr<ir::Graph> graph, CompileOptions options, std::shared_ptr<ThreadPool> pool)
    : graph_(std::move(graph)), options_(std::move(options)), pool_(std::move(pool)) {
  if (options_.streams < 1 || options_.streams > 16)
    throw Error(ErrorCode::InvalidArgument, "compile: streams must be 1..16, got " + std::to_string(options_.streams));
  if (options_.threads < 0 || options_.threads > 256)
    throw Error(ErrorCode::InvalidArgument, "compile: threads must be 0..256, got " + std::to_string(options_.threads));
  if (!options_.backend) throw Error(ErrorCode::InvalidArgument, "compile: no backend");
  if (options_.max_loop_iterations < 0 || options_.max_nodes < 0 || options_.max_plans < 0 || options_.max_memory_bytes < 0)
    throw Error(ErrorCode::InvalidArgument,
                "compile: max_loop_iterations, max_nodes, max_plans and max_memory_bytes must be 0 (no limit) or more");
  if (options_.max_nodes && static_cast<int64_t>(graph_->nodes.size()) > options_.max_nodes)
    throw Error(ErrorCode::Limit, "compile: the graph has " + std::to_string(graph_->nodes.size()) + " nodes, more than max_nodes (" +
                                      std::to_string(options_.max_nodes) + "); raise max_nodes to compile it");
  check_backend_options(*options_.backend, options_.backend_options);
  options_.backend->check(options_);
  ir::verify(*graph_);
  for (const auto& [name, size] : options_.symbols) {
    const auto it = std::find(graph_->symbols.begin(), graph_->symbols.end(), name);
    if (it == graph_->symbols.end()) throw Error(ErrorCode::InvalidArgument, "compile: the graph has no symbol `" + name + "`");
    if (size < 0) throw Error(ErrorCode::InvalidArgument, "compile: symbol `" + name + "` bound to a negative size");
  }
  for (const CompileOptions::Range& r : options_.ranges) {
    const std::string what = "compile: the range " + std::to_string(r.min) + ".." + std::to_string(r.max) + " of `" + r.symbol + "`";
    if (std::find(graph_->symbols.begin(), graph_->symbols.end(), r.symbol) == graph_->symbols.end())
      throw Error(ErrorCode::InvalidArgument, what + ": the graph has no such symbol");
    if (r.min < 0 || r.min > r.max) throw Error(ErrorCode::InvalidArgument, what + " is empty or negative");
    const auto bound = std::find_if(options_.symbols.begin(), options_.symbols.end(), [&](const auto& p) { return p.first == r.symbol; });
    if (bound != options_.symbols.end())
      throw Error(ErrorCode::InvalidArgument, what + ": the symbol is also bound to " + std::to_string(bound->second));
    if (std::count_if(options_.ranges.begin(), options_.ranges.end(), [&](const auto& o) { return o.symbol == r.symbol; }) > 1)
      throw Error(ErrorCode::InvalidArgument, what + ": the symbol has another range");
  }
  // Each symbol's allowed sizes, and the inputs' symbolic axes, resolved once for every run's check.
  symbol_limits_.assign(graph_->symbols.size(), {0, INT64_MAX, false});
  for (const auto& [name, size] : options_.symbols)
    symbol_limits_[static_cast<size_t>(std::find(graph_->symbols.begin(), graph_->symbols.end(), name) - graph_->symbols.begin())] = {size, size, true};
  for (const CompileOptions::Range& r : options_.ranges)
    symbol_limits_[static_cast<size_t>(std::find(graph_->symbols.begin(), graph_->symbols.end(), r.symbol) - graph_->symbols.begin())] = {r.min, r.max, false};
  // With every symbol of the inputs bound, compile now; otherwise on the first run.
  std::vector<ir::Shape> shapes;
  bool all_bound = true;
  for (size_t i = 0; i < graph_->inputs().size(); ++i) {
    ir::Shape s = graph_->shape(graph_->inputs()[i]);
    for (size_t d = 0; d < s.rank(); ++d) {
      if (!ir::dim_is_symbolic(s[d])) continue;
      const uint32_t sym = ir::dim_symbol(s[d]);
      size_t first = symbolic_axes_.size();
      for (size_t k = 0; k < symbolic_axes_.size() && first == symbolic_axes_.size(); ++k)
        if (symbolic_axes_[k].symbol == sym) first = k;
      symbolic_axes_.push_back({i, d, sym, first});
      if (!symbol_limits_[sym].bound) all_bound = false;
      else s[d] = symbol_limits_[sym].min;
    }
    shapes.push_back(s);
  }
  symbolic_inputs_ = shapes;
  open_symbols_ = !all_bound;
  const int threads = options_.pool_threads();
  if (threads > 1 && !pool_) pool_ = std::make_shared<ThreadPool>(threads);
  if (ir::has_sized_by_data(*graph_)) staged_ = std::make_unique<StagedModel>(*graph_, options_, pool_);
  else if (all_bound) plan_for(shapes);
}

eval::RunControl Model::run_control(uint64_t started_at) const {
  // Made in place (it holds an atomic).
  return eval::RunControl{options_.max_loop_iterations, {0}, &cancels_, started_at, options_.max_memory_bytes};
}


Model::ClassPlan Model::symbolic_for(const std::vector<ir::Shape>& shapes) const {
  if (!open_symbols_ || !no_symbolic_.empty()) return {};
  // Each open symbol's class: its range, else its size rounded up to a power of two; the plan's
  // memory is planned for the class's largest size.
  std::vector<int64_t> largest(graph_->symbols.size(), -1);
  for (const SymbolicAxis& a : symbolic_axes_) {
    const SymbolLimits& limits = symbol_limits_[a.symbol];
    if (limits.bound || largest[a.symbol] >= 0) continue;
    int64_t top = 1;
    while (top < shapes[a.input][a.axis]) top *= 2;
    largest[a.symbol] = limits.max != INT64_MAX && !options_.grow_memory ? limits.max : std::min(top, limits.max);
  }
  std::vector<int64_t> key;
  for (int64_t size : largest)
    if (size >= 0) key.push_back(size);
  auto it = symbolic_.find(key);
  if (it == symbolic_.end()) {
    std::vector<ir::Shape> largest_shapes = symbolic_inputs_;
    for (const SymbolicAxis& a : symbolic_axes_)
      if (!symbol_limits_[a.symbol].bound) largest_shapes[a.input][a.axis] = largest[a.symbol];
    std::shared_ptr<const Plan> plan;
    std::string refused;
    try {
      plan = std::make_shared<const Plan>(*graph_, symbolic_inputs_, options_, &largest_shapes);
      ++compiled_;
      // Memory planned for the class's largest sizes beyond the cap: each size gets a plan of
      // its own, checked at its own sizes, rather than every size of the class refused.
      if (options_.max_memory_bytes > 0 && plan->arena_bytes() > options_.max_memory_bytes)
        throw Error(ErrorCode::Limit, "the class's largest sizes need more working memory than max_memory_bytes");
    } catch (const Error& e) {
      // A plan per set of shapes instead, whose compile reports any error that is the graph's
      // or the sizes' own: for every class when the graph is one no symbolic plan follows, for
      // this class when its largest sizes are ones the graph cannot take (a reshape to [4, 3]
      // of an [n, m] planned at n = m = 4) or beyond the limits. Anything else is a fault.
      if (e.code() != ErrorCode::Unsupported && e.code() != ErrorCode::Shape && e.code() != ErrorCode::Limit) throw;
      if (e.code() == ErrorCode::Unsupported) no_symbolic_ = e.what();
      plan = nullptr;
      refused = e.what();
    }
    it = symbolic_.emplace(key, Symbolic{plan, nullptr, 0, refused}).first;
    drop_oldest(symbolic_, it, options_.max_plans);
  }
  it->second.last_run = ++clock_;
  return {it->second.plan, it->second.latest, key};
}

void Model::check_memory(const Plan& plan) const {
  if (options_.max_memory_bytes <= 0) return;
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
  if (bytes > options_.max_memory_bytes)
    throw Error(ErrorCode::Limit, "the plan for these sizes needs " + std::to_string(bytes) + " bytes of working memory and outputs, more than max_memory_bytes (" +
                                      std::to_string(options_.max_memory_bytes) + ")");
}

std::shared_ptr<const Model::Compiled> Model::bind(const ClassPlan& c, const std::vector<ir::Shape>& shapes) const {
  std::unique_ptr<Plan> bound = c.plan->bind(shapes);  // throws naming the op whose sizes disagree
  if (!bound) return nullptr;
  check_memory(*bound);
  auto made = std::make_shared<Compiled>();
  made->plan = std::move(bound);
  try {
    made->program = options_.backend->lower(*made->plan, options_, c.donor ? c.donor->program.get() : nullptr);
  } catch (const Error& e) {
    // A kernel the class's formats chose that these sizes do not have (a blocked convolution
    // oneDNN has no kernel for at them): these sizes get a plan of their own.
    if (e.code() != ErrorCode::Internal && e.code() != ErrorCode::Unsupported) throw;
    return nullptr;
  }
  return made;
}

namespace {

bool same_key(const std::vector<std::vector<int64_t>>& key, const std::vector<ir::Shape>& shapes) {
  if (key.size() != shapes.size()) return false;
  for (size_t i = 0; i < key.size(); ++i)
    if (!std::equal(key[i].begin(), key[i].end(), shapes[i].begin(), shapes[i].end())) return false;
  return true;
}

}  // namespace

std::shared_ptr<const Model::Compiled> Model::plan_for(const std::vector<ir::Shape>& shapes) const {
  {
    // The common case, the shapes of the run before: no key built (a small model's run is a
    // microsecond or less, of which a key's allocations were a tenth).
    std::lock_guard<std::mutex> lock(mu_);
    if (latest_ != plans_.end() && same_key(latest_->first, shapes)) {
      latest_->second.last_run = ++clock_;
      return latest_->second.compiled;
    }
  }
  std::vector<std::vector<int64_t>> key;
  for (const ir::Shape& s : shapes) key.emplace_back(s.begin(), s.end());
  ClassPlan symbolic;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = plans_.find(key); it != plans_.end()) {
      it->second.last_run = ++clock_;
      latest_ = it;
      return it->second.compiled;
    }
    symbolic = symbolic_for(shapes);
  }
  // Bound (or compiled) outside the lock: runs of sizes already bound go on meanwhile. The donor
  // is held until its kernels are shared.
  std::shared_ptr<const Compiled> c = symbolic.plan ? bind(symbolic, shapes) : nullptr;
  const bool bound = c != nullptr;
  if (!bound) {
    auto exact = std::make_shared<Compiled>();
    exact->plan = std::make_unique<Plan>(*graph_, shapes, options_);
    check_memory(*exact->plan);  // before the backend allocates it
    exact->program = options_.backend->lower(*exact->plan, options_, nullptr);
    c = exact;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = plans_.find(key); it != plans_.end()) {  // another run made it meanwhile: one is kept
    it->second.last_run = ++clock_;
    latest_ = it;
    return it->second.compiled;
  }
  if (bound) {
    ++bindings_;
    if (auto s = symbolic_.find(symbolic.key); s != symbolic_.end() && s->second.plan == symbolic.plan) s->second.latest = c;
  } else {
    ++compiled_;
  }
  latest_ = plans_.insert_or_assign(key, Cached{c, ++clock_}).first;
  drop_oldest(plans_, latest_, options_.max_plans);
  return c;
}

void Model::check_symbols(const std::vector<ir::Shape>& shapes, const char* what) const {
  // On every run: comparisons only; a message is written only for a size that fails.
  const ir::Graph& g = *graph_;
  for (const SymbolicAxis& a : symbolic_axes_) {
    if (a.input >= shapes.size() || a.axis >= shapes[a.input].rank()) continue;  // the caller checks ranks
    const int64_t size = shapes[a.input][a.axis];
    const SymbolLimits& limits = symbol_limits_[a.symbol];
    const SymbolicAxis& first = symbolic_axes_[a.first];
    const bool consistent = &first == &a || first.input >= shapes.size() || first.axis >= shapes[first.input].rank() ||
                            shapes[first.input][first.axis] == size;
    if (size >= limits.min && size <= limits.max && consistent) continue;
    const std::string& name = g.symbols[a.symbol];
    const std::string where = std::string(what) + ": input " + std::to_string(a.input) + " (" + g.value_name(g.inputs()[a.input]) +
                              ": " + g.type_str(g.inputs()[a.input]) + ") has " + name + " = " + std::to_string(size) + " on axis " +
                              std::to_string(a.axis);
    if (limits.bound)
      throw Error(ErrorCode::Shape, where + ", but the model was compiled with " + name + " = " + std::to_string(limits.min));
    if (size < limits.min || size > limits.max)
      throw Error(ErrorCode::Shape, where + ", outside the range " + std::to_string(limits.min) + ".." + std::to_string(limits.max) +
                                        " the model was compiled for");
    throw Error(ErrorCode::Shape, where + ", but input " + std::to_string(first.input) + " (" + g.value_name(g.inputs()[first.input]) +
                                      ") has " + name + " = " + std::to_string(shapes[first.input][first.axis]));
  }
}

Model::~Model() = default;

std::vector<ir::Shape> Model::output_shapes(const std::vector<ir::Shape>& input_shapes) const {
  check_symbols(input_shapes, "output_shapes");
  if (staged_) return staged_->output_shapes(input_shapes);
  const std::shared_ptr<const Compiled> c = plan_for(input_shapes);
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
  check_symbols(shapes, call);
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
  const std::shared_ptr<const Compiled> c = plan_for(check_inputs(inputs, "run"));
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
  const std::shared_ptr<const Compiled> c = plan_for(shapes);  // kept alive by this run if the cache drops it
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

std::unique_lock<std::mutex> Model::collective_turn(const Compiled& c) const {
  const PlanCollectives& collectives = c.plan->collectives();
  if (!collectives.communicates()) return {};
  std::unique_lock<std::mutex> turn(dist::world().turn());
  collectives.agree();  // the ranks check that they agree before a plan's first run
  return turn;
}

void Model::run_program(const Compiled& c, const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs,
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

std::string Model::to_dot() const {
  if (staged_) return staged_->to_dot();
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& [key, cached] : plans_) out += cached.compiled->plan->to_dot(*cached.compiled->program);
  return out;
}

Stats Model::stats() const {
  if (staged_) return staged_->stats();
  std::lock_guard<std::mutex> lock(mu_);
  Stats s;
  s.plans = compiled_;
  s.bindings = bindings_;
  if (latest_ != plans_.end()) {
    latest_->second.compiled->plan->add_stats(s);
    latest_->second.compiled->program->add_stats(s);
  }
  return s;
}

std::string Model::report() const {
  if (staged_) return staged_->report();
  std::lock_guard<std::mutex> lock(mu_);
  if (plans_.empty()) return "no plan yet: the graph has symbolic sizes; the first run compiles one for its shapes\n";
  std::string out = "plans: " + std::to_string(plans_.size()) + " kept (" +
                    (options_.max_plans ? "at most " + std::to_string(options_.max_plans) : std::string("no limit")) + "), " +
                    std::to_string(compiled_) + " compiled\n";
  if (open_symbols_) {
    out += "symbolic plans: " + std::to_string(symbolic_.size()) + " kept, bound to sizes " + std::to_string(bindings_) + " times";
    out += no_symbolic_.empty() ? "\n" : "; none for this graph (a plan per set of input shapes): " + no_symbolic_ + "\n";
    // Each symbolic plan once, with the backend's part of the binding made last.
    for (const auto& [key, s] : symbolic_) {
      if (!s.plan) out += "a size class planned per set of shapes: " + s.refused + "\n";
      else out += s.plan->report() + (s.latest ? s.latest->program->report() : std::string());
    }
  }
  for (const auto& [key, cached] : plans_)
    if (!cached.compiled->plan->bound()) out += cached.compiled->plan->report() + cached.compiled->program->report();
  return out;
}

}  // namespace esg::runtime
