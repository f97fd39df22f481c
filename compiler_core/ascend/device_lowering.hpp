// The graph rewrites the Ascend backend needs before grouping: what its generated kernels and
// CANN's operator library cannot take as the graph states it, restated with ops they can.
#pragma once
#include <memory>

#include "ir/graph.hpp"

namespace esg::ascend {

// convolutions padded more on one side as an explicit pad and a symmetric convolution; average
// pools padded so too (or more than aclnnAvgPool2d takes) as a pad, a pool without padding and
// a factor per position that keeps the mean over the input's elements; gather's
// negative indices made non-negative (aclnnIndexSelect takes [0, dim) only); products
// over several axes one axis at a time; split as
// slices (copies of strided views); softmax with a scale or a mask that no row kernel computes
// (over another axis than the last) as its elementwise part and a plain softmax (aclnnSoftmax
// has neither);
// operands broadcast in ways the kernels do not read in place expanded first.
std::unique_ptr<ir::Graph> lower_for_device(const ir::Graph& g);

}  // namespace esg::ascend
