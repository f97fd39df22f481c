// The host CPU as a backend: no legalization (the reference evaluator runs every op), its
// grouping rules (fused_kernel.hpp), blocked channels for the ops with such kernels when the
// option channel_block asks (fast_kernels.hpp), and the plan run as it is (program.hpp).
#include "runtime/backend.hpp"

#include "cpu/fast_kernels.hpp"
#include "cpu/fused_kernel.hpp"
#include "cpu/program.hpp"
#include "ir/error.hpp"
#include "runtime/plan.hpp"

namespace esg::cpu {
namespace {

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

std::vector<runtime::BackendOption> Backend::options() const {
  return {{"channel_block", 0, 16, 0,
           "0 (default): every value row-major; 8 or 16: ops with a blocked-channel kernel (the pools) compute in nChw8c or "
           "nChw16c, and elementwise chains after them stay so"}};
}

std::unique_ptr<ir::Graph> Backend::legalize(const ir::Graph&) const { return nullptr; }

runtime::GroupingRules Backend::grouping(const runtime::CompileOptions&) const { return grouping_rules(); }

runtime::FormatRules Backend::formats(const runtime::CompileOptions& options) const {
  const int64_t block = options.backend_options.get("channel_block", this->options());
  if (block == 0) return {};
  if (block != 8 && block != 16)
    throw ir::Error(ir::ErrorCode::InvalidArgument, "compile: cpu option channel_block " + std::to_string(block) + " (0, 8 or 16)");
  runtime::FormatRules rules;
  const plan::Format blocked = plan::Format::blocked_channels(block);
  rules.format_of = [blocked](const ir::Graph& g, const ir::Node& n) {
    return find_blocked_kernel(g, n, blocked) ? blocked : plan::Format::row_major();
  };
  rules.elementwise_any_format = true;
  return rules;
}

std::string Backend::cannot_run(const runtime::Plan&, size_t) const { return {}; }

std::unique_ptr<runtime::Program> Backend::lower(const runtime::Plan& plan, const runtime::CompileOptions&) const {
  return std::make_unique<Program>(plan);
}

}  // namespace
}  // namespace esg::cpu

namespace esg::runtime {

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<cpu::Backend>(); }

}  // namespace esg::cpu
