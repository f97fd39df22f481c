// How the Ascend backend runs each launch of a plan, decided in one place: a fused group as its
// generated kernel, a row normalization as a row kernel, a view op as a device copy, any other
// op through CANN's operator library (aclnn), a collective through HCCL; else nothing, and why. The device program builds
// from it, and the backend's refusals and host fallback come from it.
#pragma once
#include <string>

#include "ascend/kernel_source.hpp"
#include "runtime/plan.hpp"

namespace esg::ascend {

struct LaunchLowering {
  enum Kind : uint8_t { Kernel, Aclnn, Copy, Collective, None } kind = None;
  KernelSource source;  // Kernel: the generated source
  std::string what;     // None: the op, or "the group <members>", for messages
  std::string why;      // None: why no lowering covers it
};

LaunchLowering lower_launch(const runtime::Plan& plan, size_t index);

// What the device lowers, for the message that refuses the rest.
std::string lowered_ops();

}  // namespace esg::ascend
