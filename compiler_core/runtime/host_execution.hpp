// Host execution: what a device backend's host fallback asks of the host backend (the CPU), a
// plan's single launch run on host tensors apart from the rest of its launch list. Its own
// interface, beside Program and Backend, so that only a backend that can do it offers it.
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

#include "eval/host_tensor.hpp"
#include "eval/run_control.hpp"
#include "runtime/backend.hpp"

namespace esg::runtime {

class HostLaunches {
 public:
  virtual ~HostLaunches() = default;
  // Runs the plan's launch `index` alone on host tensors given in the launch's operand order.
  virtual void run_launch(size_t index, const std::vector<const eval::TensorRef*>& in,
                          const std::vector<const eval::TensorRef*>& out, const eval::RunControl& control) const = 0;
};

// A backend whose programs run on the host, which can lower a plan for another backend's
// launches to run one by one.
class HostBackend : public Backend {
 public:
  virtual std::unique_ptr<HostLaunches> lower_for_host(const Plan& plan, const CompileOptions& options) const = 0;
};

}  // namespace esg::runtime
