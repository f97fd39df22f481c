// Index arithmetic shared by the evaluator's kernels: row-major strides and a walk over an
// output shape that tracks the matching offset in each (broadcast) input.
#pragma once
#include <vector>

#include "ir/shape.hpp"

namespace esg::eval {

inline std::vector<int64_t> strides_of(const ir::Shape& s) {
  std::vector<int64_t> st(s.rank(), 1);
  for (size_t i = s.rank(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

// Walks `out` in row-major order; offset(k) is input k's element for the current position,
// with numpy broadcasting (inputs right-aligned, size-1 axes repeated).
class BroadcastWalk {
 public:
  BroadcastWalk(const ir::Shape& out, const std::vector<ir::Shape>& inputs) : out_(out), pos_(out.rank(), 0) {
    for (const ir::Shape& in : inputs) {
      const std::vector<int64_t> st = strides_of(in);
      std::vector<int64_t> b(out.rank(), 0);
      const size_t lead = out.rank() - in.rank();
      for (size_t i = 0; i < in.rank(); ++i) b[lead + i] = in[i] == 1 ? 0 : st[i];
      strides_.push_back(b);
      offsets_.push_back(0);
    }
  }
  int64_t offset(size_t k) const { return offsets_[k]; }
  void next() {
    for (size_t d = out_.rank(); d-- > 0;) {
      for (size_t k = 0; k < strides_.size(); ++k) offsets_[k] += strides_[k][d];
      if (++pos_[d] < out_[d]) return;
      for (size_t k = 0; k < strides_.size(); ++k) offsets_[k] -= strides_[k][d] * out_[d];
      pos_[d] = 0;
    }
  }

 private:
  ir::Shape out_;
  std::vector<int64_t> pos_;
  std::vector<std::vector<int64_t>> strides_;
  std::vector<int64_t> offsets_;
};

}  // namespace esg::eval
