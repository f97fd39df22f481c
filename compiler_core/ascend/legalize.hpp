// The Ascend backend's legalizations: graph rewrites, before grouping, of what its generated
// kernels and CANN's operator library (aclnn) cannot take as the graph states it into ops they
// can. They live here, not in passes/, because each exists for one of their limits; like the
// passes, each is a rebuild through the builder (ir/replay.hpp) over the graph's top level, so
// its result is checked and re-inferred like a freshly built graph.
#pragma once
#include <functional>
#include <memory>

#include "ir/graph.hpp"

namespace esg::ascend {

// All of them, in the order the backend needs: attention as its products and softmax
// (passes::decompose_attention); the quantized elementwise ops as f32 arithmetic; products of
// u8 activations shifted into int8; int8 convolutions with an f16 result and the requantization
// after it; convolutions padded more on one side as an
// explicit pad and a symmetric convolution; average pools padded so too (or more than
// aclnnAvgPool2d takes) as a pad, a pool without padding and a factor per position that keeps
// the mean over the input's elements; negative indices of gather and the scatters made
// non-negative (aclnnIndexSelect takes [0, dim) only); products over several axes one axis at
// a time; split as slices (copies of strided views); softmax with a scale or a mask that no row
// kernel computes (over another axis than the last) as its elementwise part and a plain softmax
// (aclnnSoftmax has neither); operands broadcast in ways the kernels do not read in place
// expanded first.
std::unique_ptr<ir::Graph> legalize(const ir::Graph& g);

// quantize_linear, dequantize_linear and quantized_add as the f32 arithmetic their definitions
// state, between casts from and to the 8-bit integers (aclnnCast; the arithmetic fuses into the
// generated kernels): the steps the CPU computes, a quantization saturated by a clip to
// its type's range before the cast. max_pool2d of 8-bit integers runs on f16, which holds each
// exactly (aclnnMaxPool takes f16 and f32 on Atlas A2).
std::unique_ptr<ir::Graph> quantized_as_floats(const ir::Graph& g);

// matmul_integer and quantized_conv2d of u8 activations with one zero point (a constant one
// for convolutions), and constant int8 weights with zero ones, as products of int8 activations
// (CANN's quantized products take no UINT8 and no activation offset): (a - zp) · w =
// (a - 128) · w + (128 - zp) · the sums of w's columns (of each filter, joining the bias), the
// shift into int8 one kernel between casts, the sums folded now. A convolution's image is first
// padded with its zero point explicitly, so every window sums whole values.
std::unique_ptr<ir::Graph> signed_activations(const ir::Graph& g);

// quantized_conv2d with an 8-bit result that `takes` admits (aclnnQuantConvolution's rules but
// the result's type) as the same convolution with an f16 result in the output's units, zero
// point added (CANN's gives FLOAT16, never a requantized INT8), then the rest of the
// requantization: round half to even, clamp to the quantized bounds, cast to the 8-bit type. The
// f16 holds the integers up to 2048 exactly; at ties it may round one step away from the CPU's.
std::unique_ptr<ir::Graph> requantize_after_convolutions(const ir::Graph& g,
                                                         const std::function<bool(const ir::Graph&, const ir::Node&)>& takes);

// Each output of a split as a slice of its input (aclnn has no split; a slice is a copy of a
// strided view).
std::unique_ptr<ir::Graph> split_into_slices(const ir::Graph& g);

// softmax(x, mask, scale) with a scale or a mask: softmax(x * scale + mask), plain, after two
// elementwise ops (aclnnSoftmax has neither; they fuse with the ops before), but for the
// softmaxes `keep` picks (those a row kernel computes whole).
std::unique_ptr<ir::Graph> split_scaled_softmax(const ir::Graph& g,
                                                const std::function<bool(const ir::Graph&, const ir::Node&)>& keep = nullptr);

// conv2d with more padding on one side than the other: an explicit zero pad of the image by the
// difference, then the convolution with the padding both sides share (aclnnConvolution pads
// both sides alike).
std::unique_ptr<ir::Graph> pad_asymmetric_convolutions(const ir::Graph& g);

// avg_pool2d with padding that `takes` refuses (more on one side, say): an explicit zero pad,
// the pool without padding, and a per-position factor window area / the window's elements inside
// the input, so the mean still counts only those (aclnnAvgPool2d pads both sides alike, by at
// most half the window). Left as is where a ceil-mode window would reach past the padded input.
std::unique_ptr<ir::Graph> pad_average_pools(const ir::Graph& g, const std::function<bool(const ir::Graph&, const ir::Node&)>& takes);

// reduce_prod over several but not all axes as one product per axis (keeping it), then a reshape
// if the axes go: aclnnProdDim reduces one axis, aclnnProd all.
std::unique_ptr<ir::Graph> split_products_over_axes(const ir::Graph& g);

// Negative indices (counted from the end of their axis) of gather, scatter_elements and
// scatter_nd made non-negative: constant indices rewritten, others through
// where(i < 0, i + dim, i) (the aclnn ops that read them take indices in [0, dim) only).
std::unique_ptr<ir::Graph> wrap_negative_indices(const ir::Graph& g);

// Operands of the elementwise ops `computes` picks (those the generated kernels run) broadcast
// in a way `reads(operand shape, its dtype, result shape)` refuses get an explicit expand to the
// result's shape first: the kernels read only some broadcasts in place (the rest then run as
// aclnnExpand, one pass over memory).
std::unique_ptr<ir::Graph> materialize_broadcasts(const ir::Graph& g, const std::function<bool(const ir::Graph&, const ir::Node&)>& computes,
                                                  const std::function<bool(const ir::Shape&, ir::DType, const ir::Shape&)>& reads);

}  // namespace esg::ascend
