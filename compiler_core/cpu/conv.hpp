// f32 conv2d for the CPU backend by im2col and GEMM: the kernel for what oneDNN's convolution
// primitives (conv_primitive.hpp) do not serve, and the attributes both read.
#pragma once
#include <cstdint>

#include "eval/host_tensor.hpp"
#include "ir/graph.hpp"

namespace esg::cpu {

// A conv2d's or quantized_conv2d's attributes, bound once.
struct ConvParams {
  int64_t stride_h, stride_w, pad_top, pad_left, pad_bottom, pad_right, dilation_h, dilation_w, groups;
};
ConvParams conv_params(const ir::Graph& g, const ir::Node& n);

// Whether the f32 kernel serves this node (f32 operands and result).
bool is_conv2d_f32(const ir::Graph& g, const ir::Node& n);

}  // namespace esg::cpu
