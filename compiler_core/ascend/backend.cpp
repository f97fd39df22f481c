#include "ascend/backend.hpp"

#include <cstdint>
#include <limits>

#include "ascend/device_program.hpp"
#include "ascend/kernel_source.hpp"
#include "ascend/launch_lowering.hpp"
#include "ascend/legalize.hpp"

namespace esg::ascend {

std::vector<runtime::BackendOption> Backend::options() const {
  return {{"device", 0, std::numeric_limits<int32_t>::max(), 0, "the device id"},
          {"ai_cores", 0, 65535, 0, "blocks per kernel at most; 0: the device's AI cores"},
          {"host_fallback", 0, 1, 0, "ops with no device lowering run on the host (else the compile refuses them)"}};
}

std::unique_ptr<ir::Graph> Backend::legalize(const ir::Graph& g) const { return ascend::legalize(g); }

runtime::GroupingRules Backend::grouping(const runtime::CompileOptions& options) const {
  runtime::GroupingRules rules;
  rules.kernel_takes = kernel_computes;
  rules.single_ops = true;
  rules.max_ops = options.fusion ? runtime::kMaxGroupOps : 1;
  return rules;
}

std::string Backend::cannot_run(const runtime::Plan& plan, size_t index) const {
  const LaunchLowering l = lower_launch(plan, index);
  return l.kind == LaunchLowering::None ? l.what + ": " + l.why : std::string();
}

std::unique_ptr<runtime::Program> Backend::lower(const runtime::Plan& plan, const runtime::CompileOptions& options) const {
  const std::vector<runtime::BackendOption> declared = this->options();
  DeviceOptions d;
  d.simulated = simulated_;
  d.device = static_cast<int>(options.backend_options.get("device", declared));
  d.ai_cores = static_cast<int>(options.backend_options.get("ai_cores", declared));
  d.host_fallback = options.backend_options.get("host_fallback", declared) != 0;
  // Called while the device program is built, never later: the references hold.
  const HostProgram host = [&] {
    runtime::CompileOptions h = options;
    h.backend = &host_;
    h.backend_options = {};
    return host_.lower(plan, h);
  };
  return std::make_unique<DeviceProgram>(plan, d, host);
}

}  // namespace esg::ascend
