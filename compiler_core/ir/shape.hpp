// Shapes: up to kMaxRank dimensions, each a size (>= 0) or a symbolic dimension (< 0), stored
// inline so that creating a value allocates nothing.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>

namespace esg::ir {

using Dim = int64_t;
constexpr int kMaxRank = 8;
// The most elements a tensor may have, 2^48 (2.8e14, over a petabyte of f32): every element count
// and byte size of a valid shape then stays far inside int64, so no product of sizes overflows.
// The builder refuses a shape beyond it, whether written, inferred or bound at run time.
constexpr int64_t kMaxElements = int64_t{1} << 48;

// Symbol k of a graph's symbol table is the dimension kSymbolBase + k: negative, and far from
// small negative numbers, so that a stray -1 is an error rather than some symbol.
constexpr Dim kSymbolBase = -(Dim{1} << 62);
constexpr bool dim_is_symbolic(Dim d) { return d < 0; }
constexpr Dim symbol_dim(uint32_t symbol) { return kSymbolBase + static_cast<Dim>(symbol); }
// The symbol index of a symbolic dimension; UINT32_MAX for a negative number that is none.
constexpr uint32_t dim_symbol(Dim d) {
  return d >= kSymbolBase && d < kSymbolBase + (Dim{1} << 32) ? static_cast<uint32_t>(d - kSymbolBase) : UINT32_MAX;
}

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<Dim> dims);
  static Shape from(const Dim* dims, size_t rank);  // throws ir::Error beyond kMaxRank

  size_t rank() const { return rank_; }
  Dim operator[](size_t i) const { return dims_[i]; }
  Dim& operator[](size_t i) { return dims_[i]; }
  const Dim* begin() const { return dims_; }
  const Dim* end() const { return dims_ + rank_; }
  void push_back(Dim d);  // throws ir::Error beyond kMaxRank
  void resize(size_t rank);
  bool is_static() const;
  int64_t num_elements() const;  // -1 if any dimension is symbolic; throws ir::Error beyond kMaxElements
  // The product of the static dimensions (symbolic ones count 1), or -1 when a dimension, or the
  // product with zeros counted as 1 (what strides reach), exceeds kMaxElements: computed without
  // overflow, for checking shapes from outside.
  int64_t static_elements() const {  // inline: every op's every output passes here
    int64_t bound = 1;
    bool empty = false;
    for (Dim d : *this) {
      if (dim_is_symbolic(d)) continue;
      empty = empty || d == 0;
      if (__builtin_mul_overflow(bound, d > 1 ? d : 1, &bound) || bound > kMaxElements) return -1;
    }
    return empty ? 0 : bound;
  }
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }

 private:
  Dim dims_[kMaxRank] = {};
  uint8_t rank_ = 0;
};

}  // namespace esg::ir
