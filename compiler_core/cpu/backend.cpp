#include "cpu/backend.hpp"

#include "cpu/fused_kernel.hpp"
#include "cpu/program.hpp"

namespace esg::cpu {

std::unique_ptr<ir::Graph> Backend::legalize(const ir::Graph&) const { return nullptr; }

runtime::GroupingRules Backend::grouping(const runtime::CompileOptions&) const { return grouping_rules(); }

std::string Backend::cannot_run(const runtime::Plan&, size_t) const { return {}; }

std::unique_ptr<runtime::Program> Backend::lower(const runtime::Plan& plan, const runtime::CompileOptions&) const {
  return std::make_unique<Program>(plan);
}

}  // namespace esg::cpu
