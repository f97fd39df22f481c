// A product with constant weights on oneDNN's matmul primitive or on our packed GEMM: matmul
// node `n` whose A is f32 [..., M, K] (its leading axes taken as more rows) and whose B is a
// constant f32 [K, N] ([N, K] with transpose_b), A not transposed. The weights are reordered
// once, when the plan is lowered, into the blocked layout oneDNN's kernel for this CPU wants
// (brgemm's; shared by the product's primitives at other sizes, a symbolic plan's bindings),
// instead of being packed again by every sgemm call. Where oneDNN's kernel wants a plain matrix
// (its gemm, without AVX-512), which it packs again at every call, calls of a few rows (a
// recurrent layer's steps) run on our packed GEMM (packed_gemm.hpp) over weights packed once;
// calls of more rows, or of one, read the constant where it lies: no second copy of the
// weights, and the program makes few calls of many rows. A primitive is made for each count
// of rows the program asks for (a fused head's block of rows and its last block; a plain
// launch's share of rows per thread), each run on one thread (cpu/primitive_runner.hpp). One
// block of few rows (a recurrent layer's step, a decoder's token) may split its columns into
// shares over the pool instead. With bf16, A's rows and the weights are rounded to bfloat16 and
// the products summed in f32 (always oneDNN's).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "cpu/packed_weights.hpp"
#include "eval/kernels.hpp"
#include "ir/graph.hpp"

namespace esg::cpu {

class MatmulPrimitive {
 public:
  // For `n` as above, with primitives for each of `row_counts` (positive), the result's columns
  // in `column_shares` shares of whole 16-column blocks (1: not split); nullptr, with the reason
  // in `why_not`, when `n` is not such a product or oneDNN has no optimized kernel. `like`: the
  // same product's primitive at other sizes (another binding of a symbolic plan), whose
  // reordered weights these share when the columns split the same way. The constant weights are
  // reordered through `pack`, one call per share of columns.
  static std::unique_ptr<MatmulPrimitive> make(const ir::Graph& g, const ir::Node& n, std::vector<int64_t> row_counts,
                                               int column_shares, bool bf16, const PackWeights& pack, std::string& why_not,
                                               const MatmulPrimitive* like = nullptr);
  // Whether `n` is a product make takes (f32, B a 2-D constant, A not transposed).
  static bool takes(const ir::Graph& g, const ir::Node& n);
  // Whether make's primitive for `n` at more than kPackedGemmRows rows a call packs the weights
  // again at each call (oneDNN's gemm): few calls of many rows then cost less than many small.
  static bool packs_at_every_call(const ir::Graph& g, const ir::Node& n, bool bf16);
  ~MatmulPrimitive();
  MatmulPrimitive(const MatmulPrimitive&) = delete;
  MatmulPrimitive& operator=(const MatmulPrimitive&) = delete;

  // Rows [first, last) of A·B into `out` (N floats a row), the column shares over `parallel`
  // (null: one after the other on the calling thread); last - first is one of the row counts
  // made. `a` is A's first element.
  void rows(const float* a, int64_t first, int64_t last, float* out, const eval::Parallel* parallel) const;
  int column_shares() const;  // the shares one call spreads over the pool: of columns, or of K for one row
  int weights_in_place() const;  // shares of columns whose kernel reads the constant itself
  const std::string& implementation() const;  // the kernel's name: oneDNN's ("brg:avx512_core", ...), "packed:avx2" or "row:avx2"
  // oneDNN's primitives, or one of our kernels: the packed GEMM (packed_gemm.hpp), or for one
  // row a call the product reading the constant in place (row_product.hpp).
  enum class Kernel { onednn, packed_gemm, row_product };
  Kernel kernel() const;
  bool bf16() const;

 private:
  struct Impl;
  explicit MatmulPrimitive(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The most rows a call runs on our packed GEMM (where oneDNN packs at every call): from 2 to 32
// rows it took 0.23-0.95x oneDNN's gemm's time on a Zen 3, at 64 and more 0.94-1.11x, and at one
// row 0.9x, not worth a second copy of a decoder's weights (bench/RESULTS.md): one row runs on
// cpu/row_product, in place.
constexpr int64_t kPackedGemmRows = 32;

// The row counts of `rows` rows split into `pieces` (at most `rows`) nearly equal shares.
std::vector<int64_t> share_counts(int64_t rows, int64_t pieces);

}  // namespace esg::cpu
