#include "quantize/sites.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "ir/error.hpp"
#include "ir/op_attrs.gen.hpp"
#include "passes/rewrite.hpp"

namespace esg::quantize {
namespace {

using ir::Graph;
using ir::kNone;
using ir::ValueId;
using K = ir::OpKind;

bool is_f32(const Graph& g, ValueId v) { return v != kNone && g.values[v].dtype == ir::DType::F32; }

// A finite f32 constant of `rank` that only one op reads.
bool own_constant(const Graph& g, ValueId v, size_t rank, const std::vector<uint32_t>& uses) {
  const ir::Node* p = v == kNone ? nullptr : passes::producer(g, v);
  if (!p || p->blob == kNone || !is_f32(g, v) || g.shape(v).rank() != rank || uses[v] != 1) return false;
  const float* x = reinterpret_cast<const float*>(g.blobs[p->blob]->data());
  return std::all_of(x, x + g.shape(v).num_elements(), [](float w) { return std::isfinite(w); });
}

}  // namespace

ir::ValueId Site::reported() const { return result != kNone ? result : graph->nodes[node].first_output; }

Sites find_sites(const Graph& g, const std::vector<std::string>& keep_float) {
  const std::vector<uint32_t> uses = passes::use_counts(g);
  // The one top-level node reading each value, when one alone does.
  std::vector<ir::NodeId> sole_reader(g.values.size(), kNone);
  for (ir::NodeId id : g.regions[0].nodes)
    for (ValueId v : g.inputs(g.nodes[id]))
      if (v != kNone && uses[v] == 1) sole_reader[v] = id;

  std::unordered_set<std::string> kept(keep_float.begin(), keep_float.end()), matched;
  auto kept_float = [&](ir::NodeId id) {
    const ir::Node& n = g.nodes[id];
    for (const std::string& name : {g.node_name(id), n.num_outputs ? g.value_name(n.first_output) : std::string(), std::string(n.op->name)})
      if (kept.count(name)) return matched.insert(name), true;
    return false;
  };
  // What a quantized op's result is: past a Relu or Clip that alone reads it (folded into the
  // quantized op's bounds at compile time).
  auto past_clip = [&](ValueId v) {
    const ir::NodeId reader = sole_reader[v];
    if (reader == kNone) return v;
    const K kind = g.nodes[reader].op->kind;
    return (kind == K::relu || kind == K::clip) && !kept_float(reader) ? g.nodes[reader].first_output : v;
  };

  Sites s;
  std::unordered_set<ValueId> quantized;
  auto quantize = [&](ValueId v) {
    if (quantized.insert(v).second) s.calibrated.push_back(v);
  };
  for (ir::NodeId id : g.regions[0].nodes) {
    const ir::Node& n = g.nodes[id];
    if (kept_float(id) || n.num_deps) continue;
    const ValueId out = n.first_output;
    Site site;
    site.node = id, site.graph = &g;
    switch (n.op->kind) {
      case K::conv2d: {
        const ValueId x = passes::operand(g, n, 0), w = passes::operand(g, n, 1);
        if (!is_f32(g, x) || !own_constant(g, w, 4, uses)) continue;
        const ValueId b = n.num_inputs > 2 ? passes::operand(g, n, 2) : kNone;
        if (b != kNone && !own_constant(g, b, 1, uses)) continue;
        site.inputs = {x}, site.weight = w, site.weight_axis = 0, site.bias = b;
        site.result = past_clip(out);
        break;
      }
      case K::matmul: {
        const ValueId x = passes::operand(g, n, 0), w = passes::operand(g, n, 1);
        const ir::MatmulAttrs a(g, n);
        if (a.transpose_a || !is_f32(g, x) || !own_constant(g, w, 2, uses)) continue;
        site.inputs = {x}, site.weight = w, site.weight_axis = a.transpose_b ? 0 : 1;
        break;
      }
      case K::add: {
        const ValueId a = passes::operand(g, n, 0), b = passes::operand(g, n, 1);
        if (!quantized.count(a) || !quantized.count(b) || g.shape(a) != g.shape(out) || g.shape(b) != g.shape(out)) continue;
        site.inputs = {a, b};
        site.result = past_clip(out);
        break;
      }
      case K::max_pool2d:
        if (quantized.count(passes::operand(g, n, 0)) && quantized.insert(out).second) s.same_as.emplace_back(out, passes::operand(g, n, 0));
        continue;
      default:
        continue;
    }
    for (ValueId v : site.inputs) quantize(v);
    if (site.result != kNone) quantize(site.result);
    s.ops.push_back(std::move(site));
  }
  for (const std::string& name : keep_float)
    if (!matched.count(name))
      throw ir::Error(ir::ErrorCode::InvalidArgument,
                      "quantize: keep_float names '" + name + "', which is no node, result or op of the graph left to quantize "
                      "(batch norms and constants are folded first)");
  return s;
}

}  // namespace esg::quantize
