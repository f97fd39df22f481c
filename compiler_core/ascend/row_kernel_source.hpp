// Ascend C source for the row normalizations (softmax with its scale and mask, log_softmax,
// layer_norm, rms_norm): a reduction over each row and the elementwise math around it in one
// kernel. Blocks take contiguous runs of rows; a row that fits enters the Unified Buffer whole
// (double-buffered TQue's, CopyIn → Compute → CopyOut), is reduced with ReduceMax/ReduceSum and
// normalized in f32 there, so it crosses global memory once each way; a longer row is read once
// per reduction pass, chunk by chunk, and once more to normalize. The row length, the row counts
// and the mask's broadcast arrive in the tiling argument: one binary per op, type and operands
// serves every shape.
#pragma once
#include <cstdint>
#include <string>

#include "ascend/kernel_common.hpp"
#include "ir/graph.hpp"

namespace esg::ascend {

// Dims of x before the row that a mask may broadcast over.
constexpr int kMaxRowLeadDims = 8;

// The tiling struct the row kernels read (uint64 words).
struct RowTiling {
  uint64_t rows = 0, rows_per_block = 0, length = 0;
  uint64_t mask_rows = 0;  // rows of the mask (0: none)
  uint64_t lead_rank = 0;  // x's dims before the row, and the mask's row stride along each (0: broadcast)
  uint64_t lead[kMaxRowLeadDims] = {};
  uint64_t mask_stride[kMaxRowLeadDims] = {};
};

// Whether `op` is one of the row normalizations.
bool is_row_op(const ir::OpSchema& op);

// "" when a generated row kernel computes `n`, else why not (an op that is not a row
// normalization, a softmax over another axis than the last, a mask broadcast along the row, …).
std::string row_kernel_refusal(const ir::Graph& g, const ir::Node& n);

// The kernel of `n` (row_kernel_refusal(g, n) must be ""): its parameters are the node's present
// inputs, its output, then the tiling struct.
KernelSource generate_row_kernel(const ir::Graph& g, const ir::Node& n);

// The tiling of `n`'s rows over at most `cores` blocks.
RowTiling row_tiling(const ir::Graph& g, const ir::Node& n, uint32_t cores, uint32_t* blocks);

}  // namespace esg::ascend
