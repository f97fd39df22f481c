// Copies of a value between memory formats (plan/format.hpp): row-major and blocked channels
// (nChw8c, nChw16c, …), either way; what the plan's reorder launches run. A blocked result's
// padding channels are written as zeros.
#pragma once
#include "eval/kernels.hpp"
#include "plan/format.hpp"

namespace esg::cpu {

// `from` and `to` hold the same logical shape and dtype, in their formats.
void reorder(const eval::TensorRef& from, plan::Format from_format, const eval::TensorRef& to, plan::Format to_format,
             const eval::Parallel* parallel);

// Zeros the padding channels of `t`, a value in blocked format `f` (none when unpadded): what a
// kernel that computed whole blocks leaves there is not the format's zeros.
void zero_padding(const eval::TensorRef& t, plan::Format f);

}  // namespace esg::cpu
