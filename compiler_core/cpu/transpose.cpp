// transpose and expand at memory speed, any element width. Transpose: when the last axis stays last, every output
// row is one contiguous run of the input: one memcpy a row. When it moves, the output's last
// axis and the output axis the input's last axis became form a 2-D transpose per index of the
// other axes, done in 16×16 tiles so that both sides are read and written a cache line at a
// time (the reference kernel copies element by element through an odometer there). Rows or
// tile rows spread over the model's threads when large.
#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/fast_kernels.hpp"
#include "cpu/split.hpp"
#include "eval/indexing.hpp"

namespace esg::cpu {
namespace {

constexpr int64_t kTile = 16;

// The output axes walked one index at a time (all but the one or two a unit covers), with the
// stride of each on both sides, and the offsets of their index number `u` in each.
struct Outer {
  std::vector<int64_t> dims, in_strides, out_strides;
  void offsets(int64_t u, int64_t* in, int64_t* out) const {
    *in = *out = 0;
    for (size_t d = dims.size(); d-- > 0;) {
      const int64_t i = u % dims[d];
      u /= dims[d];
      *in += i * in_strides[d];
      *out += i * out_strides[d];
    }
  }
  int64_t count() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
};

template <class E>
void tiles(const E* src, E* dst, const Outer& outer, int64_t rows, int64_t cols, int64_t src_col_stride, int64_t dst_row_stride,
           int64_t first, int64_t last) {
  const int64_t blocks = (rows + kTile - 1) / kTile;
  for (int64_t u = first; u < last; ++u) {
    int64_t in = 0, out = 0;
    outer.offsets(u / blocks, &in, &out);
    const int64_t i0 = u % blocks * kTile, i1 = std::min(rows, i0 + kTile);
    // Output [i, j] (row i of the moved-in axis, column j of the last axis) is input i + j·stride.
    for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
      const int64_t j1 = std::min(cols, j0 + kTile);
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j) dst[out + i * dst_row_stride + j] = src[in + i + j * src_col_stride];
    }
  }
}

void transpose_any(const eval::KernelCall& c) {
  const eval::TensorRef& x = *c.in[0];
  const eval::TensorRef& y = *c.out[0];
  if (y.size() == 0) return;
  const size_t r = x.shape.rank();
  const std::vector<size_t> perm = c.attrs<ir::TransposeAttrs>().perm;
  std::vector<size_t> p(r);
  for (size_t i = 0; i < r; ++i) p[i] = perm.empty() ? r - 1 - i : perm[i];
  const std::vector<int64_t> xs = eval::strides_of(x.shape), ys = eval::strides_of(y.shape);
  const size_t w = ir::dtype_size(x.dtype), last = r - 1;
  const bool rows = p[last] == last;
  const size_t moved = static_cast<size_t>(std::find(p.begin(), p.end(), last) - p.begin());  // the output axis x's last became
  Outer outer;
  for (size_t d = 0; d < last; ++d)
    if (rows || d != moved) outer.dims.push_back(y.shape[d]), outer.in_strides.push_back(xs[p[d]]), outer.out_strides.push_back(ys[d]);
  const int64_t cols = y.shape[last];
  if (rows) {
    const size_t run = static_cast<size_t>(cols) * w;
    split_work(outer.count(), cols, c.parallel, [&](int64_t first, int64_t end) {
      for (int64_t u = first; u < end; ++u) {
        int64_t in = 0, out = 0;
        outer.offsets(u, &in, &out);
        std::memcpy(y.bytes + static_cast<size_t>(out) * w, x.bytes + static_cast<size_t>(in) * w, run);
      }
    });
    return;
  }
  const int64_t rows_moved = y.shape[moved], stride = xs[p[last]], units = outer.count() * ((rows_moved + kTile - 1) / kTile);
  split_work(units, kTile * cols, c.parallel, [&](int64_t first, int64_t end) {
    switch (w) {
      case 1: return tiles(x.data<uint8_t>(), y.data<uint8_t>(), outer, rows_moved, cols, stride, ys[moved], first, end);
      case 2: return tiles(x.data<uint16_t>(), y.data<uint16_t>(), outer, rows_moved, cols, stride, ys[moved], first, end);
      case 4: return tiles(x.data<uint32_t>(), y.data<uint32_t>(), outer, rows_moved, cols, stride, ys[moved], first, end);
      default: return tiles(x.data<uint64_t>(), y.data<uint64_t>(), outer, rows_moved, cols, stride, ys[moved], first, end);
    }
  });
}

// expand: the trailing axes the input has whole make every output row one contiguous run of
// the input, copied with one memcpy; where the input's last axis broadcasts, a row is one
// element repeated. (The reference kernel copies element by element through an odometer, which
// made a grouped-query attention's k and v, broadcast over the heads of a group, 7 ms each.)
void expand_any(const eval::KernelCall& c) {
  const eval::TensorRef& x = *c.in[0];
  const eval::TensorRef& y = *c.out[0];
  if (y.size() == 0) return;
  const size_t r = y.shape.rank(), lead = r - x.shape.rank(), w = ir::dtype_size(y.dtype);
  if (r == 0) {
    std::memcpy(y.bytes, x.bytes, w);
    return;
  }
  const std::vector<int64_t> xs = eval::strides_of(x.shape), ys = eval::strides_of(y.shape);
  auto whole = [&](size_t d) { return d >= lead && x.shape[d - lead] == y.shape[d]; };
  size_t inner = r;  // from here on, x has the axes whole
  while (inner > 0 && whole(inner - 1)) --inner;
  const bool repeat = inner == r;  // the last axis broadcasts
  const size_t walked = repeat ? r - 1 : inner;
  Outer outer;
  for (size_t d = 0; d < walked; ++d)
    outer.dims.push_back(y.shape[d]), outer.in_strides.push_back(whole(d) ? xs[d - lead] : 0), outer.out_strides.push_back(ys[d]);
  int64_t row = 1;
  for (size_t d = walked; d < r; ++d) row *= y.shape[d];
  split_work(outer.count(), row, c.parallel, [&](int64_t first, int64_t end) {
    for (int64_t u = first; u < end; ++u) {
      int64_t in = 0, out = 0;
      outer.offsets(u, &in, &out);
      uint8_t* dst = y.bytes + static_cast<size_t>(out) * w;
      const uint8_t* src = x.bytes + static_cast<size_t>(in) * w;
      if (!repeat) {
        std::memcpy(dst, src, static_cast<size_t>(row) * w);
        continue;
      }
      for (int64_t j = 0; j < row; ++j) std::memcpy(dst + static_cast<size_t>(j) * w, src, w);
    }
  });
}

}  // namespace

eval::Kernel expand_kernel(const ir::Graph&, const ir::Node& n) {
  return n.op->kind == ir::OpKind::expand ? expand_any : nullptr;
}

eval::Kernel transpose_kernel(const ir::Graph& g, const ir::Node& n) {
  if (n.op->kind != ir::OpKind::transpose) return nullptr;
  const size_t w = ir::dtype_size(g.values[n.first_output].dtype);
  return g.shape(n.first_output).rank() > 0 && (w == 1 || w == 2 || w == 4 || w == 8) ? transpose_any : nullptr;
}

}  // namespace esg::cpu
