// A model whose graph holds ops sized by data (nonzero, unique, non_max_suppression): the graph
// cut before them (ir/cut.hpp), each stage an ordinary Model, such ops run on the host between
// stages (eval::run_cut). A stage that takes such an op's output sees a symbolic size there, so
// it compiles one symbolic plan per size class of it and binds that plan to each size found,
// as for any symbolic input: the host waits for the sizes, no plan waits for a value.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "eval/host_tensor.hpp"
#include "ir/cut.hpp"
#include "runtime/backend.hpp"
#include "runtime/facts.hpp"

namespace esg::runtime {

class Model;
class ThreadPool;
struct CompileOptions;

class StagedModel {
 public:
  // `g` has ops sized by data; the stages share `pool` (may be null).
  StagedModel(const ir::Graph& g, const CompileOptions& options, const std::shared_ptr<ThreadPool>& pool);
  ~StagedModel();

  // The outputs, at the sizes the run came to (inputs checked by the caller). Every stage runs
  // within `control`: the model's cancels stop it, its loops count against one cap.
  std::vector<eval::HostTensor> run(const std::vector<eval::TensorRef>& inputs, std::vector<TraceEvent>* trace,
                                    const eval::RunControl& control) const;
  // The output shapes as far as input shapes tell: a size the data decides stays a symbol.
  std::vector<ir::Shape> output_shapes(const std::vector<ir::Shape>& input_shapes) const;
  // Its stages and sized ops, every stage's amounts added up (one run goes through them all),
  // and each stage's own facts as a row.
  void add_facts(Facts& f) const;
  std::string to_dot() const;

 private:
  const ir::Graph& graph_;
  ir::Cut cut_;
  std::vector<std::unique_ptr<Model>> stages_;  // per stage of cut_; null where it computes nothing
  int sized_ops_ = 0;
  mutable std::mutex mu_;
  mutable std::map<std::vector<std::vector<int64_t>>, std::vector<ir::Shape>> shapes_;  // output_shapes, by input shapes
};

}  // namespace esg::runtime
