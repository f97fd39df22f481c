// Graph-to-graph passes, each a rebuild through the builder (ir/replay.hpp), so every result
// is checked and re-inferred like a freshly built graph. They work on the graph's top level;
// bodies of control flow are copied as they are. These are the target-independent ones; the
// rewrites a backend needs for its own kernels live with it (ascend/legalize.hpp).
#pragma once
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
// `max_elements` per output; data movement at any size no larger than its largest input) with
// the reference kernels, replacing them by constants.
std::unique_ptr<ir::Graph> fold_constants(const ir::Graph& g, int64_t max_elements = int64_t{1} << 16);
// ONNX's QDQ form as quantized ops: dequantize_linear → conv2d (→ relu or clip) → quantize_linear with
// one scale and zero point for the images and the result, constant integer filters (one scale
// and zero point, or one per output channel) and a constant bias, the convolution and clip
// read only there, becomes one quantized_conv2d (the bias as int32 sums); quantize(max_pool2d(
// dequantize(x))) with the same scale and zero point on both sides, the pool of x. Then every
// dequantize_linear of constants left is folded.
std::unique_ptr<ir::Graph> recognize_quantized_ops(const ir::Graph& g);
// x*1, 1*x, x/1, x+0, 0+x, x-0 (when the result is x's shape and dtype), casts to the same
// dtype, cast chains through a lossless dtype, transpose chains (to one, or none), reshape
// chains (to one, or none), transposes into matmul's flags, transposes of size-1 axes as
// reshapes, a channel shuffle (reshape, transpose, reshape) and its channel slices as gathers
// of the channels; an elementwise op's constants of lower rank than its result at its rank.
std::unique_ptr<ir::Graph> simplify(const ir::Graph& g);

// conv2d(x, W, b) followed by + c, - c, * c or / c with c a constant per output channel (or a
// scalar), W and b constants and the convolution read only there: one conv2d with W and b
// rescaled and shifted (a batch norm after a convolution disappears into it). f32 only.
std::unique_ptr<ir::Graph> fold_affine_into_conv(const ir::Graph& g);

// What exporters decompose, as esgraph's own ops: (x - mean(x)) / sqrt(mean((x - mean(x))^2) +
// eps) with the means over the same trailing axes becomes one layer_norm (its scale and shift
// stay elementwise ops, which fuse with what follows); x · sigmoid(x) one silu; x · (erf(x / √2)
// + 1) · 0.5 one gelu; attention's softmax(scores / c + mask) (or · c, the mask optional, or
// the scale on the product's first operand) one softmax with its scale and mask. Each runs as one kernel (or post-op) that rounds once.
std::unique_ptr<ir::Graph> recognize_exported_ops(const ir::Graph& g);

// matmul(softmax(matmul(q, k) · scale + mask), v), the softmax and scores read only there, as
// one `attention` op over q, k and v with their head-splitting views undone (simplify, run
// after, cancels those against the exporter's chains): the heads are read in place and the
// scores never exist whole. Static, non-empty shapes of rank 3 or 4 with one batch.
std::unique_ptr<ir::Graph> recognize_attention(const ir::Graph& g);
// Each `attention` op as the reshapes, transposes, products and softmax it stands for: for a
// backend without an attention kernel.
std::unique_ptr<ir::Graph> decompose_attention(const ir::Graph& g);

// The pipeline: simplify, fold, recognize quantized ops, exported ops and attention, simplify the views that
// left, affine into convolutions, CSE, DCE; each step's node counts and time go to `log`.
std::unique_ptr<ir::Graph> optimize(const ir::Graph& g, bool verify, std::vector<std::string>* log);

}  // namespace esg::passes
