// f32 elementwise kernels of the CPU backend: each op's YAML compute expression in f32 over
// contiguous rows (generated: elementwise_f32.gen.cpp), the operand layouts they serve, and the
// unfused kernel built on them. The fused kernels (cpu/fused_kernel) call the same rows, so a
// value computes alike fused and unfused.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>

#include "cpu/split.hpp"
#include "eval/kernels.hpp"
#include "ir/graph.hpp"

namespace esg::cpu {

// out[e] = op(rows[0][e], rows[1][e], …) for e < n; `out` overlaps no row. Results of
// comparisons and logic are 0 or 1.
using RowF32 = void (*)(const float* const* rows, const float* attr, float* out, int64_t n);

// Scalar multiply-adds around an op, each rounded as a separate mul and add would be: the
// operand (of one-input ops) as x·in_scale + in_shift, the result as y·out_scale + out_shift.
// Scale 1 and shift -0 change no value (x + -0 is x for every x, zeros included).
struct Affine {
  float in_scale = 1.0f, in_shift = -0.0f, out_scale = 1.0f, out_shift = -0.0f;
};
using RowAffineF32 = void (*)(const float* const* rows, const float* attr, const Affine& affine, float* out, int64_t n);

struct ElementwiseF32 {
  const ir::OpSchema* op;
  RowF32 row;
  RowAffineF32 row_affine;  // the same with an Affine: what fusion folds scalar mul/add/sub into
  eval::Kernel kernel;      // the op unfused: run_elementwise_f32<row>
};

// The f32 functions of `op`, or nullptr if it is not elementwise.
const ElementwiseF32* find_elementwise_f32(const ir::OpSchema& op);

// Operands per elementwise op at most (quantized_add has eight); what the kernels keep on the
// stack.
constexpr size_t kMaxOperands = 8;
// Elements per row call: 8 KiB of each operand, so that a row's operands and result stay in L1
// for the one or two operands most ops have. With 512, the calls of a fused chain's rows cost
// more than their arithmetic: a chain of 4 simple ops over 393K floats took 111 us, now 79.
constexpr int64_t kChunk = 2048;

// How an operand is read over the output's elements, chunk by chunk: chunks never cross a
// multiple of the run length (plan_operands), and within one every operand is contiguous in
// memory, a single element, or a short contiguous stretch repeated.
enum class Access : uint8_t {
  Direct,      // the output's own shape: element e at e
  Scalar,      // one element in all: a row filled once per run of the kernel
  Contiguous,  // broadcast along outer axes only over a run: elements from offset(base) on
  Repeated,    // broadcast along the inner axes of a run: element offset(base), repeated
  // Contiguous along the innermost axes (`period` elements) and broadcast along the ones
  // outside them, over a run: the stretch repeated. A per-channel value beside blocked
  // channels ([N, C/16, 1, 16] against [N, C/16, H·W, 16]): its 16 lanes, H·W times.
  Periodic,
};
struct OperandLayout {
  Access access;
  int64_t stride[ir::kMaxRank];  // per output axis, 0 where broadcast
  int64_t period = 0;            // Periodic: the stretch's elements
};
// The layouts of `count` operands against the output shape; returns the run length (>= 1).
int64_t plan_operands(const ir::Shape& out, const ir::Shape* const* in, size_t count, OperandLayout* layout);

// fn(base, n) over [begin, end) in chunks of at most kChunk elements, none crossing a multiple
// of `run` (plan_operands' result).
template <class Fn>
void for_each_chunk(int64_t begin, int64_t end, int64_t run, Fn fn) {
  for (int64_t base = begin; base < end;) {
    const int64_t n = std::min({kChunk, end - base, run - base % run});
    fn(base, n);
    base += n;
  }
}

// piece(begin, end) over the elements [0, total), split as cpu/split.hpp does, at multiples of
// kChunk.
template <class Piece>
void split_elements(int64_t total, const eval::Parallel* parallel, Piece&& piece) {
  split_work((total + kChunk - 1) / kChunk, kChunk, parallel,
             [&](int64_t begin, int64_t end) { piece(begin * kChunk, std::min(total, end * kChunk)); });
}

// The dtypes f32 rows read and write: f32, bool as 0 or 1, and 8-bit integers, every one of
// which f32 holds exactly (quantized activations). A cast to f32 reads int32 too
// (elementwise_f32_kernel).
inline bool f32_row_dtype(ir::DType t) {
  return t == ir::DType::F32 || t == ir::DType::Bool || t == ir::DType::U8 || t == ir::DType::I8;
}
// A row of results as a `dtype` tensor would hold them, in place: an 8-bit integer result
// truncated toward zero and saturated (NaN to 0), as eval::store_f converts; others unchanged.
void narrow_row(float* row, ir::DType dtype, int64_t n);
// Fills a Scalar operand's row (kChunk floats) once per run of a kernel.
void prepare_row(const eval::TensorRef& t, const OperandLayout& l, float* own);
// An operand's row for the chunk of output elements [base, base + n): in place for f32 read
// directly or contiguously, else converted or repeated into `own` (kChunk floats).
const float* chunk_row(const eval::TensorRef& t, const OperandLayout& l, const ir::Shape& out, int64_t base, int64_t n,
                       float* own);
// A row into elements [at, at + n) of a tensor of an f32 row dtype, converted as narrow_row.
void store_row(const float* row, const eval::TensorRef& t, int64_t at, int64_t n);

// The f32 kernel for this node, or nullptr: an elementwise op whose inputs and result are of f32
// row dtypes, with an 8-bit integer result only where the op converts a real into it
// (quantize_linear, cast from f32): integer arithmetic wraps around, which f32 rows would not.
// Fusion groups exactly the ops it serves.
eval::Kernel elementwise_f32_kernel(const ir::Graph& g, const ir::Node& n);

// The unfused kernel: chunks of rows, single-element operands splatted once per call.
void run_rows_f32(RowF32 row, const eval::KernelCall& c);
template <RowF32 row>
void run_elementwise_f32(const eval::KernelCall& c) { run_rows_f32(row, c); }

}  // namespace esg::cpu
