#include "runtime/staged_model.hpp"

#include <algorithm>

#include "eval/evaluate.hpp"
#include "eval/run_cut.hpp"
#include "runtime/model.hpp"

namespace esg::runtime {

StagedModel::StagedModel(const ir::Graph& g, const CompileOptions& options, const std::shared_ptr<ThreadPool>& pool)
    : graph_(g), cut_(ir::cut_at_sized_by_data(g)) {
  for (const ir::Cut::Stage& st : cut_.stages) {
    sized_ops_ += static_cast<int>(st.then_run.size());
    if (!st.graph) {
      stages_.push_back(nullptr);
      continue;
    }
    // A stage's graph has every symbol of the graph: the options' sizes and ranges hold in it too.
    stages_.push_back(std::make_unique<Model>(std::make_unique<ir::Graph>(*st.graph), options, pool));
  }
}

StagedModel::~StagedModel() = default;

std::vector<eval::HostTensor> StagedModel::run(const std::vector<eval::TensorRef>& inputs, std::vector<TraceEvent>* trace,
                                               const eval::RunControl& control) const {
  return eval::run_cut(
      graph_, cut_, inputs, [&](size_t k, const std::vector<eval::TensorRef>& in) { return stages_[k]->run(in, trace, control); }, control);
}

std::vector<ir::Shape> StagedModel::output_shapes(const std::vector<ir::Shape>& input_shapes) const {
  std::vector<std::vector<int64_t>> key;
  for (const ir::Shape& s : input_shapes) key.emplace_back(s.begin(), s.end());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = shapes_.find(key); it != shapes_.end()) return it->second;
  }
  const std::unique_ptr<ir::Graph> spec = eval::specialize(graph_, input_shapes);
  std::vector<ir::Shape> out;
  for (ir::ValueId v : spec->outputs()) out.push_back(spec->shape(v));
  std::lock_guard<std::mutex> lock(mu_);
  if (shapes_.size() >= 64) shapes_.clear();  // a bound, not a policy: recomputing costs one rebuild
  shapes_.emplace(key, out);
  return out;
}

Stats StagedModel::stats() const {
  Stats s;
  s.stages = static_cast<int64_t>(stages_.size());
  s.sized_ops = sized_ops_;
  for (const auto& m : stages_) {
    if (!m) continue;
    const Stats t = m->stats();
    s.plans += t.plans;
    s.bindings += t.bindings;
    s.launches += t.launches;
    s.fused_groups += t.fused_groups;
    s.fused_ops += t.fused_ops;
    s.epilogue_groups += t.epilogue_groups;
    s.f32_rows += t.f32_rows;
    s.fast_kernels += t.fast_kernels;
    s.reference_kernels += t.reference_kernels;
    s.arena_bytes += t.arena_bytes;
    s.lower_bound_bytes += t.lower_bound_bytes;
    s.no_reuse_bytes += t.no_reuse_bytes;
    s.in_place_values += t.in_place_values;
    s.streams = std::max(s.streams, t.streams);
    s.events += t.events;
    s.device_kernels += t.device_kernels;
    s.device_kernel_launches += t.device_kernel_launches;
    s.library_calls += t.library_calls;
    s.device_copies += t.device_copies;
    s.host_launches += t.host_launches;
    s.device_bytes += t.device_bytes;
    s.device_events += t.device_events;
    s.reorders += t.reorders;
  }
  return s;  // captured stays 0: the host runs between stages, so no one device model replays a run
}

std::string StagedModel::report() const {
  std::string out = "stages: " + std::to_string(stages_.size()) + ", cut before " + std::to_string(sized_ops_) +
                    " op(s) whose output sizes the data decides (run on the host between stages)\n";
  for (size_t k = 0; k < stages_.size(); ++k) {
    out += "== stage " + std::to_string(k) + (stages_[k] ? "\n" + stages_[k]->report() : std::string(": nothing to compute\n"));
    for (ir::NodeId id : cut_.stages[k].then_run)
      out += "then `" + graph_.node_name(id) + "` (" + graph_.nodes[id].op->name + ") on the host\n";
  }
  return out;
}

std::string StagedModel::to_dot() const {
  std::string out;
  for (const auto& m : stages_)
    if (m) out += m->to_dot();
  return out;
}

}  // namespace esg::runtime
