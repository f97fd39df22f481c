#include "runtime/plan_record.hpp"

#include <algorithm>
#include <cctype>
#include <string>

#include "ir/byte_io.hpp"
#include "ir/reinfer.hpp"

namespace esg::runtime {

namespace {

using ir::Error;
using ir::ErrorCode;
using ir::kNone;

constexpr const char* kFile = "compiled-model file";
// An arena past 2^48 bytes (256 TiB) is no machine's: a corrupted size, refused before anything
// is allocated for it.
constexpr int64_t kMaxArenaBytes = int64_t{1} << 48;
constexpr int64_t kMaxBlock = 64;

void write_shape(ir::ByteWriter& w, const ir::Shape& s) {
  w.u8(static_cast<uint8_t>(s.rank()));
  for (ir::Dim d : s) w.i64(d);
}

void write_format(ir::ByteWriter& w, const schedule::Format& f) {
  w.u8(f.kind);
  w.i64(f.block);
}

// A pass's log line without its time ("fold constants: 165 -> 165 nodes (95.9 us)" becomes
// "fold constants: 165 -> 165 nodes"): what a compile took is no fact of the plan a file holds,
// and without it a model saves to the same bytes every time.
std::string without_time(const std::string& line) {
  const size_t open = line.rfind(" (");
  if (open == std::string::npos || line.back() != ')') return line;
  std::string inside = line.substr(open + 2, line.size() - open - 3);
  const std::string verified = ", verified";
  const bool was_verified = inside.size() > verified.size() && inside.compare(inside.size() - verified.size(), verified.size(), verified) == 0;
  if (was_verified) inside.resize(inside.size() - verified.size());
  if (inside.size() < 4 || inside.compare(inside.size() - 3, 3, " us") != 0) return line;
  for (size_t i = 0; i + 3 < inside.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(inside[i])) && inside[i] != '.') return line;
  return line.substr(0, open) + (was_verified ? " (verified)" : "");
}

// Ids in the file are the record stream's numbers (ir::GraphRecords), which loading maps back.
class Writer {
 public:
  Writer(const ir::GraphRecords& records) : records_(records) {}
  void value(ir::ValueId v) {
    if (v != kNone && records_.value_index[v] == kNone) throw Error(ErrorCode::Internal, "save: a plan names a value of a body");
    w.u32(v == kNone ? kNone : records_.value_index[v]);
  }
  void node(ir::NodeId n) { w.u32(n == kNone ? kNone : records_.node_index[n]); }
  void slot(const Plan::Slot& s) {
    w.u8(s.kind);
    w.i64(s.at);
    value(s.value);
    write_format(w, s.format);
  }
  template <class T, class F>
  void list(const std::vector<T>& items, F&& each) {
    w.u32(static_cast<uint32_t>(items.size()));
    for (const T& item : items) each(item);
  }
  ir::ByteWriter w;

 private:
  const ir::GraphRecords& records_;
};

}  // namespace

std::vector<uint8_t> PlanRecord::write(const Plan& plan, ir::BlobTable& blobs) {
  const ir::Graph& g = *plan.graph_;
  const Plan::Decided& d = *plan.decided_;
  const ir::GraphRecords records = ir::serialize_records(g, blobs);
  Writer out(records);
  ir::ByteWriter& w = out.w;
  w.u64(records.bytes.size());
  w.raw(records.bytes.data(), records.bytes.size());
  // Every value's type, in stream order: what the loaded graph's inference must come to again.
  std::vector<ir::ValueId> by_index(g.values.size(), kNone);
  uint32_t numbered = 0;
  for (ir::ValueId v = 0; v < g.values.size(); ++v)
    if (records.value_index[v] != kNone) by_index[records.value_index[v]] = v, ++numbered;
  w.u32(numbered);
  for (uint32_t i = 0; i < numbered; ++i) {
    w.u8(static_cast<uint8_t>(g.values[by_index[i]].dtype));
    write_shape(w, g.shape(by_index[i]));
  }
  // A symbolic plan: the largest sizes its memory is planned for, as input shapes.
  w.u8(d.sized != nullptr);
  if (d.sized) out.list(d.sized->inputs(), [&](ir::ValueId v) { write_shape(w, d.sized->shape(v)); });
  out.list(*plan.groups_, [&](const FusedGroup& grp) {
    out.list(grp.members, [&](ir::NodeId n) { out.node(n); });
    out.node(grp.head);
    out.list(grp.inputs, [&](ir::ValueId v) { out.value(v); });
    out.list(grp.outputs, [&](ir::ValueId v) { out.value(v); });
  });
  out.list(d.launches, [&](const Plan::Launch& l) {
    out.node(l.node);
    w.i64(l.group);
    w.u32(static_cast<uint32_t>(l.stream));
    out.list(l.in, [&](const Plan::Slot& s) { out.slot(s); });
    out.list(l.out, [&](const Plan::Slot& s) { out.slot(s); });
  });
  out.list(d.waits, [&](const std::vector<int>& ws) { out.list(ws, [&](int i) { w.u32(static_cast<uint32_t>(i)); }); });
  out.list(d.stream_launches, [&](const std::vector<int>& ls) { out.list(ls, [&](int i) { w.u32(static_cast<uint32_t>(i)); }); });
  out.list(d.log, [&](const std::string& line) { w.str(without_time(line)); });
  out.list(d.output_copies, [&](const std::pair<int, ir::ValueId>& c) {
    w.u32(static_cast<uint32_t>(c.first));
    out.value(c.second);
  });
  std::vector<std::pair<ir::ValueId, ir::ValueId>> viewed;
  for (ir::ValueId v = 0; v < d.viewed.size(); ++v)
    if (d.viewed[v] != kNone) viewed.push_back({v, d.viewed[v]});
  out.list(viewed, [&](const std::pair<ir::ValueId, ir::ValueId>& p) {
    out.value(p.first);
    out.value(p.second);
  });
  for (int64_t figure : {d.arena_bytes, int64_t{d.reorders}, int64_t{d.views}, int64_t{d.num_streams}, int64_t{d.communication_stream}, d.events,
                         d.lower_bound_bytes, d.no_reuse_bytes, d.in_place_values})
    w.i64(figure);
  return std::move(w.buf);
}

// Reads a plan's record, mapping the stream's numbers to the loaded graph's ids.
class PlanRecord::Reader {
 public:
  Reader(const uint8_t* bytes, size_t size) : r(bytes, size, kFile) {}
  [[noreturn]] void bad(const std::string& what) const { r.bad("a plan " + what); }
  ir::ValueId value() {
    const uint32_t i = r.u32();
    if (i == kNone) return kNone;
    if (i >= graph.values.size()) bad("names value " + std::to_string(i) + ", which its graph lacks");
    return graph.values[i];
  }
  ir::NodeId node() {
    const uint32_t i = r.u32();
    if (i == kNone) return kNone;
    if (i >= graph.nodes.size()) bad("names node " + std::to_string(i) + ", which its graph lacks");
    return graph.nodes[i];
  }
  ir::Shape shape() {
    const uint8_t rank = r.u8();
    if (rank > ir::kMaxRank) bad("holds a shape of rank " + std::to_string(rank));
    ir::Shape s;
    for (uint8_t i = 0; i < rank; ++i) s.push_back(r.i64());
    return s;
  }
  schedule::Format format(size_t rank) {
    schedule::Format f;
    const uint8_t kind = r.u8();
    f.block = r.i64();
    if (kind == schedule::Format::RowMajor && f.block == 1) return f;
    if (kind == schedule::Format::ChannelsLast && f.block == 1 && rank >= 3) return schedule::Format::channels_last();
    if (kind != schedule::Format::BlockedChannels || f.block < 2 || f.block > kMaxBlock || rank < 2) bad("holds a memory format no backend uses");
    f.kind = schedule::Format::BlockedChannels;
    return f;
  }
  template <class F>
  void list(size_t min_bytes, F&& each) {
    const uint32_t n = r.count(min_bytes);
    for (uint32_t i = 0; i < n; ++i) each(i);
  }
  std::vector<int> indexes(size_t below) {
    std::vector<int> out;
    list(4, [&](uint32_t) {
      const uint32_t i = r.u32();
      if (i >= below) bad("names launch " + std::to_string(i) + " of " + std::to_string(below));
      out.push_back(static_cast<int>(i));
    });
    return out;
  }
  ir::ByteReader r;
  ir::LoadedGraph graph;
};

namespace {

int64_t bytes_of(const ir::Graph& g, ir::ValueId v, const schedule::Format& f) {
  return f.physical_elements(g.shape(v)) * static_cast<int64_t>(ir::dtype_size(g.values[v].dtype));
}

}  // namespace

std::unique_ptr<Plan> PlanRecord::read(const uint8_t* bytes, size_t size, const std::vector<ir::ConstBlob>& blobs, const CompileOptions& options) {
  Reader in(bytes, size);
  const uint64_t graph_size = in.r.u64();
  if (graph_size > in.r.left()) in.bad("graph runs past the end of its section");
  in.graph = ir::deserialize_records(in.r.skip(graph_size), graph_size, blobs);
  std::unique_ptr<Plan> p(new Plan());
  p->graph_ = std::move(in.graph.graph);
  const ir::Graph& g = *p->graph_;
  auto d = std::make_shared<Plan::Decided>();
  read_types(in, g, *d);
  p->groups_ = read_groups(in, g, options);
  read_launches(in, g, p->groups_->size(), *d);
  read_figures(in, g, *d);
  check_launches(in, g, *p->groups_, *d);
  p->decided_ = std::move(d);
  if (p->decided_->sized) p->note_varying();
  return p;
}

void PlanRecord::read_types(Reader& in, const ir::Graph& g, Plan::Decided& d) {
  ir::ByteReader& r = in.r;
  // The types inference came to on load, against the ones the file recorded.
  if (r.count(2) != in.graph.values.size()) in.bad("records another number of values than its graph has");
  for (ir::ValueId v : in.graph.values) {
    const auto dtype = static_cast<ir::DType>(r.u8());
    if (dtype != g.values[v].dtype || in.shape() != g.shape(v))
      in.bad("graph infers " + g.type_str(v) + " for " + g.value_name(v) + ", not the type the file recorded");
  }
  if (r.u8()) {  // a symbolic plan: the largest sizes its memory is planned for
    std::vector<ir::Shape> largest;
    in.list(1, [&](uint32_t) { largest.push_back(in.shape()); });
    d.symbolic_nodes = ir::symbolic_nodes(g);
    auto sized = std::make_unique<ir::Graph>(g);
    try {
      ir::reinfer(*sized, largest, d.symbolic_nodes);
    } catch (const Error& e) {
      in.bad(std::string("holds largest sizes its graph refuses: ") + e.what());
    }
    d.sized = std::move(sized);
  }
  const ir::Graph& sizes = d.sized ? *d.sized : g;
  for (ir::NodeId n : g.regions[0].nodes)
    for (uint32_t i = 0; i < g.nodes[n].num_outputs; ++i)
      if (!sizes.shape(g.nodes[n].first_output + i).is_static()) in.bad("has a value whose size it leaves open");
}

std::shared_ptr<const std::vector<FusedGroup>> PlanRecord::read_groups(Reader& in, const ir::Graph& g, const CompileOptions& options) {
  auto groups = std::make_shared<std::vector<FusedGroup>>();
  const GroupingRules rules = options.backend->grouping(options);
  in.list(16, [&](uint32_t) {
    FusedGroup grp;
    in.list(4, [&](uint32_t) { grp.members.push_back(in.node()); });
    grp.head = in.node();
    in.list(4, [&](uint32_t) { grp.inputs.push_back(in.value()); });
    in.list(4, [&](uint32_t) { grp.outputs.push_back(in.value()); });
    const std::string problem = group_problem(g, grp, rules);
    if (!problem.empty()) in.bad("holds " + problem);
    grp.shape = g.shape(g.nodes[grp.members.back()].first_output);
    grp.steps = bind_steps(g, grp);
    groups->push_back(std::move(grp));
  });
  return groups;
}

void PlanRecord::read_launches(Reader& in, const ir::Graph& g, size_t groups, Plan::Decided& d) {
  ir::ByteReader& r = in.r;
  in.list(25, [&](uint32_t) {
    Plan::Launch l;
    l.node = in.node();
    const int64_t group = r.i64();
    l.stream = static_cast<int>(r.u32());
    auto slots = [&](std::vector<Plan::Slot>& to) {
      in.list(22, [&](uint32_t) {
        Plan::Slot s;
        const uint8_t kind = r.u8();
        if (kind > Plan::Slot::Constant) in.bad("holds an operand of unknown kind " + std::to_string(kind));
        s.kind = static_cast<Plan::Slot::Kind>(kind);
        s.at = r.i64();
        s.value = in.value();
        s.format = in.format(s.value == kNone ? 0 : g.shape(s.value).rank());
        to.push_back(s);
      });
    };
    slots(l.in);
    slots(l.out);
    if (group < -1 || group >= static_cast<int64_t>(groups)) in.bad("names a fused group it lacks");
    l.group = static_cast<int>(group);
    d.launches.push_back(std::move(l));
  });
  const size_t launches = d.launches.size();
  in.list(4, [&](uint32_t) { d.waits.push_back(in.indexes(launches)); });
  in.list(4, [&](uint32_t) { d.stream_launches.push_back(in.indexes(launches)); });
  in.list(4, [&](uint32_t) { d.log.push_back(r.str()); });
}

void PlanRecord::read_figures(Reader& in, const ir::Graph& g, Plan::Decided& d) {
  ir::ByteReader& r = in.r;
  in.list(8, [&](uint32_t) {
    const uint32_t index = r.u32();
    const ir::ValueId v = in.value();
    if (index >= g.outputs().size() || v != g.outputs()[index]) in.bad("copies an output it does not have");
    d.output_copies.push_back({static_cast<int>(index), v});
  });
  d.viewed.assign(g.values.size(), kNone);
  in.list(8, [&](uint32_t) {
    const ir::ValueId v = in.value(), seen = in.value();
    if (v == kNone || seen == kNone || seen >= v) in.bad("holds a view of a later value");
    d.viewed[v] = seen;
  });
  d.arena_bytes = r.i64();
  const int64_t reorders = r.i64(), views = r.i64(), num_streams = r.i64(), communication_stream = r.i64();
  d.events = r.i64();
  d.lower_bound_bytes = r.i64();
  d.no_reuse_bytes = r.i64();
  d.in_place_values = r.i64();
  if (!r.done()) in.bad("has bytes after its last field");
  const size_t launches = d.launches.size();
  if (d.arena_bytes < 0 || d.arena_bytes > kMaxArenaBytes || d.arena_bytes % schedule::kArenaAlignment)
    in.bad("has an arena of " + std::to_string(d.arena_bytes) + " bytes");
  if (num_streams < 1 || num_streams > 17 || (communication_stream != -1 && communication_stream != num_streams - 1) ||
      d.stream_launches.size() != static_cast<size_t>(num_streams) || d.waits.size() != launches)
    in.bad("has streams that disagree with its launches");
  if (reorders < 0 || views < 0 || reorders > static_cast<int64_t>(launches) || views > static_cast<int64_t>(g.nodes.size()))
    in.bad("has figures past its launches");
  d.reorders = static_cast<int>(reorders);
  d.views = static_cast<int>(views);
  d.num_streams = static_cast<int>(num_streams);
  d.communication_stream = static_cast<int>(communication_stream);
}

void PlanRecord::check_launches(Reader& in, const ir::Graph& g, const std::vector<FusedGroup>& groups, const Plan::Decided& d) {
  const ir::Graph& sizes = d.sized ? *d.sized : g;
  // Each operand where the graph says it is, and its bytes where the plan has them.
  auto check_slot = [&](const Plan::Slot& s, ir::ValueId want) {
    if (s.value != want) in.bad("launch's operands differ from its op's");
    if (s.kind == Plan::Slot::Arena && s.at == -1 && want == kNone) return;
    if (want == kNone) in.bad("fills an absent operand");
    const int64_t need = bytes_of(sizes, want, s.format);
    int64_t room = 0;
    switch (s.kind) {
      case Plan::Slot::Arena:
        if (s.at < 0 || s.at % schedule::kArenaAlignment || need > d.arena_bytes - s.at) in.bad("has an operand outside its arena");
        return;
      case Plan::Slot::Input:
        if (s.at < 0 || s.at >= static_cast<int64_t>(g.inputs().size())) in.bad("names an input it lacks");
        room = bytes_of(sizes, g.inputs()[static_cast<size_t>(s.at)], {});
        break;
      case Plan::Slot::Output:
        if (s.at < 0 || s.at >= static_cast<int64_t>(g.outputs().size())) in.bad("names an output it lacks");
        room = bytes_of(sizes, g.outputs()[static_cast<size_t>(s.at)], {});
        break;
      case Plan::Slot::Constant: {
        const auto n = static_cast<ir::NodeId>(s.at);
        if (s.at < 0 || s.at >= static_cast<int64_t>(g.nodes.size()) || g.nodes[n].blob == kNone) in.bad("names a constant it lacks");
        room = static_cast<int64_t>(g.blobs[g.nodes[n].blob]->size());
        break;
      }
    }
    if (s.format != schedule::Format::row_major() || need > room) in.bad("reads past an operand the caller or the graph holds");
  };
  const size_t launches = d.launches.size();
  std::vector<int> seen(launches, 0);
  for (size_t s = 0; s < d.stream_launches.size(); ++s)
    for (size_t k = 0; k < d.stream_launches[s].size(); ++k) {
      const int i = d.stream_launches[s][k];
      if (d.launches[static_cast<size_t>(i)].stream != static_cast<int>(s) || seen[static_cast<size_t>(i)]++ ||
          (k && i <= d.stream_launches[s][k - 1]))
        in.bad("runs a launch on a stream out of order");
    }
  for (size_t i = 0; i < launches; ++i) {
    const Plan::Launch& l = d.launches[i];
    if (!seen[i]) in.bad("leaves a launch on no stream");
    for (int w : d.waits[i])
      if (static_cast<size_t>(w) >= i || d.launches[static_cast<size_t>(w)].stream == l.stream) in.bad("waits for a later launch");
    if (l.node == kNone) {  // a reorder
      if (l.group != -1 || l.in.size() != 1 || l.out.size() != 1 || l.in[0].value == kNone ||
          (l.out[0].kind != Plan::Slot::Arena && l.out[0].kind != Plan::Slot::Output))
        in.bad("holds a reorder that is not one");
      check_slot(l.in[0], l.in[0].value);
      check_slot(l.out[0], l.in[0].value);
    } else if (l.group >= 0) {
      const FusedGroup& grp = groups[static_cast<size_t>(l.group)];
      if (l.node != grp.members.back() || l.in.size() != grp.inputs.size() || l.out.size() != grp.outputs.size())
        in.bad("launches a group with other operands");
      for (size_t k = 0; k < l.in.size(); ++k) check_slot(l.in[k], grp.inputs[k]);
      for (size_t k = 0; k < l.out.size(); ++k) check_slot(l.out[k], grp.outputs[k]);
    } else {
      const ir::Node& n = g.nodes[l.node];
      if (n.region != 0 || n.blob != kNone || l.in.size() != n.num_inputs || l.out.size() != n.num_outputs)
        in.bad("launches " + g.node_name(l.node) + " with other operands");
      for (uint32_t k = 0; k < n.num_inputs; ++k) check_slot(l.in[k], g.operands[n.first_input + k]);
      for (uint32_t k = 0; k < n.num_outputs; ++k) check_slot(l.out[k], n.first_output + k);
    }
  }
}

}  // namespace esg::runtime
