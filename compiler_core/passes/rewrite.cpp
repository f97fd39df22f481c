// The helpers of rewrite.hpp, written once for the passes and the Ascend legalizations alike.
#include "passes/rewrite.hpp"

#include <string>

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

std::vector<int64_t> perm_of(const ir::Graph& g, const ir::Node& transpose, size_t rank) {
  const std::vector<size_t> p = ir::TransposeAttrs(g, transpose).perm;
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) out[i] = static_cast<int64_t>(p.empty() ? rank - 1 - i : p[i]);
  return out;
}

}  // namespace esg::passes
