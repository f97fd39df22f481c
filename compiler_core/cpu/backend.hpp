// The host CPU as a backend: no legalization (the reference evaluator runs every op), its
// grouping rules (fused_kernel.hpp), blocked channels for the ops with such kernels when the
// option channel_block asks (fast_kernels.hpp), and the plan run as it is (program.hpp).
#pragma once
#include "runtime/backend.hpp"

namespace esg::cpu {

class Backend final : public runtime::Backend {
 public:
  const char* name() const override { return "cpu"; }
  std::vector<runtime::BackendOption> options() const override;
  std::unique_ptr<ir::Graph> legalize(const ir::Graph& g) const override;
  runtime::GroupingRules grouping(const runtime::CompileOptions& options) const override;
  runtime::FormatRules formats(const runtime::CompileOptions& options) const override;
  std::string cannot_run(const runtime::Plan& plan, size_t index) const override;
  std::unique_ptr<runtime::Program> lower(const runtime::Plan& plan, const runtime::CompileOptions& options) const override;
};

}  // namespace esg::cpu
