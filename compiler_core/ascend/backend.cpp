// Ascend NPUs through AscendCL as a backend, on a real device ("ascend") or on the simulated
// one ("ascend-sim": the same code against a stand-in AscendCL). Its legalizations are
// legalize.hpp; it groups every elementwise op its generated kernels compute (single ones too)
// and runs matmuls and convolutions on CANN's library, so no group takes a head; each launch's
// lowering is launch_lowering.hpp; the program is device_program.hpp. Launches with no device
// lowering run on the host backend when the option host_fallback is set.
#include "ascend/factory.hpp"

#include <cstdint>
#include <limits>

#include "ascend/device_program.hpp"
#include "ascend/kernel_build.hpp"
#include "ascend/kernel_source.hpp"
#include "ascend/launch_lowering.hpp"
#include "ascend/legalize.hpp"
#include "runtime/compile_cache.hpp"

namespace esg::ascend {
namespace {

class Backend final : public runtime::Backend {
 public:
  // `host` runs what the device cannot (host_fallback); it outlives this backend.
  Backend(bool simulated, const runtime::HostBackend& host) : simulated_(simulated), host_(host) {}
  const char* name() const override { return simulated_ ? "ascend-sim" : "ascend"; }
  std::vector<runtime::BackendOption> options() const override;
  std::unique_ptr<ir::Graph> legalize(const ir::Graph& g) const override;
  runtime::GroupingRules grouping(const runtime::CompileOptions& options) const override;
  void check(const runtime::CompileOptions& options) const override;
  std::string cannot_run(const runtime::Plan& plan, size_t index) const override;
  int64_t buffer_slack() const override { return kSegmentSlack; }
  std::unique_ptr<runtime::Program> lower(const runtime::Plan& plan, const runtime::CompileOptions& options,
                                          const runtime::Program* donor, const runtime::Artifacts* loaded) const override;
  // The core version its generated kernels are built for (ESG_ASCEND_ARCH): the SoC a loaded
  // model's kernels run on is checked against it where the device opens.
  std::string target(const runtime::CompileOptions&) const override { return "ascend " + kernel_arch(); }
  std::string cannot_run_target(const std::string& target) const override {
    const std::string here = "ascend " + kernel_arch();
    return target == here ? "" : "the model's kernels were built for " + target + "; this process builds for " + here +
                                     " (ESG_ASCEND_ARCH), which the device's SoC was chosen for";
  }

 private:
  bool simulated_;
  const runtime::HostBackend& host_;
};

std::vector<runtime::BackendOption> Backend::options() const {
  return {{"device", 0, std::numeric_limits<int32_t>::max(), 0, "the device id"},
          {"ai_cores", 0, 65535, 0, "blocks per kernel at most; 0: the device's vector cores"},
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

void Backend::check(const runtime::CompileOptions& options) const {
  if (options.precision != runtime::Precision::F32)
    throw ir::Error(ir::ErrorCode::Unsupported, std::string("compile: backend '") + name() +
                                                    "' computes in the graph's dtypes; precision 'bf16' is the CPU's");
}

std::string Backend::cannot_run(const runtime::Plan& plan, size_t index) const {
  const LaunchLowering l = lower_launch(plan, index);
  return l.kind == LaunchLowering::None ? l.what + ": " + l.why : std::string();
}

std::unique_ptr<runtime::Program> Backend::lower(const runtime::Plan& plan, const runtime::CompileOptions& options,
                                                 const runtime::Program* donor, const runtime::Artifacts* loaded) const {
  const std::vector<runtime::BackendOption> declared = this->options();
  DeviceOptions d;
  d.simulated = simulated_;
  d.device = static_cast<int>(options.backend_options.get("device", declared));
  d.ai_cores = static_cast<int>(options.backend_options.get("ai_cores", declared));
  d.host_fallback = options.backend_options.get("host_fallback", declared) != 0;
  d.max_memory_bytes = options.max_memory_bytes;
  d.kernel_cache = kernel_cache_dir(runtime::cache_dir(options));
  // Called while the device program is built, never later: the references hold.
  const HostProgram host = [&] {
    runtime::CompileOptions h = options;
    h.backend = &host_;
    h.backend_options = {};
    return host_.lower_for_host(plan, h);
  };
  return std::make_unique<DeviceProgram>(plan, d, host, dynamic_cast<const DeviceProgram*>(donor), loaded);
}

}  // namespace

std::unique_ptr<runtime::Backend> make_backend(bool simulated, const runtime::HostBackend& host) {
  return std::make_unique<Backend>(simulated, host);
}

}  // namespace esg::ascend
