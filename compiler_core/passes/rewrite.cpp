// The helpers of rewrite.hpp, written once for the passes and the Ascend legalizations alike.
#include "passes/rewrite.hpp"

#include <algorithm>
#include <string>

#include "eval/evaluate.hpp"
#include "eval/host_tensor.hpp"
#include "ir/error.hpp"
#include "ir/op_attrs.gen.hpp"

namespace esg::passes {

std::unique_ptr<ir::Graph> run_pass(const ir::Graph& g, const ir::Replay::Hook& hook) { return ir::rebuild(g, nullptr, hook); }

ir::ValueId added(ir::Replay& r, const ir::OpSchema& op, ir::Span<ir::ValueId> inputs, ir::Span<ir::AttrArg> attrs) {
  return r.to().graph().nodes[r.to().add_op(op, inputs, attrs)].first_output;
}

std::vector<ir::AttrArg> attrs_of(const ir::Graph& g, const ir::Node& n) {
  std::vector<ir::AttrArg> out;
  for (size_t i = 0; i < n.op->attrs.size(); ++i) {
    const ir::AttrValue& a = g.attrs[n.first_attr + i];
    if (a.kind == ir::AttrKind::IntList) out.push_back(ir::AttrArg::of_ints(g.ints_of(a).data(), a.size));
    else if (a.kind == ir::AttrKind::Float) out.push_back(ir::AttrArg::of_float(a.f));
    else if (a.kind == ir::AttrKind::String || a.kind == ir::AttrKind::FloatList)
      throw ir::Error(ir::ErrorCode::Internal, std::string("pass: copying a string or float list attribute of ") + n.op->name);
    else {
      ir::AttrArg arg = ir::AttrArg::of_int(a.i);
      arg.kind = a.kind;
      out.push_back(arg);
    }
  }
  return out;
}

const ir::Node* producer(const ir::Graph& g, ir::ValueId v) {
  return g.values[v].producer == ir::kNone ? nullptr : &g.nodes[g.values[v].producer];
}

eval::TensorRef constant_data(const ir::Graph& g, ir::ValueId v) {
  const ir::Node* p = v == ir::kNone ? nullptr : producer(g, v);
  if (!p || p->blob == ir::kNone) return {};
  return {g.values[v].dtype, g.shape(v), const_cast<uint8_t*>(g.blobs[p->blob]->data())};
}

const ir::Node* made_by(const ir::Graph& g, ir::ValueId v, ir::OpKind kind) {
  const ir::Node* p = v == ir::kNone ? nullptr : producer(g, v);
  return p && p->op->kind == kind ? p : nullptr;
}

std::vector<uint32_t> use_counts(const ir::Graph& g) {
  std::vector<uint32_t> uses(g.values.size(), 0);
  for (const ir::Node& node : g.nodes)
    for (uint32_t i = 0; i < node.num_inputs; ++i)
      if (g.operands[node.first_input + i] != ir::kNone) ++uses[g.operands[node.first_input + i]];
  for (ir::ValueId v : g.outputs()) ++uses[v];
  return uses;
}

bool fold_node(ir::Replay& r, const ir::Graph& g, ir::NodeId id, int64_t max_elements) {
  using K = ir::OpKind;
  using ir::kNone;
  using ir::ValueId;
  const ir::Node& n = g.nodes[id];
  // Generators (fill, range) have no inputs and fold like the rest, within max_elements.
  if (n.region != 0 || n.blob != kNone || n.num_bodies || n.op->communicates) return false;
  const ir::Graph& t = r.to().graph();
  std::vector<eval::TensorRef> in(n.num_inputs);
  std::vector<const eval::TensorRef*> in_ptrs(n.num_inputs, nullptr);
  for (uint32_t i = 0; i < n.num_inputs; ++i) {
    const ValueId old = g.operands[n.first_input + i];
    if (old == kNone) continue;
    const ValueId v = r.get(old);
    const ir::Node* p = producer(t, v);
    if (!p || p->blob == kNone) return false;
    in[i] = {t.values[v].dtype, t.shape(v), const_cast<uint8_t*>(t.blobs[p->blob]->data())};
    in_ptrs[i] = &in[i];
  }
  // Data movement folds at any size when no result has more bytes than the largest input (an
  // exporter's reshaped, sliced or transposed weights: no more constant bytes than the graph
  // holds already, and no arithmetic to spend compile time on).
  const K kind = n.op->kind;
  const bool moves_data = kind == K::reshape || kind == K::squeeze || kind == K::unsqueeze || kind == K::transpose ||
                          kind == K::slice || kind == K::gather || kind == K::split;
  int64_t largest_input = 0;
  for (const eval::TensorRef& x : in)
    if (x.bytes) largest_input = std::max(largest_input, static_cast<int64_t>(x.nbytes()));
  for (uint32_t i = 0; i < n.num_outputs; ++i) {
    const ir::Shape s = g.shape(n.first_output + i);
    const int64_t bytes = s.is_static() ? s.num_elements() * static_cast<int64_t>(ir::dtype_size(g.values[n.first_output + i].dtype)) : 0;
    if (!s.is_static() || (s.num_elements() > max_elements && !(moves_data && bytes <= largest_input))) return false;
  }
  // A reshaped constant is the same bytes: shared, not copied (a weight-only model's codes,
  // which an importer reshapes, would otherwise be kept twice).
  if (kind == K::reshape || kind == K::squeeze || kind == K::unsqueeze) {
    r.set(n.first_output, r.to().add_constant(g.values[n.first_output].dtype, g.shape(n.first_output), t.blobs[producer(t, r.get(g.operands[n.first_input]))->blob]));
    return true;
  }
  std::vector<eval::HostTensor> out;
  for (uint32_t i = 0; i < n.num_outputs; ++i) out.emplace_back(g.values[n.first_output + i].dtype, g.shape(n.first_output + i));
  std::vector<eval::TensorRef> out_refs;
  for (const eval::HostTensor& o : out) out_refs.push_back(o.ref());
  std::vector<const eval::TensorRef*> out_ptrs;
  for (const eval::TensorRef& o : out_refs) out_ptrs.push_back(&o);
  eval::run_kernel(g, n, in_ptrs, out_ptrs);
  for (uint32_t i = 0; i < n.num_outputs; ++i)
    r.set(n.first_output + i, r.to().add_constant(out[i].dtype, out[i].shape, out[i].bytes.data(), out[i].bytes.size()));
  return true;
}

std::vector<int64_t> perm_of(const ir::Graph& g, const ir::Node& transpose, size_t rank) {
  const std::vector<size_t> p = ir::TransposeAttrs(g, transpose).perm;
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) out[i] = static_cast<int64_t>(p.empty() ? rank - 1 - i : p[i]);
  return out;
}

}  // namespace esg::passes
