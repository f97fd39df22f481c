#include "cpu/backend.hpp"

#include "cpu/fast_kernels.hpp"
#include "cpu/fused_kernel.hpp"
#include "cpu/program.hpp"
#include "ir/error.hpp"
#include "runtime/plan.hpp"

namespace esg::cpu {

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

}  // namespace esg::cpu
