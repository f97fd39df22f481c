// f32 conv2d for the CPU backend: the unfused kernel, and the images-at-a-time entry a fused
// group calls when the convolution heads it (its epilogue: bias, activation, residual add, run
// on each image's output while it is still in cache).
#pragma once
#include <cstdint>

#include "eval/host_tensor.hpp"
#include "ir/graph.hpp"

namespace esg::cpu {

// The node's attributes, bound once.
struct ConvParams {
  int64_t stride_h, stride_w, pad_top, pad_left, pad_bottom, pad_right, dilation_h, dilation_w, groups;
};
ConvParams conv_params(const ir::Graph& g, const ir::Node& n);

// Whether the f32 kernel serves this node (f32 operands and result).
bool is_conv2d_f32(const ir::Graph& g, const ir::Node& n);

// conv2d(x, w, bias) of images [first, last) into `out`, those images' results one after the
// other ([last - first, O, OH, OW]); `out_shape` is the whole result's. `threads` for the GEMMs.
void conv2d_images(const ConvParams& a, const eval::TensorRef& x, const eval::TensorRef& w, const eval::TensorRef* bias,
                   const ir::Shape& out_shape, int64_t first, int64_t last, float* out, int threads);

}  // namespace esg::cpu
