#include "ascend/launch_lowering.hpp"

#include "ascend/aclnn_call.hpp"
#include "ascend/hccl_call.hpp"
#include "ascend/row_kernel_source.hpp"
#include "ir/error.hpp"

namespace esg::ascend {
namespace {

// Ops that only reinterpret their input's bytes: on the device, a copy (none when in place).
bool is_view(const ir::OpSchema& op) {
  return op.kind == ir::OpKind::reshape || op.kind == ir::OpKind::squeeze || op.kind == ir::OpKind::unsqueeze;
}

}  // namespace

LaunchLowering lower_launch(const runtime::Plan& plan, size_t index) {
  const ir::Graph& g = plan.graph();
  const runtime::Plan::Launch& l = plan.launches()[index];
  const ir::Node& n = g.nodes[l.node];
  LaunchLowering out;
  if (l.group >= 0) {
    const runtime::FusedGroup& grp = plan.groups()[static_cast<size_t>(l.group)];
    try {
      out.source = generate_kernel(g, grp);
      out.kind = LaunchLowering::Kernel;
    } catch (const ir::Error& e) {
      if (e.code() != ir::ErrorCode::Unsupported) throw;
      std::string members;
      for (ir::NodeId m : grp.members) members += (members.empty() ? "" : " ") + std::string(g.nodes[m].op->name);
      out.what = grp.members.size() > 1 ? "the group " + members : members;
      out.why = e.what();
    }
    return out;
  }
  if (n.op->communicates) {
    out.why = hccl_refusal(g, n);
    out.kind = out.why.empty() ? LaunchLowering::Collective : LaunchLowering::None;
    if (!out.why.empty()) out.what = n.op->name;
  } else if (is_row_op(*n.op) && row_kernel_refusal(g, n).empty()) {
    out.source = generate_row_kernel(g, n);
    out.kind = LaunchLowering::Kernel;
  } else if (is_view(*n.op)) {
    out.kind = LaunchLowering::Copy;
  } else if (std::string why = AclnnCall::unsupported(g, n); why.empty()) {
    out.kind = LaunchLowering::Aclnn;
  } else {
    out.what = n.op->name;
    out.why = is_row_op(*n.op) ? row_kernel_refusal(g, n) + "; " + why : why;
  }
  return out;
}

std::string lowered_ops() {
  return "generated kernels cover elementwise ops over f32, f16, bf16 and bool and the row normalizations (softmax, "
         "log_softmax, layer_norm, rms_norm) over f32, f16 and bf16, CANN's operator library (aclnn) " +
         AclnnCall::mapped_ops() + " (f32, f16, bf16; the elementwise ones also i32 and i64), and HCCL the collectives";
}

}  // namespace esg::ascend
