// Graph-to-graph passes, each a rebuild through the builder (ir/replay.hpp), so every result
// is checked and re-inferred like a freshly built graph. They work on the graph's top level;
// bodies of control flow are copied as they are.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.hpp"

namespace esg::passes {

// Drops nodes nothing the outputs need depends on.
std::unique_ptr<ir::Graph> eliminate_dead_code(const ir::Graph& g);
// Merges nodes with the same op, inputs and attributes (equal constants too).
std::unique_ptr<ir::Graph> eliminate_common_subexpressions(const ir::Graph& g);
// Computes nodes whose inputs are all constants (generators with no inputs too; up to
// `max_elements` per output) with the reference kernels, replacing them by constants.
std::unique_ptr<ir::Graph> fold_constants(const ir::Graph& g, int64_t max_elements = int64_t{1} << 16);
// x*1, 1*x, x/1, x+0, 0+x, x-0 (when the result is x's shape and dtype), casts to the same
// dtype, cast chains through a lossless dtype, transpose chains (to one, or none), reshape
// chains (to one, or none).
std::unique_ptr<ir::Graph> simplify(const ir::Graph& g);

// conv2d(x, W, b) followed by + c, - c, * c or / c with c a constant per output channel (or a
// scalar), W and b constants and the convolution read only there: one conv2d with W and b
// rescaled and shifted (a batch norm after a convolution disappears into it). f32 only.
std::unique_ptr<ir::Graph> fold_affine_into_conv(const ir::Graph& g);

// Each output of a split as a slice of its input (for a backend that slices but does not split).
std::unique_ptr<ir::Graph> split_into_slices(const ir::Graph& g);

// softmax(x, mask, scale) with a scale or a mask: softmax(x * scale + mask), plain, after two
// elementwise ops (for a backend whose softmax has neither; they fuse with the ops before), but
// for the softmaxes `keep` picks (which the backend computes whole).
std::unique_ptr<ir::Graph> split_scaled_softmax(const ir::Graph& g,
                                                const std::function<bool(const ir::Graph&, const ir::Node&)>& keep = nullptr);

// conv2d with more padding on one side than the other: an explicit zero pad of the image by the
// difference, then the convolution with the padding both sides share (for a backend whose
// convolution pads both sides alike).
std::unique_ptr<ir::Graph> pad_asymmetric_convolutions(const ir::Graph& g);

// avg_pool2d with padding that `takes` refuses (more on one side, say): an explicit zero pad,
// the pool without padding, and a per-position factor window area / the window's elements inside
// the input, so the mean still counts only those (for a backend whose pool pads both sides alike).
// Left as is where a ceil-mode window would reach past the padded input.
std::unique_ptr<ir::Graph> pad_average_pools(const ir::Graph& g, const std::function<bool(const ir::Graph&, const ir::Node&)>& takes);

// reduce_prod over several but not all axes as one product per axis (keeping it), then a reshape
// if the axes go: for a backend whose product reduces one axis or all.
std::unique_ptr<ir::Graph> split_products_over_axes(const ir::Graph& g);

// Negative indices (counted from the end of their axis) of gather, scatter_elements and
// scatter_nd made non-negative: constant indices rewritten, others through
// where(i < 0, i + dim, i) (for a backend whose ops take indices in [0, dim) only).
std::unique_ptr<ir::Graph> wrap_negative_indices(const ir::Graph& g);

// Operands of the elementwise ops `computes` picks (those the backend's kernels run) broadcast
// in a way `reads(operand shape, its dtype, result shape)` refuses get an explicit expand to the
// result's shape first: for a backend whose kernels read only some broadcasts in place (the rest
// then run as the backend's expand, one pass over memory).
std::unique_ptr<ir::Graph> materialize_broadcasts(const ir::Graph& g, const std::function<bool(const ir::Graph&, const ir::Node&)>& computes,
                                                  const std::function<bool(const ir::Shape&, ir::DType, const ir::Shape&)>& reads);

// The pipeline: simplify, fold, affine into convolutions, CSE, DCE; each step's node counts
// and time go to `log`.
std::unique_ptr<ir::Graph> optimize(const ir::Graph& g, bool verify, std::vector<std::string>* log);

}  // namespace esg::passes
