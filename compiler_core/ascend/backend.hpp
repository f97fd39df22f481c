// Ascend NPUs through AscendCL as a backend, on a real device ("ascend") or on the simulated
// one ("ascend-sim": the same code against a stand-in AscendCL). Its legalizations are
// legalize.hpp; it groups every elementwise op its generated kernels compute (single ones too)
// and runs matmuls and convolutions on CANN's library, so no group takes a head; each launch's
// lowering is launch_lowering.hpp; the program is device_program.hpp. Launches with no device
// lowering run on the host backend when the option host_fallback is set.
#pragma once
#include "runtime/backend.hpp"

namespace esg::ascend {

class Backend final : public runtime::Backend {
 public:
  // `host` runs what the device cannot (host_fallback); it outlives this backend.
  Backend(bool simulated, const runtime::Backend& host) : simulated_(simulated), host_(host) {}
  const char* name() const override { return simulated_ ? "ascend-sim" : "ascend"; }
  std::vector<runtime::BackendOption> options() const override;
  std::unique_ptr<ir::Graph> legalize(const ir::Graph& g) const override;
  runtime::GroupingRules grouping(const runtime::CompileOptions& options) const override;
  std::string cannot_run(const runtime::Plan& plan, size_t index) const override;
  std::unique_ptr<runtime::Program> lower(const runtime::Plan& plan, const runtime::CompileOptions& options) const override;

 private:
  bool simulated_;
  const runtime::Backend& host_;
};

}  // namespace esg::ascend
