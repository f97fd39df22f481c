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

void StagedModel::add_facts(Facts& f) const {
  f.level("stages", static_cast<int64_t>(stages_.size()));
  f.count("sized_ops", sized_ops_);  // cut before, run on the host between stages
  // Every stage's amounts added up (one run goes through them all), then each stage's own.
  std::vector<Facts> each(stages_.size());
  Facts total;
  for (size_t k = 0; k < stages_.size(); ++k)
    if (stages_[k]) total.add(each[k] = stages_[k]->facts());
  // The host runs between stages, so no one captured device model replays a run.
  total.drop("captured");
  f.level("captured", 0);
  f.add(total);
  for (size_t k = 0; k < stages_.size(); ++k) {
    Facts& row = f.row("stage_list");
    row = std::move(each[k]);
    if (!stages_[k]) row.text("plan", "none: nothing to compute");
    for (ir::NodeId id : cut_.stages[k].then_run) {  // on the host, after the stage
      Facts& then = row.row("then_run");
      then.text("node", graph_.node_name(id));
      then.text("op", graph_.nodes[id].op->name);
    }
  }
}

std::string StagedModel::to_dot() const {
  std::string out;
  for (const auto& m : stages_)
    if (m) out += m->to_dot();
  return out;
}

}  // namespace esg::runtime
