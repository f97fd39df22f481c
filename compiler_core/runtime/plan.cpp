#include "runtime/plan.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>

#include "eval/evaluate.hpp"
#include "ir/error.hpp"
#include "ir/reinfer.hpp"
#include "ir/verify.hpp"
#include "passes/passes.hpp"
#include "schedule/order.hpp"
#include "runtime/format_assignment.hpp"

namespace esg::runtime {

namespace {

using ir::Error;
using ir::ErrorCode;

constexpr int64_t kAlign = schedule::kArenaAlignment;

bool check_plans_from_environment() {
  static const bool on = [] {
    const char* v = std::getenv("ESG_CHECK_PLANS");
    return v != nullptr && *v != '\0' && std::string(v) != "0";
  }();
  return on;
}

// Each group's shape as `g` has it (a copy of the graph the groups were found in, other sizes).
void reshape_groups(std::vector<FusedGroup>& groups, const ir::Graph& g) {
  for (FusedGroup& grp : groups) grp.shape = g.shape(g.nodes[grp.members.back()].first_output);
}

}  // namespace

namespace {

// Refuses, as Unsupported, a graph whose sizes no symbolic plan follows: a body (when a symbolic
// plan was asked for), or a value whose shape depends on data.
void refuse_symbolic(const ir::Graph& sg, bool asked) {
  for (ir::NodeId n : sg.regions[0].nodes)
    if (sg.nodes[n].num_bodies && asked)
      throw Error(ErrorCode::Unsupported, "compile: no symbolic plan for a graph with a body (" + sg.node_name(n) + ")");
  for (ir::NodeId n : sg.regions[0].nodes)
    for (uint32_t i = 0; i < sg.nodes[n].num_outputs; ++i)
      if (!sg.shape(sg.nodes[n].first_output + i).is_static())
        throw Error(ErrorCode::Unsupported, "compile: " + sg.value_name(sg.nodes[n].first_output + i) + " has the shape " +
                                                sg.shape_str(sg.shape(sg.nodes[n].first_output + i)) +
                                                ", which depends on data (an `if` whose branches differ in shape)");
}

}  // namespace

Plan::Plan(const ir::Graph& g, const std::vector<ir::Shape>& input_shapes, const CompileOptions& options,
           const std::vector<ir::Shape>* largest) {
  decided_ = std::make_shared<Decided>();
  auto found = std::make_shared<std::vector<FusedGroup>>();
  groups_ = found;
  if (!options.backend) throw Error(ErrorCode::InvalidArgument, "compile: no backend");
  const Backend& backend = *options.backend;
  using clock = std::chrono::steady_clock;
  // Runs a step, verifies and logs it; a step that returns false did nothing and goes unlogged.
  auto step = [&](const std::string& name, auto&& f) {
    const auto t0 = clock::now();
    if constexpr (std::is_same_v<decltype(f()), bool>) {
      if (!f()) return;
    } else {
      f();
    }
    if (options.verify_each_pass) ir::verify(*graph_);
    const double us = std::chrono::duration<double, std::micro>(clock::now() - t0).count();
    std::ostringstream line;
    line.precision(1);
    line << std::fixed << name << " (" << us << " us" << (options.verify_each_pass ? ", verified" : "") << ")";
    decided_->log.push_back(line.str());
  };
  step("specialize to the input shapes", [&] { graph_ = eval::specialize(g, input_shapes); });
  graph_ = passes::optimize(*graph_, options.verify_each_pass, &decided_->log);
  step("legalize for " + std::string(backend.name()), [&] {
    auto legal = backend.legalize(*graph_);
    if (!legal) return false;
    graph_ = std::move(legal);
    return true;
  });
  const ir::Graph& sg = *graph_;
  bool is_static = true;
  for (ir::NodeId n : sg.regions[0].nodes)
    for (uint32_t i = 0; i < sg.nodes[n].num_outputs; ++i) is_static = is_static && sg.shape(sg.nodes[n].first_output + i).is_static();
  for (ir::ValueId v : sg.inputs()) is_static = is_static && sg.shape(v).is_static();
  if (!is_static && (!largest || !ir::reinferable(sg))) refuse_symbolic(sg, largest != nullptr);
  if (!is_static) step("infer the largest sizes, which memory is planned for", [&] {
    decided_->symbolic_nodes = ir::symbolic_nodes(sg);
    auto sized = std::make_unique<ir::Graph>(sg);
    ir::reinfer(*sized, *largest, decided_->symbolic_nodes);
    decided_->sized = std::move(sized);
  });
  // What depends on sizes (bytes, formats) is decided at the largest; what must hold for every
  // size (fusion, in place) on the symbolic shapes.
  const ir::Graph& sizes = decided_->sized ? *decided_->sized : sg;
  schedule::GraphDag gd;
  std::vector<int> order;
  const GroupingRules grouping = backend.grouping(options);
  if (options.fusion || grouping.single_ops) step("fuse elementwise groups", [&] { *found = find_groups(sg, grouping); });
  step("build the dependency graph", [&] {
    std::vector<std::vector<ir::NodeId>> members;
    for (const FusedGroup& grp : groups()) members.push_back(grp.members);
    gd = schedule::from_graph(sg, members, !grouping.single_ops, &sizes);
  });
  FormatPlan formats;
  const FormatRules format_rules = backend.formats(options);
  std::vector<FusedGroup> sized_groups = *found;
  reshape_groups(sized_groups, sizes);
  auto assign = [&] { formats = assign_formats(sizes, sized_groups, format_rules, gd); };
  if (format_rules.format_of) step("assign memory formats, insert reorders", assign);
  else assign();
  decided_->reorders = formats.reorders;
  step("order for memory (the best of greedy, depth-first, breadth-first)", [&] { order = schedule::memory_aware_order(gd.dag); });
  std::vector<char> communicates(gd.nodes.size(), 0);
  std::vector<int> collectives;  // in the order the graph built them (node ids), which every rank shares
  for (size_t i = 0; i < gd.nodes.size(); ++i)
    if (gd.nodes[i] != ir::kNone && sg.nodes[gd.nodes[i]].op->communicates) communicates[i] = 1, collectives.push_back(static_cast<int>(i));  // kNone: a reorder
  std::sort(collectives.begin(), collectives.end(), [&](int a, int b) { return gd.nodes[static_cast<size_t>(a)] < gd.nodes[static_cast<size_t>(b)]; });
  if (collectives.size() > 1) step("keep the collectives in the order the graph built them", [&] { order = schedule::keep_in_sequence(gd.dag, order, collectives); });
  schedule::StreamPlan streams;
  step("assign streams and events", [&] { streams = schedule::assign_streams(gd.dag, order, options.streams, communicates); });
  schedule::MemoryPlanOptions mo;
  mo.alignment = kAlign;
  mo.slack = backend.buffer_slack();
  mo.reuse = options.memory_reuse;
  mo.in_place = options.memory_reuse;
  if (streams.num_streams > 1) mo.op_stream = streams.stream;
  schedule::MemoryPlan memory;
  step("plan memory", [&] { memory = schedule::plan_memory(gd.dag, order, mo); });
  // The independent checker proves the plan: with verify_each_pass, and on every model the test
  // suites compile (their environment sets ESG_CHECK_PLANS=1).
  if (options.verify_each_pass || check_plans_from_environment())
    step("check the memory plan", [&] {
      const std::string problem = schedule::check_plan(gd.dag, order, memory, kAlign, mo.op_stream, mo.slack);
      if (!problem.empty()) throw Error(ErrorCode::Internal, "compile: the memory plan is wrong: " + problem);
    });
  step("bind the launch list", [&] { bind_launch_list(gd, order, formats, streams, memory); });
  decided_->arena_bytes = memory.arena_bytes;
  decided_->lower_bound_bytes = memory.lower_bound;
  decided_->no_reuse_bytes = memory.no_reuse_bytes;
  for (int v : memory.in_place_of) decided_->in_place_values += v >= 0;
  decided_->num_streams = streams.num_streams;
  decided_->communication_stream = streams.communication_stream;
  decided_->events = static_cast<int64_t>(streams.events.size());
  if (decided_->sized) note_varying();
}

void Plan::bind_launch_list(const schedule::GraphDag& gd, const std::vector<int>& order, const FormatPlan& formats, const schedule::StreamPlan& streams,
                            const schedule::MemoryPlan& memory) {
  const ir::Graph& sg = *graph_;
  std::vector<int> input_index(sg.values.size(), -1), output_index(sg.values.size(), -1);
  for (size_t i = 0; i < sg.inputs().size(); ++i) input_index[sg.inputs()[i]] = static_cast<int>(i);
  for (size_t i = 0; i < sg.outputs().size(); ++i) {
    const ir::ValueId v = sg.outputs()[i];
    const bool produced = sg.values[v].producer != ir::kNone && sg.nodes[sg.values[v].producer].blob == ir::kNone;
    if (output_index[v] < 0 && produced) output_index[v] = static_cast<int>(i);
    else decided_->output_copies.push_back({static_cast<int>(i), v});  // an input, a constant, or a repeated output
  }
  // The graph value of each DAG value that is one (a reordered copy is not).
  std::vector<ir::ValueId> graph_value(static_cast<size_t>(gd.dag.num_values()), ir::kNone);
  for (size_t v = 0; v < sg.values.size(); ++v)
    if (gd.value[v] >= 0) graph_value[static_cast<size_t>(gd.value[v])] = static_cast<ir::ValueId>(v);
  decided_->viewed.assign(sg.values.size(), ir::kNone);
  // Where graph value `v` lives as DAG value `dv` (its own, or a copy in another format).
  std::function<Slot(ir::ValueId, int)> slot_of = [&](ir::ValueId v, int dv) -> Slot {
    const int views = memory.alias_of[static_cast<size_t>(dv)];
    if (views >= 0 && memory.offset[static_cast<size_t>(dv)] < 0) {  // a view of the caller's or the graph's bytes
      Slot at = slot_of(graph_value[static_cast<size_t>(views)], views);
      at.value = v;
      return at;
    }
    const schedule::Format f = formats.format[static_cast<size_t>(dv)];
    if (dv != gd.value[v]) return {Slot::Arena, memory.offset[static_cast<size_t>(dv)], v, f};
    if (input_index[v] >= 0) return {Slot::Input, input_index[v], v, f};
    if (output_index[v] >= 0) return {Slot::Output, output_index[v], v, f};
    const ir::NodeId p = sg.values[v].producer;
    if (p != ir::kNone && sg.nodes[p].blob != ir::kNone) return {Slot::Constant, p, v, f};
    return {Slot::Arena, memory.offset[static_cast<size_t>(dv)], v, f};
  };
  std::vector<int> launch_of(gd.dag.ops.size(), -1);
  for (int op : order) {
    const schedule::Dag::Op& dag_op = gd.dag.ops[static_cast<size_t>(op)];
    if (dag_op.alias >= 0 && memory.alias_of[static_cast<size_t>(dag_op.outputs[0])] >= 0) {  // a view: no launch
      const ir::Node& n = sg.nodes[gd.nodes[static_cast<size_t>(op)]];
      decided_->viewed[n.first_output] = sg.operands[n.first_input];
      ++decided_->views;
      continue;
    }
    launch_of[static_cast<size_t>(op)] = static_cast<int>(decided_->launches.size());
    Launch l;
    l.node = gd.nodes[static_cast<size_t>(op)];
    l.group = gd.group[static_cast<size_t>(op)];
    l.stream = streams.stream[static_cast<size_t>(op)];
    auto slot = [&](ir::ValueId v) { return slot_of(v, formats.dag_value(gd, op, v)); };
    if (l.node == ir::kNone) {
      const schedule::Dag::Op& reorder = gd.dag.ops[static_cast<size_t>(op)];
      const ir::ValueId v = formats.reordered[static_cast<size_t>(op)];
      l.in.push_back(slot_of(v, reorder.inputs[0]));
      l.out.push_back(slot_of(v, reorder.outputs[0]));
    } else if (l.group >= 0) {
      for (ir::ValueId v : groups()[static_cast<size_t>(l.group)].inputs) l.in.push_back(slot(v));
      for (ir::ValueId v : groups()[static_cast<size_t>(l.group)].outputs) l.out.push_back(slot(v));
    } else {
      const ir::Node& n = sg.nodes[l.node];
      for (uint32_t i = 0; i < n.num_inputs; ++i) {
        const ir::ValueId v = sg.operands[n.first_input + i];
        l.in.push_back(v == ir::kNone ? Slot{Slot::Arena, -1, ir::kNone} : slot(v));
      }
      for (uint32_t i = 0; i < n.num_outputs; ++i) l.out.push_back(slot(n.first_output + i));
    }
    decided_->launches.push_back(std::move(l));
  }
  // The launch list is `order` less the views; events name ops (never a view: views are
  // made only on one stream): turn both into launch indexes per stream.
  decided_->waits.assign(decided_->launches.size(), {});
  for (const schedule::Event& e : streams.events) decided_->waits[static_cast<size_t>(launch_of[static_cast<size_t>(e.before)])].push_back(launch_of[static_cast<size_t>(e.after)]);
  decided_->stream_launches.assign(static_cast<size_t>(streams.num_streams), {});
  for (size_t i = 0; i < decided_->launches.size(); ++i) decided_->stream_launches[static_cast<size_t>(decided_->launches[i].stream)].push_back(static_cast<int>(i));
}

void Plan::note_varying() {
  const ir::Graph& sg = *graph_;
  std::set<std::pair<ir::ValueId, int64_t>> seen;
  for (const Launch& l : decided_->launches)
    for (const std::vector<Slot>* slots : {&l.in, &l.out})
      for (const Slot& s : *slots)
        if (s.kind == Slot::Arena && s.at >= 0 && !sg.shape(s.value).is_static() && seen.insert({s.value, s.at}).second)
          decided_->varying.push_back({s.value, s.format, s.format.physical_elements(decided_->sized->shape(s.value))});
  for (const FusedGroup& grp : groups()) decided_->varying_groups = decided_->varying_groups || !grp.shape.is_static();
}

std::unique_ptr<Plan> Plan::bind(const std::vector<ir::Shape>& input_shapes) const {
  if (!symbolic()) throw Error(ErrorCode::Internal, "bind: the plan has no symbolic sizes");
  auto g = std::make_unique<ir::Graph>(*graph_);
  ir::reinfer(*g, input_shapes, decided_->symbolic_nodes);
  // Every value in the arena within the bytes planned for it (a free symbol's class is guessed
  // from the sizes of the run that compiled it; other sizes of one class may still outgrow it).
  for (const Decided::Varying& v : decided_->varying)
    if (v.format.physical_elements(g->shape(v.value)) > v.planned) return nullptr;
  std::unique_ptr<Plan> p(new Plan());
  p->graph_ = std::move(g);
  p->groups_ = groups_;
  if (decided_->varying_groups) {
    auto resized = std::make_shared<std::vector<FusedGroup>>(*groups_);
    reshape_groups(*resized, *p->graph_);
    p->groups_ = resized;
  }
  p->decided_ = decided_;
  p->bound_ = true;
  return p;
}

const PlanCollectives& Plan::collectives() const {
  if (const PlanCollectives* made = collectives_made_at_.load(std::memory_order_acquire)) return *made;
  std::call_once(collectives_made_, [&] {
    collectives_ = std::make_unique<const PlanCollectives>(*this);
    collectives_made_at_.store(collectives_.get(), std::memory_order_release);
  });
  return *collectives_;
}

void Plan::fill_output_copies(const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs) const {
  const ir::Graph& g = *graph_;
  for (const auto& [index, v] : decided_->output_copies) {
    const ir::NodeId p = g.values[v].producer;
    const bool is_input = std::find(g.inputs().begin(), g.inputs().end(), v) != g.inputs().end();
    const uint8_t* from = is_input ? inputs[static_cast<size_t>(std::find(g.inputs().begin(), g.inputs().end(), v) - g.inputs().begin())].bytes
                          : g.nodes[p].blob != ir::kNone ? g.blobs[g.nodes[p].blob]->data()
                                                          : outputs[static_cast<size_t>(std::find(g.outputs().begin(), g.outputs().end(), v) - g.outputs().begin())].bytes;
    eval::move_bytes(outputs[static_cast<size_t>(index)].bytes, from, outputs[static_cast<size_t>(index)].nbytes());
  }
}

void Plan::add_facts(Facts& f) const {
  const ir::Graph& g = *graph_;
  for (const std::string& l : decided_->log) f.row("passes").text("step", l);
  f.count("launches", static_cast<int64_t>(decided_->launches.size()));
  int64_t fused_ops = 0, heads = 0;
  for (const FusedGroup& grp : groups()) fused_ops += static_cast<int64_t>(grp.members.size()), heads += grp.head != ir::kNone;
  f.count("fused_groups", static_cast<int64_t>(groups().size()));
  f.count("fused_ops", fused_ops);
  f.count("epilogue_groups", heads);  // headed by a matmul or convolution
  for (const FusedGroup& grp : groups()) {
    std::string ops;
    for (ir::NodeId m : grp.members) ops += std::string(ops.empty() ? "" : " ") + g.nodes[m].op->name + (m == grp.head ? "+" : "");
    Facts& row = f.row("groups");
    row.text("ops", ops);
    row.text("shape", g.shape_str(grp.shape));
  }
  f.count("reorders", decided_->reorders);
  if (decided_->reorders) {
    std::map<std::string, int64_t> blocked;  // values by format, outside row-major
    for (const Launch& l : decided_->launches)
      for (const Slot& o : l.out)
        if (o.format != schedule::Format::row_major()) ++blocked[o.format.name(g.shape(o.value).rank())];
    f.tally("blocked_values", blocked, "format");
    // Where they are: the ops that read a reordered copy, by the copy's format (a graph output
    // reordered out has no reader here), so a model's reorders point at what wants them.
    std::set<std::tuple<ir::ValueId, int, int64_t>> copies;  // value, format kind, block
    for (const Launch& l : decided_->launches)
      if (l.node == ir::kNone) copies.insert({l.out[0].value, l.out[0].format.kind, l.out[0].format.block});
    std::map<std::pair<std::string, std::string>, int64_t> readers;
    for (const Launch& l : decided_->launches)
      for (const Slot& in : l.in)
        if (l.node != ir::kNone && in.value != ir::kNone && copies.count({in.value, in.format.kind, in.format.block}))
          ++readers[{in.format.name(g.shape(in.value).rank()), l.group >= 0 ? "fused group" : g.nodes[l.node].op->name}];
    for (const auto& [what, count] : readers) {
      Facts& row = f.row("reordered_for");
      row.text("format", what.first);
      row.text("reader", what.second);
      row.count("count", count);
    }
  }
  // Streams run on a thread each when the pool has them free, else in order.
  f.level("streams", decided_->num_streams);
  f.count("events", decided_->events);
  for (int s = 0; s < decided_->num_streams; ++s) {
    Facts& row = f.row("stream_launches");
    row.level("stream", s);
    row.count("launches", static_cast<int64_t>(decided_->stream_launches[static_cast<size_t>(s)].size()));
    row.text("runs", s == decided_->communication_stream ? "collectives" : "compute");
  }
  collectives().add_facts(*this, f);
  f.bytes("arena_bytes", decided_->arena_bytes);              // the planned peak
  f.bytes("lower_bound_bytes", decided_->lower_bound_bytes);  // the largest live set of this order
  f.bytes("no_reuse_bytes", decided_->no_reuse_bytes);        // every value its own bytes
  f.count("in_place_values", decided_->in_place_values);      // reusing a dying input's buffer
  f.count("views", decided_->views);  // reshapes, squeezes and unsqueezes that are their input's bytes (no launch)
  for (ir::ValueId v : g.inputs()) {
    Facts& row = f.row("inputs");
    row.text("name", g.value_name(v));
    row.text("type", g.type_str(v));
  }
  for (ir::ValueId v : g.outputs()) {
    Facts& row = f.row("outputs");
    row.text("name", g.value_name(v));
    row.text("type", g.type_str(v));
  }
}

std::string Plan::to_dot(const Program& program) const {
  const ir::Graph& g = *graph_;
  std::ostringstream out;
  out << "digraph \"" << g.name << " (compiled)\" {\n  rankdir=LR;\n  node [shape=box, fontname=\"monospace\"];\n";
  // A value in a format -> the launch that writes it there.
  auto where = [](const Slot& s) { return std::make_tuple(s.value, s.format.kind, s.format.block); };
  std::map<decltype(where(Slot{})), size_t> writer;
  for (size_t i = 0; i < decided_->launches.size(); ++i) {
    const Launch& l = decided_->launches[i];
    std::string label;
    if (l.node == ir::kNone) {
      const size_t rank = g.shape(l.in[0].value).rank();
      label = "reorder\\n" + l.in[0].format.name(rank) + " to " + l.out[0].format.name(rank);
    } else if (l.group >= 0) {
      label = "fused";
      for (ir::NodeId m : groups()[static_cast<size_t>(l.group)].members) label += std::string("\\n") + g.nodes[m].op->name;
    } else {
      const ir::Node& n = g.nodes[l.node];
      const std::string how = program.describe_launch(i);
      label = std::string(n.op->name) + (how.empty() ? "" : " (" + how + ")");
    }
    for (const Slot& o : l.out) writer[where(o)] = i;
    out << "  k" << i << " [label=\"" << label << "\\nstream " << l.stream << "\"" << (l.group >= 0 ? ", style=bold" : "") << "];\n";
  }
  for (size_t i = 0; i < decided_->launches.size(); ++i) {
    const Launch& l = decided_->launches[i];
    for (const Slot& in : l.in) {
      const ir::ValueId v = in.value;
      if (v == ir::kNone) continue;
      auto w = writer.find(where(in));
      for (ir::ValueId seen = decided_->viewed[v]; w == writer.end() && seen != ir::kNone; seen = decided_->viewed[seen])  // through views
        w = writer.find(std::make_tuple(seen, in.format.kind, in.format.block));
      const std::string format = in.format == schedule::Format::row_major() ? "" : " " + in.format.name(g.shape(v).rank());
      if (w != writer.end()) out << "  k" << w->second << " -> k" << i << " [label=\"" << g.type_str(v) << format << "\"];\n";
    }
  }
  out << "}\n";
  return out.str();
}

}  // namespace esg::runtime
