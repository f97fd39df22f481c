#include "eval/run_cut.hpp"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "eval/sized_kernels.hpp"
#include "ir/builder.hpp"
#include "ir/error.hpp"
#include "ir/replay.hpp"

namespace esg::eval {
namespace {

// The op's rule run again at the sizes it is given, as the builder would have run it: a rule
// takes two symbols for equal where it needs equal sizes, so the sizes are checked here, before
// its kernel reads them (ir::Error naming the op otherwise).
void check_sizes(const ir::Graph& g, ir::NodeId id, const std::vector<const TensorRef*>& in) {
  ir::Builder b;
  ir::Replay replay(g, b);
  const ir::Node& n = g.nodes[id];
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i]) replay.set(g.operands[n.first_input + static_cast<uint32_t>(i)], b.add_input("in" + std::to_string(i), in[i]->dtype, in[i]->shape));
  replay.copy(id);
}

}  // namespace

std::vector<HostTensor> run_cut(const ir::Graph& g, const ir::Cut& cut, const std::vector<TensorRef>& inputs, const StageRun& stage,
                                const RunControl& control) {
  std::unordered_map<ir::ValueId, TensorRef> at;        // every value there so far
  std::unordered_map<ir::ValueId, HostTensor> made;     // those the stages and sized ops made
  for (size_t i = 0; i < inputs.size(); ++i) at[g.inputs()[i]] = inputs[i];
  auto keep = [&](ir::ValueId v, HostTensor t) { at[v] = (made[v] = std::move(t)).ref(); };
  auto ref = [&](ir::ValueId v) -> const TensorRef& {
    const auto it = at.find(v);
    if (it == at.end()) throw ir::Error(ir::ErrorCode::Internal, "run_cut: " + g.value_name(v) + " is not there yet");
    return it->second;
  };
  for (size_t k = 0; k < cut.stages.size(); ++k) {
    const ir::Cut::Stage& st = cut.stages[k];
    if (st.graph) {
      control.check();
      std::vector<TensorRef> in;
      for (ir::ValueId v : st.inputs) in.push_back(ref(v));
      std::vector<HostTensor> out = stage(k, in);
      for (size_t i = 0; i < out.size(); ++i) keep(st.outputs[i], std::move(out[i]));
    }
    for (ir::NodeId id : st.then_run) {
      control.check();
      const ir::Node& n = g.nodes[id];
      std::vector<const TensorRef*> in;
      for (ir::ValueId v : g.inputs(n)) in.push_back(v == ir::kNone ? nullptr : &ref(v));
      check_sizes(g, id, in);
      const SizedKernel kernel = find_sized_kernel(*n.op);
      if (!kernel) throw ir::Error(ir::ErrorCode::Internal, std::string("no kernel for `") + n.op->name + "`, whose sizes the data decides");
      std::vector<HostTensor> out = kernel(KernelCall{g, n, in, {}}, control);
      for (uint32_t i = 0; i < n.num_outputs; ++i) keep(n.first_output + i, std::move(out[i]));
    }
  }
  std::vector<HostTensor> result;
  const std::vector<ir::ValueId>& outs = g.outputs();
  for (size_t i = 0; i < outs.size(); ++i) {
    const auto owned = made.find(outs[i]);
    // An output given once and made here is handed over; otherwise copied.
    if (owned != made.end() && std::count(outs.begin(), outs.end(), outs[i]) == 1) result.push_back(std::move(owned->second));
    else result.emplace_back(ref(outs[i]));
  }
  return result;
}

}  // namespace esg::eval
