#include "cpu/conv_epilogue.hpp"

#include <oneapi/dnnl/dnnl_types.h>

#include <algorithm>

#include "ir/op_attrs.gen.hpp"

namespace esg::cpu {
namespace {

using K = ir::OpKind;

// A constant single f32's value.
std::optional<float> constant_scalar(const ir::Graph& g, ir::ValueId v) {
  const ir::NodeId p = g.values[v].producer;
  if (p == ir::kNone || g.nodes[p].blob == ir::kNone || g.values[v].dtype != ir::DType::F32 || g.shape(v).num_elements() != 1)
    return std::nullopt;
  return *reinterpret_cast<const float*>(g.blobs[g.nodes[p].blob]->data());
}

PostOp eltwise(dnnl_alg_kind_t algorithm, float alpha = 0, float beta = 0) {
  return {PostOp::Kind::Eltwise, static_cast<int>(algorithm), alpha, beta};
}

// Appends the post-ops of a one-input member; false when it has none.
bool add_unary(const ir::Graph& g, const ir::Node& n, std::vector<PostOp>& out) {
  switch (n.op->kind) {
    case K::relu: out.push_back(eltwise(dnnl_eltwise_relu)); return true;
    case K::leaky_relu: out.push_back(eltwise(dnnl_eltwise_relu, static_cast<float>(ir::LeakyReluAttrs(g, n).alpha))); return true;
    case K::clip: {
      const ir::ClipAttrs a(g, n);
      out.push_back(eltwise(dnnl_eltwise_clip_v2, static_cast<float>(a.min), static_cast<float>(a.max)));
      return true;
    }
    case K::sigmoid: out.push_back(eltwise(dnnl_eltwise_logistic)); return true;
    case K::tanh: out.push_back(eltwise(dnnl_eltwise_tanh)); return true;
    case K::silu: out.push_back(eltwise(dnnl_eltwise_swish, 1.0f)); return true;
    case K::gelu:
      out.push_back(eltwise(ir::GeluAttrs(g, n).approximate == ir::GeluApproximate::none ? dnnl_eltwise_gelu_erf : dnnl_eltwise_gelu_tanh));
      return true;
    case K::elu: out.push_back(eltwise(dnnl_eltwise_elu, static_cast<float>(ir::EluAttrs(g, n).alpha))); return true;
    case K::hard_swish: out.push_back(eltwise(dnnl_eltwise_hardswish)); return true;
    case K::hard_sigmoid: {  // max(0, min(1, αx + β)): a linear step, clipped
      const ir::HardSigmoidAttrs a(g, n);
      out.push_back(eltwise(dnnl_eltwise_linear, static_cast<float>(a.alpha), static_cast<float>(a.beta)));
      out.push_back(eltwise(dnnl_eltwise_clip_v2, 0.0f, 1.0f));
      return true;
    }
    default: return false;
  }
}

}  // namespace

std::optional<Epilogue> conv_epilogue(const ir::Graph& g, const runtime::FusedGroup& group) {
  if (group.head == ir::kNone || group.outputs.size() != 1 || group.outputs[0] != g.nodes[group.members.back()].first_output)
    return std::nullopt;
  Epilogue e;
  ir::ValueId current = g.nodes[group.head].first_output;
  const ir::Shape shape = g.shape(current);
  for (size_t i = 1; i < group.members.size(); ++i) {
    const ir::Node& n = g.nodes[group.members[i]];
    if (n.num_outputs != 1 || g.values[n.first_output].dtype != ir::DType::F32) return std::nullopt;
    const auto in = g.inputs(n);
    if (in.size() == 1) {
      if (in[0] != current) return std::nullopt;
      if (!add_unary(g, n, e.post_ops)) return std::nullopt;
    } else if (in.size() == 2 && (in[0] == current) != (in[1] == current)) {
      const bool first = in[0] == current;
      const ir::ValueId other = first ? in[1] : in[0];
      const K kind = n.op->kind;
      if (const std::optional<float> s = constant_scalar(g, other)) {
        // x·s, x + s, x - s, s - x, x / s as αx + β.
        if (kind == K::mul) e.post_ops.push_back(eltwise(dnnl_eltwise_linear, *s, 0));
        else if (kind == K::add) e.post_ops.push_back(eltwise(dnnl_eltwise_linear, 1, *s));
        else if (kind == K::sub) e.post_ops.push_back(first ? eltwise(dnnl_eltwise_linear, 1, -*s) : eltwise(dnnl_eltwise_linear, -1, *s));
        else if (kind == K::div && first) e.post_ops.push_back(eltwise(dnnl_eltwise_linear, 1 / *s, 0));
        else return std::nullopt;
      } else if (e.residual == ir::kNone && std::find(group.inputs.begin(), group.inputs.end(), other) != group.inputs.end() &&
                 g.shape(other) == shape && g.values[other].dtype == ir::DType::F32 &&
                 (kind == K::add || (kind == K::sub && first))) {
        e.residual = other;
        e.post_ops.push_back({PostOp::Kind::Sum, 0, kind == K::add ? 1.0f : -1.0f, 0});
      } else {
        return std::nullopt;
      }
    } else {
      return std::nullopt;
    }
    current = n.first_output;
  }
  return e;
}

}  // namespace esg::cpu
