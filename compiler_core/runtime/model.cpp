#include "runtime/model.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "ascend/device_program.hpp"
#include "ascend/device_lowering.hpp"
#include "ascend/kernel_source.hpp"
#include "eval/evaluate.hpp"
#include "ir/error.hpp"
#include "ir/verify.hpp"
#include "cpu/fast_kernels.hpp"
#include "passes/passes.hpp"
#include "plan/schedule.hpp"

namespace esg::runtime {
namespace {

using ir::Error;
using ir::ErrorCode;

constexpr int64_t kAlign = plan::kArenaAlignment;

bool check_plans_from_environment() {
  static const bool on = [] {
    const char* v = std::getenv("ESG_CHECK_PLANS");
    return v != nullptr && *v != '\0' && std::string(v) != "0";
  }();
  return on;
}

std::string shape_list(const ir::Graph& g, const ir::Shape& s) { return g.shape_str(s); }

}  // namespace

Plan::Plan(const ir::Graph& g, const std::vector<ir::Shape>& input_shapes, const CompileOptions& options,
           const GroupingOptions& grouping) {
  using clock = std::chrono::steady_clock;
  auto step = [&](const char* name, auto&& f) {
    const auto t0 = clock::now();
    f();
    if (options.verify_each_pass) ir::verify(*graph_);
    const double us = std::chrono::duration<double, std::micro>(clock::now() - t0).count();
    std::ostringstream line;
    line.precision(1);
    line << std::fixed << name << " (" << us << " us" << (options.verify_each_pass ? ", verified" : "") << ")";
    log_.push_back(line.str());
  };
  step("specialize to the input shapes", [&] { graph_ = eval::specialize(g, input_shapes); });
  graph_ = passes::optimize(*graph_, options.verify_each_pass, &log_);
  if (grouping.lower) step("lower for the device", [&] { graph_ = grouping.lower(*graph_); });
  const ir::Graph& sg = *graph_;
  for (ir::NodeId n : sg.regions[0].nodes)
    for (uint32_t i = 0; i < sg.nodes[n].num_outputs; ++i)
      if (!sg.shape(sg.nodes[n].first_output + i).is_static())
        throw Error(ErrorCode::Unsupported, "compile: " + sg.value_name(sg.nodes[n].first_output + i) + " has the shape " +
                                                sg.shape_str(sg.shape(sg.nodes[n].first_output + i)) +
                                                ", which depends on data (an `if` whose branches differ in shape)");
  plan::GraphDag gd;
  std::vector<int> order;
  if (options.fusion || grouping.single_ops) step("fuse elementwise groups", [&] { groups_ = find_groups(sg, grouping); });
  step("build the dependency graph", [&] {
    std::vector<std::vector<ir::NodeId>> members;
    for (const FusedGroup& grp : groups_) members.push_back(grp.members);
    gd = plan::from_graph(sg, members, !grouping.single_ops);
  });
  step("order for memory (the best of greedy, depth-first, breadth-first)", [&] { order = plan::memory_aware_order(gd.dag); });
  step("assign streams and events", [&] { streams_ = plan::assign_streams(gd.dag, order, options.streams); });
  plan::MemoryPlanOptions mo;
  mo.alignment = kAlign;
  mo.reuse = options.memory_reuse;
  mo.in_place = options.memory_reuse;
  if (streams_.num_streams > 1) mo.op_stream = streams_.stream;
  step("plan memory", [&] { memory_ = plan::plan_memory(gd.dag, order, mo); });
  arena_bytes_ = memory_.arena_bytes;
  // The independent checker proves the plan: with verify_each_pass, and on every model the test
  // suites compile (their environment sets ESG_CHECK_PLANS=1).
  if (options.verify_each_pass || check_plans_from_environment())
    step("check the memory plan", [&] {
      const std::string problem = plan::check_plan(gd.dag, order, memory_, kAlign, mo.op_stream);
      if (!problem.empty()) throw Error(ErrorCode::Internal, "compile: the memory plan is wrong: " + problem);
    });

  // Bind every operand and result to where it lives.
  std::vector<int> input_index(sg.values.size(), -1), output_index(sg.values.size(), -1);
  for (size_t i = 0; i < sg.inputs().size(); ++i) input_index[sg.inputs()[i]] = static_cast<int>(i);
  for (size_t i = 0; i < sg.outputs().size(); ++i) {
    const ir::ValueId v = sg.outputs()[i];
    const bool produced = sg.values[v].producer != ir::kNone && sg.nodes[sg.values[v].producer].blob == ir::kNone;
    if (output_index[v] < 0 && produced) output_index[v] = static_cast<int>(i);
    else output_copies_.push_back({static_cast<int>(i), v});  // an input, a constant, or a repeated output
  }
  auto slot = [&](ir::ValueId v) -> Slot {
    if (input_index[v] >= 0) return {Slot::Input, input_index[v]};
    if (output_index[v] >= 0) return {Slot::Output, output_index[v]};
    const ir::NodeId p = sg.values[v].producer;
    if (p != ir::kNone && sg.nodes[p].blob != ir::kNone) return {Slot::Constant, p};
    return {Slot::Arena, memory_.offset[static_cast<size_t>(gd.value[v])]};
  };
  step("bind the launch list", [&] {
    for (int op : order) {
      Launch l;
      l.node = gd.nodes[static_cast<size_t>(op)];
      l.group = gd.group[static_cast<size_t>(op)];
      l.fast = l.group >= 0 ? nullptr : cpu::find_fast_kernel(sg, sg.nodes[l.node]);
      l.stream = streams_.stream[static_cast<size_t>(op)];
      if (l.group >= 0) {
        for (ir::ValueId v : groups_[static_cast<size_t>(l.group)].inputs) l.in.push_back(slot(v));
        for (ir::ValueId v : groups_[static_cast<size_t>(l.group)].outputs) l.out.push_back(slot(v));
      } else {
        const ir::Node& n = sg.nodes[l.node];
        for (uint32_t i = 0; i < n.num_inputs; ++i) {
          const ir::ValueId v = sg.operands[n.first_input + i];
          l.in.push_back(v == ir::kNone ? Slot{Slot::Arena, -1} : slot(v));
        }
        for (uint32_t i = 0; i < n.num_outputs; ++i) l.out.push_back(slot(n.first_output + i));
      }
      launches_.push_back(std::move(l));
    }
    // The launch list is `order`; events name ops: turn both into launch indexes per stream.
    std::vector<int> launch_of(order.size());
    for (size_t i = 0; i < order.size(); ++i) launch_of[static_cast<size_t>(order[i])] = static_cast<int>(i);
    waits_.assign(launches_.size(), {});
    for (const plan::Event& e : streams_.events) waits_[static_cast<size_t>(launch_of[static_cast<size_t>(e.before)])].push_back(launch_of[static_cast<size_t>(e.after)]);
    stream_launches_.assign(static_cast<size_t>(streams_.num_streams), {});
    for (size_t i = 0; i < launches_.size(); ++i) stream_launches_[static_cast<size_t>(launches_[i].stream)].push_back(static_cast<int>(i));
  });
}

eval::TensorRef Plan::ref(const Slot& s, ir::ValueId v, uint8_t* arena, const std::vector<eval::TensorRef>& in,
                          const std::vector<eval::TensorRef>& out) const {
  const ir::Graph& g = *graph_;
  eval::TensorRef r{g.values[v].dtype, g.shape(v), nullptr};
  switch (s.kind) {
    case Slot::Arena: r.bytes = arena + s.at; break;
    case Slot::Input: r.bytes = in[static_cast<size_t>(s.at)].bytes; break;
    case Slot::Output: r.bytes = out[static_cast<size_t>(s.at)].bytes; break;
    case Slot::Constant: r.bytes = const_cast<uint8_t*>(g.blobs[g.nodes[static_cast<ir::NodeId>(s.at)].blob]->data()); break;
  }
  return r;
}

void Plan::launch(const Launch& l, uint8_t* base, const std::vector<eval::TensorRef>& inputs,
                  const std::vector<eval::TensorRef>& outputs, const eval::Parallel* parallel, LaunchScratch& s) const {
  const ir::Graph& g = *graph_;
  const ir::Node& n = g.nodes[l.node];
  if (l.group >= 0) {
    const FusedGroup& grp = groups_[static_cast<size_t>(l.group)];
    s.in_refs.clear();
    s.out_refs.clear();
    for (size_t i = 0; i < l.in.size(); ++i) s.in_refs.push_back(ref(l.in[i], grp.inputs[i], base, inputs, outputs));
    for (size_t i = 0; i < l.out.size(); ++i) s.out_refs.push_back(ref(l.out[i], grp.outputs[i], base, inputs, outputs));
    s.in_ptrs.clear();
    s.out_ptrs.clear();
    for (const eval::TensorRef& r : s.in_refs) s.in_ptrs.push_back(&r);
    for (const eval::TensorRef& r : s.out_refs) s.out_ptrs.push_back(&r);
    run_group(grp, s.in_ptrs, s.out_ptrs, parallel);
    return;
  }
  s.in_refs.assign(l.in.size(), {});
  s.out_refs.assign(l.out.size(), {});
  s.in_ptrs.assign(l.in.size(), nullptr);
  s.out_ptrs.clear();
  for (size_t i = 0; i < l.in.size(); ++i) {
    if (l.in[i].kind == Slot::Arena && l.in[i].at < 0) continue;  // an absent optional input
    s.in_refs[i] = ref(l.in[i], g.operands[n.first_input + i], base, inputs, outputs);
    s.in_ptrs[i] = &s.in_refs[i];
  }
  for (size_t i = 0; i < l.out.size(); ++i) {
    s.out_refs[i] = ref(l.out[i], n.first_output + static_cast<ir::ValueId>(i), base, inputs, outputs);
    s.out_ptrs.push_back(&s.out_refs[i]);
  }
  if (n.op->subgraphs.size()) {
    eval::run_control_flow(g, l.node, s.in_ptrs, s.out_ptrs);
  } else {
    // Kernels take the declared inputs; captures exist only for control flow.
    s.in_ptrs.resize(n.num_inputs - n.num_captures);
    if (l.fast) l.fast(eval::KernelCall{g, n, s.in_ptrs, s.out_ptrs, parallel});
    else eval::run_kernel(g, n, s.in_ptrs, s.out_ptrs);
  }
}

void Plan::run(const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs,
               std::vector<TraceEvent>* trace, const eval::Parallel* parallel) const {
  using clock = std::chrono::steady_clock;
  const auto t0 = trace ? clock::now() : clock::time_point{};  // the clock costs ~20 ns: only when tracing
  // An arena per concurrent run, reused across runs: one allocation the first time only.
  std::unique_ptr<uint8_t[]> arena;
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!pool_.empty()) {
      arena = std::move(pool_.back());
      pool_.pop_back();
    }
  }
  if (!arena) arena.reset(new uint8_t[static_cast<size_t>(arena_bytes_ + kAlign)]);
  const uintptr_t raw = reinterpret_cast<uintptr_t>(arena.get());
  uint8_t* base = arena.get() + (kAlign - raw % kAlign) % kAlign;
  const ir::Graph& g = *graph_;
  std::mutex trace_mu;
  auto timed = [&](const Launch& l, LaunchScratch& s) {
    if (!trace) return launch(l, base, inputs, outputs, parallel, s);
    const auto started = clock::now();
    launch(l, base, inputs, outputs, parallel, s);
    const auto finished = clock::now();
    std::string name = l.group >= 0 ? "fused" : g.nodes[l.node].op->name;
    if (l.group >= 0)
      for (ir::NodeId m : groups_[static_cast<size_t>(l.group)].members) name += std::string(" ") + g.nodes[m].op->name;
    std::lock_guard<std::mutex> lock(trace_mu);
    trace->push_back({name, l.stream, std::chrono::duration<double, std::micro>(started - t0).count(),
                      std::chrono::duration<double, std::micro>(finished - started).count()});
  };
  // Streams run at once, one thread each, when the pool has a thread per stream free: a launch
  // first waits for the events it needs (the launches of other streams it depends on). Else the
  // launch list runs in order on this thread, which every event already respects.
  bool ran = false;
  if (streams_.num_streams > 1 && parallel) {
    std::unique_ptr<std::atomic<bool>[]> done(new std::atomic<bool>[launches_.size()]);
    for (size_t i = 0; i < launches_.size(); ++i) done[i].store(false, std::memory_order_relaxed);
    std::mutex mu;
    std::condition_variable finished;
    bool failed = false;  // a kernel threw: the other streams stop instead of waiting for it
    ran = parallel->run_together(streams_.num_streams, [&](int64_t stream) {
      LaunchScratch s;
      try {
        for (int at : stream_launches_[static_cast<size_t>(stream)]) {
          for (int w : waits_[static_cast<size_t>(at)]) {
            if (done[static_cast<size_t>(w)].load(std::memory_order_acquire)) continue;
            std::unique_lock<std::mutex> lock(mu);
            finished.wait(lock, [&] { return failed || done[static_cast<size_t>(w)].load(std::memory_order_acquire); });
            if (failed) return;
          }
          timed(launches_[static_cast<size_t>(at)], s);
          {
            std::lock_guard<std::mutex> lock(mu);
            done[static_cast<size_t>(at)].store(true, std::memory_order_release);
          }
          finished.notify_all();
        }
      } catch (...) {
        {
          std::lock_guard<std::mutex> lock(mu);
          failed = true;
        }
        finished.notify_all();
        throw;  // the pool rethrows it to this run's caller once every stream has stopped
      }
    });
  }
  if (!ran) {
    thread_local LaunchScratch s;
    for (const Launch& l : launches_) timed(l, s);
  }
  fill_output_copies(inputs, outputs);
  std::lock_guard<std::mutex> lock(pool_mu_);
  pool_.push_back(std::move(arena));
}

void Plan::fill_output_copies(const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs) const {
  const ir::Graph& g = *graph_;
  for (const auto& [index, v] : output_copies_) {
    const ir::NodeId p = g.values[v].producer;
    const bool is_input = std::find(g.inputs().begin(), g.inputs().end(), v) != g.inputs().end();
    const uint8_t* from = is_input ? inputs[static_cast<size_t>(std::find(g.inputs().begin(), g.inputs().end(), v) - g.inputs().begin())].bytes
                          : g.nodes[p].blob != ir::kNone ? g.blobs[g.nodes[p].blob]->data()
                                                          : outputs[static_cast<size_t>(std::find(g.outputs().begin(), g.outputs().end(), v) - g.outputs().begin())].bytes;
    std::memmove(outputs[static_cast<size_t>(index)].bytes, from, outputs[static_cast<size_t>(index)].nbytes());
  }
}

std::string Plan::report() const {
  const ir::Graph& g = *graph_;
  std::ostringstream out;
  out << "passes:\n";
  for (const std::string& l : log_) out << "  " << l << "\n";
  size_t fused_ops = 0, heads = 0, fast = 0;
  for (const FusedGroup& grp : groups_) fused_ops += grp.members.size(), heads += grp.head != ir::kNone;
  for (const Launch& l : launches_) fast += l.fast != nullptr;
  out << "launches: " << launches_.size() << " kernels (" << groups_.size() << " fused groups of " << fused_ops << " ops, " << heads
      << " of them a matmul or convolution with its epilogue; " << fast << " fast; " << launches_.size() - fast - groups_.size() << " reference)\n";
  for (const FusedGroup& grp : groups_) {
    out << "  fused:";
    for (ir::NodeId m : grp.members) out << " " << g.nodes[m].op->name << (m == grp.head ? " +" : "");
    out << " over " << g.shape_str(grp.shape);
    // Scalar multiply-adds folded into the rows around them run in those rows (FusedGroup::f32_steps).
    if (grp.f32) out << " in " << grp.f32_steps.size() << " f32 row" << (grp.f32_steps.size() == 1 ? "" : "s");
    out << "\n";
  }
  // The ops without a CPU kernel of their own, by name: where a model's time may go.
  std::map<std::string, int> slow;
  for (const Launch& l : launches_)
    if (l.group < 0 && l.fast == nullptr) ++slow[g.nodes[l.node].op->name];
  if (!slow.empty()) {
    out << "  reference kernels:";
    for (const auto& [name, count] : slow) out << " " << name << " x" << count;
    out << "\n";
  }
  out << "streams: " << streams_.num_streams << ", events: " << streams_.events.size()
      << (streams_.num_streams > 1 ? " (one thread each when the pool has them free, else in order)" : "") << "\n";
  for (int s = 0; s < streams_.num_streams; ++s) out << "  stream " << s << ": " << streams_.sequence[static_cast<size_t>(s)].size() << " ops\n";
  out << "memory: arena " << memory_.arena_bytes << " bytes (planned peak), lower bound " << memory_.lower_bound
      << " bytes (max live set of this order), " << memory_.no_reuse_bytes << " bytes without reuse\n";
  size_t in_place = 0;
  for (int v : memory_.in_place_of) in_place += v >= 0;
  out << "  in place: " << in_place << " values reuse a dying input's buffer\n";
  out << "inputs:";
  for (ir::ValueId v : g.inputs()) out << " " << g.value_name(v) << ": " << g.type_str(v);
  out << "\noutputs:";
  for (ir::ValueId v : g.outputs()) out << " " << g.value_name(v) << ": " << g.type_str(v);
  out << "\n";
  return out.str();
}

void Plan::add_stats(Stats& s) const {
  s.launches = static_cast<int64_t>(launches_.size());
  s.fused_groups = static_cast<int64_t>(groups_.size());
  for (const FusedGroup& grp : groups_) {
    s.fused_ops += static_cast<int64_t>(grp.members.size());
    s.epilogue_groups += grp.head != ir::kNone;
    s.f32_rows += grp.f32 ? static_cast<int64_t>(grp.f32_steps.size()) : 0;
  }
  for (const Launch& l : launches_) {
    s.fast_kernels += l.fast != nullptr;
    s.reference_kernels += l.group < 0 && l.fast == nullptr;
  }
  s.arena_bytes = memory_.arena_bytes;
  s.lower_bound_bytes = memory_.lower_bound;
  s.no_reuse_bytes = memory_.no_reuse_bytes;
  for (int v : memory_.in_place_of) s.in_place_values += v >= 0;
  s.streams = streams_.num_streams;
  s.events = static_cast<int64_t>(streams_.events.size());
}

std::string Plan::to_dot() const {
  const ir::Graph& g = *graph_;
  std::ostringstream out;
  out << "digraph \"" << g.name << " (compiled)\" {\n  rankdir=LR;\n  node [shape=box, fontname=\"monospace\"];\n";
  std::map<ir::ValueId, size_t> writer;  // value -> the launch that writes it
  for (size_t i = 0; i < launches_.size(); ++i) {
    const Launch& l = launches_[i];
    std::vector<ir::ValueId> outs;
    std::string label;
    if (l.group >= 0) {
      const FusedGroup& grp = groups_[static_cast<size_t>(l.group)];
      outs = grp.outputs;
      label = "fused";
      for (ir::NodeId m : grp.members) label += std::string("\\n") + g.nodes[m].op->name;
    } else {
      const ir::Node& n = g.nodes[l.node];
      for (uint32_t k = 0; k < n.num_outputs; ++k) outs.push_back(n.first_output + k);
      label = std::string(n.op->name) + (l.fast ? " (fast)" : "");
    }
    for (ir::ValueId v : outs) writer[v] = i;
    out << "  k" << i << " [label=\"" << label << "\\nstream " << l.stream << "\"" << (l.group >= 0 ? ", style=bold" : "") << "];\n";
  }
  for (size_t i = 0; i < launches_.size(); ++i) {
    const Launch& l = launches_[i];
    std::vector<ir::ValueId> ins;
    if (l.group >= 0) ins = groups_[static_cast<size_t>(l.group)].inputs;
    else
      for (ir::ValueId v : g.inputs(g.nodes[l.node])) ins.push_back(v);
    for (ir::ValueId v : ins) {
      if (v == ir::kNone) continue;
      const auto w = writer.find(v);
      if (w != writer.end()) out << "  k" << w->second << " -> k" << i << " [label=\"" << g.type_str(v) << "\"];\n";
    }
  }
  out << "}\n";
  return out.str();
}

Model::Model(std::unique_ptr<ir::Graph> graph, CompileOptions options) : graph_(std::move(graph)), options_(std::move(options)) {
  if (options_.streams < 1 || options_.streams > 16)
    throw Error(ErrorCode::InvalidArgument, "compile: streams must be 1..16, got " + std::to_string(options_.streams));
  if (options_.threads < 0 || options_.threads > 256)
    throw Error(ErrorCode::InvalidArgument, "compile: threads must be 0..256, got " + std::to_string(options_.threads));
  ir::verify(*graph_);
  for (const auto& [name, size] : options_.symbols) {
    const auto it = std::find(graph_->symbols.begin(), graph_->symbols.end(), name);
    if (it == graph_->symbols.end()) throw Error(ErrorCode::InvalidArgument, "compile: the graph has no symbol `" + name + "`");
    if (size < 0) throw Error(ErrorCode::InvalidArgument, "compile: symbol `" + name + "` bound to a negative size");
  }
  // With every symbol of the inputs bound, compile now; otherwise on the first run.
  std::vector<ir::Shape> shapes;
  bool all_bound = true;
  for (ir::ValueId v : graph_->inputs()) {
    ir::Shape s = graph_->shape(v);
    for (size_t d = 0; d < s.rank(); ++d) {
      if (!ir::dim_is_symbolic(s[d])) continue;
      const std::string& name = graph_->symbols[ir::dim_symbol(s[d])];
      const auto it = std::find_if(options_.symbols.begin(), options_.symbols.end(), [&](const auto& p) { return p.first == name; });
      if (it == options_.symbols.end()) all_bound = false;
      else s[d] = it->second;
    }
    shapes.push_back(s);
  }
  const int threads = options_.threads > 0 ? options_.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (threads > 1) pool_ = std::make_unique<ThreadPool>(threads);
  if (all_bound) plan_for(shapes);
}

const Model::Compiled& Model::plan_for(const std::vector<ir::Shape>& shapes) const {
  std::vector<std::vector<int64_t>> key;
  for (const ir::Shape& s : shapes) key.emplace_back(s.begin(), s.end());
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  Compiled c;
  if (options_.backend == CompileOptions::Backend::Cpu) {
    c.plan = std::make_unique<Plan>(*graph_, shapes, options_);
  } else {
    // The device launches a generated kernel per elementwise group (single ops included) and
    // runs matmuls and convolutions on its own library, so no group takes a head.
    GroupingOptions grouping;
    grouping.heads = false;
    grouping.mixed_types = true;
    grouping.lower = ascend::lower_for_device;
    grouping.kernel_takes = ascend::kernel_computes;
    grouping.single_ops = true;
    grouping.max_ops = options_.fusion ? kMaxGroupOps : 1;
    c.plan = std::make_unique<Plan>(*graph_, shapes, options_, grouping);
    ascend::DeviceOptions d;
    d.simulated = options_.backend == CompileOptions::Backend::AscendSim;
    d.device = options_.device;
    d.ai_cores = options_.ai_cores;
    d.host_fallback = options_.host_fallback;
    c.device = std::make_unique<ascend::DeviceProgram>(*c.plan, d);
  }
  latest_ = &plans_.emplace(key, std::move(c)).first->second;
  return *latest_;
}

Model::~Model() = default;

std::vector<ir::Shape> Model::output_shapes(const std::vector<ir::Shape>& input_shapes) const {
  const Plan& p = *plan_for(input_shapes).plan;
  std::vector<ir::Shape> out;
  for (ir::ValueId v : p.graph().outputs()) out.push_back(p.graph().shape(v));
  return out;
}

void Model::profile(const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs,
                    const std::string& path) const {
  if (options_.backend != CompileOptions::Backend::Cpu)
    throw Error(ErrorCode::Unsupported, "profile: traces come from the CPU backend only so far");
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

void Model::run(const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs,
                std::vector<TraceEvent>* trace) const {
  const ir::Graph& g = *graph_;
  if (inputs.size() != g.inputs().size())
    throw Error(ErrorCode::InvalidArgument, "run: the model takes " + std::to_string(g.inputs().size()) + " input(s), got " +
                                                std::to_string(inputs.size()));
  if (outputs.size() != g.outputs().size())
    throw Error(ErrorCode::InvalidArgument, "run: the model gives " + std::to_string(g.outputs().size()) + " output(s), got " +
                                                std::to_string(outputs.size()) + " buffer(s)");
  std::vector<ir::Shape> shapes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::ValueId v = g.inputs()[i];
    const std::string what = "run: input " + std::to_string(i) + " (" + g.value_name(v) + ": " + g.type_str(v) + ")";
    if (inputs[i].dtype != g.values[v].dtype)
      throw Error(ErrorCode::DType, what + " got " + ir::dtype_name(inputs[i].dtype) + " data");
    const ir::Shape want = g.shape(v);
    bool fits = want.rank() == inputs[i].shape.rank();
    for (size_t d = 0; fits && d < want.rank(); ++d) fits = ir::dim_is_symbolic(want[d]) ? inputs[i].shape[d] >= 0 : want[d] == inputs[i].shape[d];
    if (!fits) throw Error(ErrorCode::Shape, what + " got the shape " + shape_list(g, inputs[i].shape));
    if (!inputs[i].bytes && inputs[i].size() > 0) throw Error(ErrorCode::InvalidArgument, what + " has no data");
    shapes.push_back(inputs[i].shape);
  }
  const Compiled& c = plan_for(shapes);
  const Plan& p = *c.plan;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const ir::ValueId v = p.graph().outputs()[i];
    const std::string what = "run: output " + std::to_string(i) + " (" + p.graph().type_str(v) + ")";
    if (outputs[i].dtype != p.graph().values[v].dtype)
      throw Error(ErrorCode::DType, what + " got a " + ir::dtype_name(outputs[i].dtype) + " buffer");
    if (outputs[i].shape != p.graph().shape(v)) throw Error(ErrorCode::Shape, what + " got a buffer of shape " + shape_list(g, outputs[i].shape));
    if (!outputs[i].bytes && outputs[i].size() > 0) throw Error(ErrorCode::InvalidArgument, what + " has no data");
  }
  if (c.device) c.device->run(inputs, outputs);
  else p.run(inputs, outputs, trace, pool_.get());
}

std::string Model::to_dot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& [key, c] : plans_) out += c.plan->to_dot();
  return out;
}

Stats Model::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s;
  s.plans = static_cast<int64_t>(plans_.size());
  if (latest_) {
    latest_->plan->add_stats(s);
    if (latest_->device) latest_->device->add_stats(s);
  }
  return s;
}

std::string Model::report() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (plans_.empty()) return "no plan yet: the graph has symbolic sizes; the first run compiles one for its shapes\n";
  std::string out;
  for (const auto& [key, c] : plans_) out += c.plan->report() + (c.device ? c.device->report() : "");
  return out;
}

}  // namespace esg::runtime
