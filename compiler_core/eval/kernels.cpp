// The evaluator's kernels for the ops that are not elementwise. Written for clarity and exact
// numpy semantics, not speed: values go through double (floats) or int64 (integers), and
// data-movement ops copy elements by index whatever their dtype.
#include "eval/kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "eval/attention_layout.hpp"
#include "eval/collective.hpp"
#include "eval/indexing.hpp"
#include "eval/quantized.hpp"
#include "eval/scalar_math.hpp"
#include "ir/error.hpp"

namespace esg::eval {
namespace {

using ir::Shape;

using K = ir::OpKind;

// Copies element `from` of `src` to element `to` of `dst` (same dtype).
void copy_elem(const TensorRef& src, int64_t from, const TensorRef& dst, int64_t to) {
  const size_t w = ir::dtype_size(src.dtype);
  std::memcpy(dst.bytes + static_cast<size_t>(to) * w, src.bytes + static_cast<size_t>(from) * w, w);
}

// The multi-index of linear position `i` in `s`.
std::vector<int64_t> unravel(int64_t i, const Shape& s) {
  std::vector<int64_t> idx(s.rank());
  for (size_t d = s.rank(); d-- > 0;) {
    idx[d] = s[d] ? i % s[d] : 0;
    i = s[d] ? i / s[d] : 0;
  }
  return idx;
}

int64_t ravel(const std::vector<int64_t>& idx, const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * strides[d];
  return off;
}

// ---- reductions --------------------------------------------------------------------------
enum class Reduce { Sum, Mean, Max, Min, Prod };

void reduce(const KernelCall& c, Reduce kind) {
  const TensorRef& x = *c.in[0];
  const TensorRef& y = *c.out[0];
  const std::vector<size_t> axes = c.attrs<ir::ReduceSumAttrs>().axes;  // every reduction's view
  std::vector<bool> reduced(x.shape.rank(), axes.empty());
  for (size_t a : axes) reduced[a] = true;
  // The output index of each input element: reduced axes dropped (or kept as size 1).
  std::vector<int64_t> out_strides(x.shape.rank(), 0);
  int64_t stride = 1;
  for (size_t d = x.shape.rank(); d-- > 0;) {
    if (reduced[d]) continue;
    out_strides[d] = stride;
    stride *= x.shape[d];
  }
  const bool floating = ir::dtype_is_float(x.dtype);
  const bool u64 = x.dtype == ir::DType::U64;  // its bits ride in int64; order and divide them unsigned
  const auto imax = [u64](int64_t a, int64_t b) {
    return u64 ? static_cast<int64_t>(std::max<uint64_t>(static_cast<uint64_t>(a), static_cast<uint64_t>(b))) : std::max(a, b);
  };
  const auto imin = [u64](int64_t a, int64_t b) {
    return u64 ? static_cast<int64_t>(std::min<uint64_t>(static_cast<uint64_t>(a), static_cast<uint64_t>(b))) : std::min(a, b);
  };
  const int64_t n_out = y.size(), n_in = x.size();
  std::vector<double> acc(static_cast<size_t>(n_out));
  std::vector<int64_t> iacc(static_cast<size_t>(n_out));
  std::vector<bool> seen(static_cast<size_t>(n_out), false);
  for (int64_t i = 0; i < n_in; ++i) {
    const size_t o = static_cast<size_t>(ravel(unravel(i, x.shape), out_strides));
    const double v = floating ? load_f(x, i) : 0;
    const int64_t w = floating ? 0 : load_i(x, i);
    if (!seen[o]) {
      seen[o] = true;
      acc[o] = v;
      iacc[o] = w;
      continue;
    }
    switch (kind) {
      case Reduce::Sum: case Reduce::Mean: acc[o] += v; iacc[o] = e_add(iacc[o], w); break;  // integers wrap around
      case Reduce::Prod: acc[o] *= v; iacc[o] = e_mul(iacc[o], w); break;
      case Reduce::Max: acc[o] = std::isnan(v) ? v : std::max(acc[o], v); iacc[o] = imax(iacc[o], w); break;
      case Reduce::Min: acc[o] = std::isnan(v) ? v : std::min(acc[o], v); iacc[o] = imin(iacc[o], w); break;
    }
  }
  const int64_t count = n_out ? n_in / n_out : 0;
  for (int64_t o = 0; o < n_out; ++o) {
    const size_t k = static_cast<size_t>(o);
    if (!seen[k]) {  // an empty reduction: the identity, as numpy gives for sum and prod
      if (kind == Reduce::Max || kind == Reduce::Min) throw ir::Error(ir::ErrorCode::Shape, "max/min of an empty axis");
      store_f(y, o, kind == Reduce::Prod ? 1.0 : kind == Reduce::Mean ? std::nan("") : 0.0);
    } else if (floating) {
      store_f(y, o, kind == Reduce::Mean ? acc[k] / static_cast<double>(count) : acc[k]);
    } else {
      const int64_t mean = u64 ? static_cast<int64_t>(static_cast<uint64_t>(iacc[k]) / static_cast<uint64_t>(count)) : iacc[k] / count;
      store_i(y, o, kind == Reduce::Mean ? mean : iacc[k]);
    }
  }
}

// The positions along `axis` of every lane: calls f(base offset, stride, length) per lane.
template <class F>
void for_each_lane(const Shape& s, size_t axis, F f) {
  // An empty tensor has no element to visit, however many empty lanes its other sizes make
  // (softmax over [2^40, 0] would otherwise walk 2^40 lanes).
  for (size_t d = 0; d < s.rank(); ++d)
    if (s[d] == 0) return;
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= s[d];
  for (size_t d = axis + 1; d < s.rank(); ++d) inner *= s[d];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) f(o * s[axis] * inner + i, inner, s[axis]);
}

void arg_reduce(const KernelCall& c, bool is_max) {
  const TensorRef& x = *c.in[0];
  const TensorRef& y = *c.out[0];
  int64_t k = 0;
  for_each_lane(x.shape, c.attrs<ir::ArgmaxAttrs>().axis, [&](int64_t base, int64_t stride, int64_t n) {
    int64_t best = 0;
    for (int64_t j = 1; j < n; ++j) {
      const double v = load_f(x, base + j * stride), b = load_f(x, base + best * stride);
      if (is_max ? v > b : v < b) best = j;
    }
    store_i(y, k++, best);
  });
}

// softmax(scale * x + mask) along `axis`; log_softmax has neither scale nor mask.
void softmax(const KernelCall& c, size_t axis, double scale, bool log) {
  const TensorRef& x = *c.in[0];
  const TensorRef& y = *c.out[0];
  const TensorRef* mask = c.in.size() > 1 ? c.in[1] : nullptr;
  std::vector<double> z(static_cast<size_t>(x.size()));
  if (mask) {
    BroadcastWalk walk(x.shape, {x.shape, mask->shape});
    for (int64_t i = 0; i < x.size(); ++i, walk.next()) z[static_cast<size_t>(i)] = scale * load_f(x, i) + load_f(*mask, walk.offset(1));
  } else {
    for (int64_t i = 0; i < x.size(); ++i) z[static_cast<size_t>(i)] = scale * load_f(x, i);
  }
  for_each_lane(x.shape, axis, [&](int64_t base, int64_t stride, int64_t n) {
    double m = -std::numeric_limits<double>::infinity(), sum = 0;
    for (int64_t j = 0; j < n; ++j) m = std::max(m, z[static_cast<size_t>(base + j * stride)]);
    for (int64_t j = 0; j < n; ++j) sum += std::exp(z[static_cast<size_t>(base + j * stride)] - m);
    for (int64_t j = 0; j < n; ++j) {
      const double v = z[static_cast<size_t>(base + j * stride)] - m;
      store_f(y, base + j * stride, log ? v - std::log(sum) : std::exp(v) / sum);
    }
  });
}

template <class A>
void norm(const KernelCall& c, bool rms) {
  const TensorRef& x = *c.in[0];
  const TensorRef& y = *c.out[0];
  const A attrs = c.attrs<A>();
  int64_t inner = 1;
  for (size_t d = attrs.axis; d < x.shape.rank(); ++d) inner *= x.shape[d];
  const double eps = attrs.epsilon;
  const TensorRef* scale = c.in.size() > 1 ? c.in[1] : nullptr;
  const TensorRef* bias = c.in.size() > 2 ? c.in[2] : nullptr;
  for (int64_t base = 0; base < x.size(); base += inner) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < inner; ++j) mean += load_f(x, base + j);
    mean = rms ? 0 : mean / static_cast<double>(inner);
    for (int64_t j = 0; j < inner; ++j) var += (load_f(x, base + j) - mean) * (load_f(x, base + j) - mean);
    const double inv = 1.0 / std::sqrt(var / static_cast<double>(inner) + eps);
    for (int64_t j = 0; j < inner; ++j) {
      double v = (load_f(x, base + j) - mean) * inv;
      if (scale) v *= load_f(*scale, j);
      if (bias) v += load_f(*bias, j);
      store_f(y, base + j, v);
    }
  }
}

// softmax(scale · q·kᵀ + mask)·v for every (batch, head, query position), in double.
void attention(const KernelCall& c) {
  const TensorRef* mask = c.in.size() > 3 ? c.in[3] : nullptr;
  const AttentionLayout l(c.attrs<ir::AttentionAttrs>(), c.in[0]->shape, c.in[1]->shape, c.in[2]->shape, mask ? &mask->shape : nullptr);
  const TensorRef &q = *c.in[0], &k = *c.in[1], &v = *c.in[2], &y = *c.out[0];
  std::vector<double> p(static_cast<size_t>(l.kv_seq)), acc(static_cast<size_t>(l.v_head_size));
  for (int64_t b = 0; b < l.batch; ++b)
    for (int64_t h = 0; h < l.heads; ++h)
      for (int64_t i = 0; i < l.q_seq; ++i) {
        const int64_t qi = l.at(l.q, b, h, i);
        double m = -std::numeric_limits<double>::infinity(), sum = 0;
        for (int64_t j = 0; j < l.kv_seq; ++j) {
          const int64_t kj = l.at(l.k, b, h, j);
          double dot = 0;
          for (int64_t d = 0; d < l.head_size; ++d) dot += load_f(q, qi + d) * load_f(k, kj + d);
          double& z = p[static_cast<size_t>(j)] = l.scale * dot;
          if (mask) z += load_f(*mask, l.mask_at(b, h, i) + j * l.mask_strides[3]);
          m = std::max(m, z);
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = 0; j < l.kv_seq; ++j) {
          const double e = std::exp(p[static_cast<size_t>(j)] - m);
          sum += e;
          for (int64_t d = 0; d < l.v_head_size; ++d) acc[static_cast<size_t>(d)] += e * load_f(v, l.at(l.v, b, h, j) + d);
        }
        // No keys: an empty softmax, and y = 0 as numpy's product with it gives.
        for (int64_t d = 0; d < l.v_head_size; ++d) store_f(y, l.at(l.y, b, h, i) + d, l.kv_seq ? acc[static_cast<size_t>(d)] / sum : 0.0);
      }
}

void matmul(const KernelCall& c) {
  const TensorRef& a = *c.in[0];
  const TensorRef& b = *c.in[1];
  const TensorRef& y = *c.out[0];
  const ir::MatmulAttrs attrs = c.attrs<ir::MatmulAttrs>();
  const bool ta = attrs.transpose_a, tb = attrs.transpose_b;
  const size_t ra = a.shape.rank(), rb = b.shape.rank(), ry = y.shape.rank();
  const int64_t m = y.shape[ry - 2], n = y.shape[ry - 1], k = a.shape[ra - (ta ? 2 : 1)];
  // Batch offsets by broadcasting the leading axes.
  const Shape batch = Shape::from(y.shape.begin(), ry - 2);
  const BroadcastWalk proto(batch, {Shape::from(a.shape.begin(), ra - 2), Shape::from(b.shape.begin(), rb - 2)});
  BroadcastWalk walk = proto;
  const bool floating = ir::dtype_is_float(y.dtype);
  const int64_t batches = batch.num_elements();
  for (int64_t bt = 0; bt < batches; ++bt, walk.next()) {
    const int64_t oa = walk.offset(0) * m * k, ob = walk.offset(1) * k * n, oy = bt * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double f = 0;
        int64_t s = 0;
        for (int64_t p = 0; p < k; ++p) {
          const int64_t ia = oa + (ta ? p * m + i : i * k + p), ib = ob + (tb ? j * k + p : p * n + j);
          if (floating) f += load_f(a, ia) * load_f(b, ib);
          else s = e_add(s, e_mul(load_i(a, ia), load_i(b, ib)));  // integers wrap around
        }
        floating ? store_f(y, oy + i * n + j, f) : store_i(y, oy + i * n + j, s);
      }
  }
}

void conv2d(const KernelCall& c) {
  const TensorRef& x = *c.in[0];
  const TensorRef& w = *c.in[1];
  const TensorRef* bias = c.in.size() > 2 ? c.in[2] : nullptr;
  const TensorRef& y = *c.out[0];
  const ir::Conv2dAttrs attrs = c.attrs<ir::Conv2dAttrs>();
  const ir::Span<int64_t> st = attrs.strides, pads = attrs.pads, dil = attrs.dilations;
  const int64_t groups = attrs.groups;
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t O = w.shape[0], CG = w.shape[1], KH = w.shape[2], KW = w.shape[3];
  const int64_t OH = y.shape[2], OW = y.shape[3], OG = O / groups;
  (void)C;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      const int64_t g = o / OG;
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = bias ? load_f(*bias, o) : 0;
          for (int64_t ci = 0; ci < CG; ++ci)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t ih = oh * st[0] - pads[0] + kh * dil[0], iw = ow * st[1] - pads[1] + kw * dil[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const int64_t cin = g * CG + ci;
                acc += load_f(x, ((n * x.shape[1] + cin) * H + ih) * W + iw) * load_f(w, ((o * CG + ci) * KH + kh) * KW + kw);
              }
          store_f(y, ((n * O + o) * OH + oh) * OW + ow, acc);
        }
    }
}

void pool2d(const KernelCall& c, bool is_max) {
  const TensorRef& x = *c.in[0];
  const TensorRef& y = *c.out[0];
  const ir::MaxPool2dAttrs attrs = c.attrs<ir::MaxPool2dAttrs>();  // both pools' view
  const ir::Span<int64_t> k = attrs.kernel, st = attrs.strides, pads = attrs.pads;
  const int64_t NC = x.shape[0] * x.shape[1], H = x.shape[2], W = x.shape[3], OH = y.shape[2], OW = y.shape[3];
  for (int64_t nc = 0; nc < NC; ++nc)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        double acc = is_max ? -std::numeric_limits<double>::infinity() : 0;
        int64_t count = 0;  // average over the window's elements inside the input (padding excluded)
        for (int64_t kh = 0; kh < k[0]; ++kh)
          for (int64_t kw = 0; kw < k[1]; ++kw) {
            const int64_t ih = oh * st[0] - pads[0] + kh, iw = ow * st[1] - pads[1] + kw;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            const double v = load_f(x, (nc * H + ih) * W + iw);
            acc = is_max ? std::max(acc, v) : acc + v;
            ++count;
          }
        store_f(y, (nc * OH + oh) * OW + ow, is_max ? acc : acc / static_cast<double>(count ? count : 1));
      }
}

// ---- data movement -----------------------------------------------------------------------
void copy_bytes(const KernelCall& c) {  // reshape, squeeze, unsqueeze (in place when they share memory)
  if (c.out[0]->bytes != c.in[0]->bytes) move_bytes(c.out[0]->bytes, c.in[0]->bytes, c.in[0]->nbytes());
}

void transpose(const KernelCall& c) {
  const TensorRef& x = *c.in[0];
  const TensorRef& y = *c.out[0];
  const size_t r = x.shape.rank();
  const std::vector<size_t> perm = c.attrs<ir::TransposeAttrs>().perm;
  std::vector<int64_t> p(r);
  for (size_t i = 0; i < r; ++i) p[i] = static_cast<int64_t>(perm.empty() ? r - 1 - i : perm[i]);
  if (y.size() == 0) return;
  const std::vector<int64_t> xs = strides_of(x.shape);
  // Walk the output in order with an odometer, keeping the source offset up to date; when the
  // last axis stays last, whole rows are contiguous on both sides and copied at once.
  const bool rows = r > 0 && p[r - 1] == static_cast<int64_t>(r - 1);
  const size_t outer = rows ? r - 1 : r;
  const size_t w = ir::dtype_size(x.dtype);
  const size_t run = rows ? static_cast<size_t>(y.shape[r - 1]) * w : w;
  std::vector<int64_t> idx(outer, 0);
  int64_t from = 0;
  uint8_t* dst = y.bytes;
  for (int64_t done = 0; done < y.size(); done += static_cast<int64_t>(run / w)) {
    std::memcpy(dst, x.bytes + static_cast<size_t>(from) * w, run);
    dst += run;
    for (size_t d = outer; d-- > 0;) {
      from += xs[static_cast<size_t>(p[d])];
      if (++idx[d] < y.shape[d]) break;
      from -= xs[static_cast<size_t>(p[d])] * y.shape[d];
      idx[d] = 0;
    }
  }
}

// concat and split move whole blocks: below the axis both sides are contiguous, so each
// outer index copies one run of prod(shape[axis:]) elements.
int64_t outer_of(const ir::Shape& s, size_t axis) {
  int64_t n = 1;
  for (size_t d = 0; d < axis; ++d) n *= s[d];
  return n;
}

size_t block_bytes(const TensorRef& t, size_t axis) {
  int64_t n = 1;
  for (size_t d = axis; d < t.shape.rank(); ++d) n *= t.shape[d];
  return static_cast<size_t>(n) * ir::dtype_size(t.dtype);
}

void concat(const KernelCall& c) {
  const TensorRef& y = *c.out[0];
  const size_t axis = c.attrs<ir::ConcatAttrs>().axis;
  const int64_t outer = outer_of(y.shape, axis);
  const size_t row = block_bytes(y, axis);
  size_t at = 0;
  for (const TensorRef* x : c.in) {
    const size_t run = block_bytes(*x, axis);
    for (int64_t o = 0; o < outer; ++o) move_bytes(y.bytes + static_cast<size_t>(o) * row + at, x->bytes + static_cast<size_t>(o) * run, run);
    at += run;
  }
}

void split(const KernelCall& c) {
  const TensorRef& x = *c.in[0];
  const size_t axis = c.attrs<ir::SplitAttrs>().axis;
  const int64_t outer = outer_of(x.shape, axis);
  const size_t row = block_bytes(x, axis);
  size_t at = 0;
  for (const TensorRef* y : c.out) {
    const size_t run = block_bytes(*y, axis);
    for (int64_t o = 0; o < outer; ++o) move_bytes(y->bytes + static_cast<size_t>(o) * run, x.bytes + static_cast<size_t>(o) * row + at, run);
    at += run;
  }
}

void slice(const KernelCall& c) {
  const TensorRef& x = *c.in[0];
  const TensorRef& y = *c.out[0];
  const size_t r = x.shape.rank();
  const ir::SliceAttrs attrs = c.attrs<ir::SliceAttrs>();
  const ir::Span<int64_t> starts = attrs.starts, steps = attrs.steps;
  std::vector<int64_t> start(r, 0), step(r, 1);
  for (size_t i = 0; i < starts.size(); ++i) {
    const size_t ax = attrs.axes.empty() ? i : attrs.axes[i];
    const int64_t d = x.shape[ax], s = steps.empty() ? 1 : steps[i];
    int64_t v = starts[i] < 0 ? starts[i] + d : starts[i];
    v = s > 0 ? std::clamp<int64_t>(v, 0, d) : std::clamp<int64_t>(v, -1, d - 1);
    start[ax] = v;
    step[ax] = s;
  }
  if (y.size() == 0) return;
  // An odometer over the output keeps the source offset; along the last axis a unit step is
  // one contiguous run on both sides.
  const std::vector<int64_t> xs = strides_of(x.shape);
  const size_t w = ir::dtype_size(x.dtype);
  const int64_t len = r ? y.shape[r - 1] : 1, last_step = r ? step[r - 1] * xs[r - 1] : 0;
  int64_t from = 0;
  for (size_t d = 0; d < r; ++d) from += start[d] * xs[d];
  std::vector<int64_t> idx(r ? r - 1 : 0, 0);
  uint8_t* dst = y.bytes;
  for (int64_t done = 0; done < y.size(); done += len) {
    if (last_step == 1) {
      std::memcpy(dst, x.bytes + static_cast<size_t>(from) * w, static_cast<size_t>(len) * w);
    } else {
      for (int64_t k = 0; k < len; ++k) std::memcpy(dst + static_cast<size_t>(k) * w, x.bytes + static_cast<size_t>(from + k * last_step) * w, w);
    }
    dst += static_cast<size_t>(len) * w;
    for (size_t d = idx.size(); d-- > 0;) {
      from += step[d] * xs[d];
      if (++idx[d] < y.shape[d]) break;
      from -= step[d] * xs[d] * y.shape[d];
      idx[d] = 0;
    }
  }
}

// Every (outer index, picked index) pair moves one contiguous block of the axes after `axis`:
// one memcpy each, at memory speed, not an index computation per element.
// An index read from `indices`, negative ones counted from the end, checked against the axis.
int64_t checked_index(const TensorRef& ind, int64_t at, int64_t size, const char* op) {
  int64_t v = load_i(ind, at);
  if (v < 0) v += size;
  if (v < 0 || v >= size)
    throw ir::Error(ir::ErrorCode::InvalidArgument, std::string(op) + ": index " + std::to_string(load_i(ind, at)) +
                                                        " is out of range for an axis of " + std::to_string(size));
  return v;
}

void gather(const KernelCall& c) {
  const TensorRef& x = *c.in[0];
  const TensorRef& ind = *c.in[1];
  const TensorRef& y = *c.out[0];
  const size_t axis = c.attrs<ir::GatherAttrs>().axis;
  if (y.size() == 0) return;
  const int64_t axis_len = x.shape[axis], picks = ind.size(), outer = outer_of(x.shape, axis);
  const size_t run = block_bytes(x, axis + 1);
  std::vector<int64_t> at(static_cast<size_t>(picks));
  for (int64_t j = 0; j < picks; ++j) {
    at[static_cast<size_t>(j)] = checked_index(ind, j, axis_len, "gather");
  }
  uint8_t* dst = y.bytes;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < picks; ++j, dst += run) std::memcpy(dst, x.bytes + static_cast<size_t>(o * axis_len + at[static_cast<size_t>(j)]) * run, run);
}

// The element at a position the run computed (negative from the end): one copy of it.
void sequence_at(const KernelCall& c) {
  const int64_t n = static_cast<int64_t>(c.in.size()) - 1;
  const int64_t given = load_i(*c.in[static_cast<size_t>(n)], 0);
  const int64_t at = given < 0 ? given + n : given;
  if (at < 0 || at >= n)
    throw ir::Error(ir::ErrorCode::InvalidArgument, "sequence_at: position " + std::to_string(given) + " is outside a sequence of " +
                                                        std::to_string(n) + " element(s)");
  move_bytes(c.out[0]->bytes, c.in[static_cast<size_t>(at)]->bytes, c.out[0]->nbytes());
}

// ---- scatter and top-k -------------------------------------------------------------------------

// a combined with b by a scatter's reduction: 1 add, 2 mul, 3 max, 4 min (a NaN wins max and min, as numpy's).
template <class T>
T scatter_combined(T a, T b, int64_t reduction) {
  if constexpr (std::is_floating_point_v<T>) {
    if (reduction > 2 && (std::isnan(a) || std::isnan(b))) return std::numeric_limits<T>::quiet_NaN();
  }
  switch (reduction) {
    case 1: return a + b;
    case 2: return a * b;
    case 3: return std::max(a, b);
    default: return std::min(a, b);
  }
}

// y[at] = update, or y[at] combined with it (in double; integers exactly).
void scatter_one(const TensorRef& y, int64_t at, const TensorRef& updates, int64_t from, int64_t reduction) {
  if (reduction == 0) return copy_elem(updates, from, y, at);
  if (ir::dtype_is_float(y.dtype)) return store_f(y, at, scatter_combined(load_f(y, at), load_f(updates, from), reduction));
  store_i(y, at, scatter_combined(load_i(y, at), load_i(updates, from), reduction));
}

void scatter_elements(const KernelCall& c) {
  const TensorRef &data = *c.in[0], &ind = *c.in[1], &upd = *c.in[2], &y = *c.out[0];
  const ir::ScatterElementsAttrs attrs = c.attrs<ir::ScatterElementsAttrs>();
  const size_t axis = attrs.axis;
  const auto reduction = static_cast<int64_t>(attrs.reduction);
  if (y.bytes != data.bytes) move_bytes(y.bytes, data.bytes, data.nbytes());
  const std::vector<int64_t> ys = strides_of(y.shape);
  for (size_t d = 0; d < ind.shape.rank(); ++d)  // symbolic shapes reach here unchecked
    if (d != axis && ind.shape[d] > data.shape[d])
      throw ir::Error(ir::ErrorCode::InvalidArgument, "scatter_elements: `indices` is larger than `data` on axis " + std::to_string(d));
  for (int64_t i = 0; i < ind.size(); ++i) {
    std::vector<int64_t> idx = unravel(i, ind.shape);
    idx[axis] = checked_index(ind, i, data.shape[axis], "scatter_elements");
    scatter_one(y, ravel(idx, ys), upd, i, reduction);
  }
}

void scatter_nd(const KernelCall& c) {
  const TensorRef &data = *c.in[0], &ind = *c.in[1], &upd = *c.in[2], &y = *c.out[0];
  const auto reduction = static_cast<int64_t>(c.attrs<ir::ScatterNdAttrs>().reduction);
  if (y.bytes != data.bytes) move_bytes(y.bytes, data.bytes, data.nbytes());
  const auto k = static_cast<size_t>(ind.shape[ind.shape.rank() - 1]);
  const std::vector<int64_t> ys = strides_of(y.shape);
  int64_t slice = 1;
  for (size_t d = k; d < data.shape.rank(); ++d) slice *= data.shape[d];
  int64_t tuples = 1;  // every index tuple (an empty one addresses all of `data`)
  for (size_t d = 0; d + 1 < ind.shape.rank(); ++d) tuples *= ind.shape[d];
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t base = 0;
    for (size_t j = 0; j < k; ++j)
      base += checked_index(ind, t * static_cast<int64_t>(k) + static_cast<int64_t>(j), data.shape[j], "scatter_nd") * ys[j];
    for (int64_t e = 0; e < slice; ++e) scatter_one(y, base + e, upd, t * slice + e, reduction);
  }
}

void top_k(const KernelCall& c) {
  const TensorRef &x = *c.in[0], &values = *c.out[0], &indices = *c.out[1];
  const ir::TopKAttrs attrs = c.attrs<ir::TopKAttrs>();
  const size_t axis = attrs.axis;
  const int64_t k = attrs.k;
  const bool largest = attrs.largest;
  if (values.size() == 0) return;
  const int64_t inner = strides_of(x.shape)[axis];
  std::vector<int64_t> order;
  int64_t lane = 0;
  for_each_lane(x.shape, axis, [&](int64_t base, int64_t stride, int64_t n) {
    order.resize(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) order[static_cast<size_t>(j)] = j;
    // A stable order keeps equal elements by position; NaN ranks above every number (as
    // numpy sorts it), so the order stays strict-weak. Doubles hold every element exactly
    // enough to order it (int64 beyond 2^53 aside).
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      const double va = load_f(x, base + a * stride), vb = load_f(x, base + b * stride);
      const bool na = std::isnan(va), nb = std::isnan(vb);
      if (na || nb) return largest ? na && !nb : nb && !na;
      return largest ? va > vb : va < vb;
    });
    // The output lane with the same outer and inner position: k elements apart by `inner`.
    const int64_t outer = lane / inner, in = lane % inner, out_base = outer * k * inner + in;
    for (int64_t j = 0; j < k; ++j) {
      copy_elem(x, base + order[static_cast<size_t>(j)] * stride, values, out_base + j * inner);
      store_i(indices, out_base + j * inner, order[static_cast<size_t>(j)]);
    }
    ++lane;
  });
}

// The pixels a sample reads, as offsets into a channel plane and weights: the same for every
// channel, so computed once per position.
struct Taps {
  int count = 0;
  int64_t at[16];
  double weight[16];
  void add(int64_t offset, double w) { at[count] = offset, weight[count] = w, ++count; }
  double apply(const TensorRef& x, int64_t plane) const {
    double sum = 0;
    for (int k = 0; k < count; ++k) sum += weight[k] * load_f(x, plane + at[k]);
    return sum;
  }
};

// grid_sample, as torch's grid_sampler_2d computes it (ONNX's GridSample follows it).
class GridSampler {
 public:
  GridSampler(const ir::GridSampleAttrs& a, int64_t h, int64_t w)
      : mode_(a.mode), padding_(a.padding_mode), align_(a.align_corners), h_(h), w_(w) {}

  // The pixels read at the grid's normalized position (gx, gy); those outside the image (zeros
  // padding) are left out, as is every pixel of a position that is not a finite number.
  Taps taps(double gx, double gy) const {
    using Mode = ir::GridSampleMode;
    Taps t;
    if (!std::isfinite(gx) || !std::isfinite(gy)) return t;
    double fx = unnormalize(gx, w_), fy = unnormalize(gy, h_);
    if (mode_ == Mode::bicubic) {  // padding applies to each of the 4 × 4 taps
      const double x0 = std::floor(fx), y0 = std::floor(fy);
      double cx[4], cy[4];
      cubic_weights(fx - x0, cx);
      cubic_weights(fy - y0, cy);
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) add(t, pad(x0 - 1 + j, w_), pad(y0 - 1 + i, h_), cy[i] * cx[j]);
      return t;
    }
    fx = pad(fx, w_), fy = pad(fy, h_);
    if (mode_ == Mode::nearest) {
      add(t, std::nearbyint(fx), std::nearbyint(fy), 1.0);
      return t;
    }
    const double x0 = std::floor(fx), y0 = std::floor(fy), tx = fx - x0, ty = fy - y0;
    add(t, x0, y0, (1 - ty) * (1 - tx));
    add(t, x0 + 1, y0, (1 - ty) * tx);
    add(t, x0, y0 + 1, ty * (1 - tx));
    add(t, x0 + 1, y0 + 1, ty * tx);
    return t;
  }

 private:
  double unnormalize(double g, int64_t size) const {
    return align_ ? (g + 1) / 2 * static_cast<double>(size - 1) : ((g + 1) * static_cast<double>(size) - 1) / 2;
  }
  // A coordinate moved inside by the padding mode (zeros: left as it is; reads outside give 0).
  double pad(double v, int64_t size) const {
    using Padding = ir::GridSamplePaddingMode;
    const double last = static_cast<double>(size - 1);
    if (padding_ == Padding::border) return std::clamp(v, 0.0, last);
    if (padding_ == Padding::reflection) {
      v = align_ ? reflect(v, 0, 2 * last) : reflect(v, -1, 2 * static_cast<double>(size) - 1);
      return std::clamp(v, 0.0, last);
    }
    return v;
  }
  // v mirrored into [twice_low / 2, twice_high / 2]; an infinite or NaN v reads nothing (NaN).
  static double reflect(double v, double twice_low, double twice_high) {
    if (!std::isfinite(v)) return std::nan("");
    if (twice_low == twice_high) return 0;
    const double low = twice_low / 2, span = (twice_high - twice_low) / 2;
    v = std::fabs(v - low);
    const double extra = std::fmod(v, span);
    // The parity of the spans passed, without converting a count that may exceed int64 (v = 1e20).
    return std::fmod(std::floor(v / span), 2.0) == 0 ? extra + low : span - extra + low;
  }
  static void cubic_weights(double t, double w[4]) {
    constexpr double A = -0.75;
    auto near = [](double d) { return ((A + 2) * d - (A + 3)) * d * d + 1; };         // |d| <= 1
    auto far = [](double d) { return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A; };  // 1 < |d| < 2
    w[0] = far(t + 1), w[1] = near(t), w[2] = near(1 - t), w[3] = far(2 - t);
  }
  // The pixel at integer position (px, py) with weight w, unless it lies outside the image.
  void add(Taps& t, double px, double py, double w) const {
    if (px >= 0 && px <= static_cast<double>(w_ - 1) && py >= 0 && py <= static_cast<double>(h_ - 1))
      t.add(static_cast<int64_t>(py) * w_ + static_cast<int64_t>(px), w);
  }

  ir::GridSampleMode mode_;
  ir::GridSamplePaddingMode padding_;
  bool align_;
  int64_t h_, w_;
};

void grid_sample(const KernelCall& c) {
  const TensorRef &x = *c.in[0], &grid = *c.in[1], &y = *c.out[0];
  const int64_t n = x.shape[0], channels = x.shape[1], h = x.shape[2], w = x.shape[3];
  const int64_t ho = grid.shape[1], wo = grid.shape[2];
  if ((h == 0 || w == 0) && y.size() > 0)  // (the builder refuses it when the sizes are static)
    throw ir::Error(ir::ErrorCode::Shape, "grid_sample: x has empty images (H " + std::to_string(h) + ", W " + std::to_string(w) + ")");
  const GridSampler sampler(c.attrs<ir::GridSampleAttrs>(), h, w);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < ho * wo; ++i) {
      const int64_t at = (b * ho * wo + i) * 2;
      const Taps taps = sampler.taps(load_f(grid, at), load_f(grid, at + 1));
      for (int64_t ch = 0; ch < channels; ++ch)
        store_f(y, (b * channels + ch) * ho * wo + i, taps.apply(x, (b * channels + ch) * h * w));
    }
}

// roi_align as ONNX Runtime computes RoiAlign: each bin's samples bilinear over the clamped
// pixel grid, a sample more than a pixel outside the image counting 0. A sample's four pixels
// and weights are found once for every channel.
void roi_align(const KernelCall& c) {
  const TensorRef &x = *c.in[0], &rois = *c.in[1], &batch = *c.in[2], &y = *c.out[0];
  const ir::RoiAlignAttrs a = c.attrs<ir::RoiAlignAttrs>();
  const int64_t n = x.shape[0], channels = x.shape[1], h = x.shape[2], w = x.shape[3];
  const int64_t oh = a.output_height, ow = a.output_width;
  const bool half_pixel = a.coordinate_transformation_mode == ir::RoiAlignCoordinateTransformationMode::half_pixel;
  const bool max = a.mode == ir::RoiAlignMode::max;
  const double offset = half_pixel ? 0.5 : 0.0;
  if ((h == 0 || w == 0) && y.size() > 0)  // (the builder refuses it when the sizes are static)
    throw ir::Error(ir::ErrorCode::Shape, "roi_align: x has empty images (H " + std::to_string(h) + ", W " + std::to_string(w) + ")");
  std::vector<Taps> samples;  // a bin's, 4 pixels each (none for a sample far outside)
  for (int64_t r = 0; r < rois.shape[0]; ++r) {
    const int64_t image = load_i(batch, r);
    if (image < 0 || image >= n)
      throw ir::Error(ir::ErrorCode::InvalidArgument, "roi_align: batch index " + std::to_string(image) + " of region " +
                                                          std::to_string(r) + " is out of range for " + std::to_string(n) + " images");
    const double x0 = load_f(rois, r * 4) * a.spatial_scale - offset, y0 = load_f(rois, r * 4 + 1) * a.spatial_scale - offset;
    double width = load_f(rois, r * 4 + 2) * a.spatial_scale - offset - x0, height = load_f(rois, r * 4 + 3) * a.spatial_scale - offset - y0;
    if (!half_pixel) width = std::max(width, 1.0), height = std::max(height, 1.0);
    if (!std::isfinite(x0) || !std::isfinite(y0) || !std::isfinite(width) || !std::isfinite(height))
      throw ir::Error(ir::ErrorCode::InvalidArgument, "roi_align: region " + std::to_string(r) + " has a corner that is not a finite number");
    const double bin_h = height / static_cast<double>(oh), bin_w = width / static_cast<double>(ow);
    // Samples per bin: the ratio, else as many as the bin spans pixels each way; a region so
    // large that a bin would take over 2^20 samples is refused rather than run for hours.
    // A region of negative or NaN extent takes no samples (its bins are 0), as ONNX Runtime's
    // loops take none; an infinite one is refused as too large.
    const double rows = std::max(0.0, a.sampling_ratio > 0 ? static_cast<double>(a.sampling_ratio) : std::ceil(height / static_cast<double>(oh)));
    const double cols = std::max(0.0, a.sampling_ratio > 0 ? static_cast<double>(a.sampling_ratio) : std::ceil(width / static_cast<double>(ow)));
    if (!(rows * cols <= double(1 << 20)))
      throw ir::Error(ir::ErrorCode::Limit, "roi_align: region " + std::to_string(r) + " would take " + std::to_string(rows) + " x " +
                                                std::to_string(cols) + " samples per bin (more than 2^20)");
    const int64_t grid_h = static_cast<int64_t>(rows), grid_w = static_cast<int64_t>(cols);
    const double count = static_cast<double>(std::max<int64_t>(grid_h * grid_w, 1));
    for (int64_t ph = 0; ph < oh; ++ph)
      for (int64_t pw = 0; pw < ow; ++pw) {
        samples.clear();
        for (int64_t iy = 0; iy < grid_h; ++iy)
          for (int64_t ix = 0; ix < grid_w; ++ix) {
            double sy = y0 + static_cast<double>(ph) * bin_h + (static_cast<double>(iy) + 0.5) * bin_h / static_cast<double>(grid_h);
            double sx = x0 + static_cast<double>(pw) * bin_w + (static_cast<double>(ix) + 0.5) * bin_w / static_cast<double>(grid_w);
            Taps& t = samples.emplace_back();
            if (sy < -1.0 || sy > static_cast<double>(h) || sx < -1.0 || sx > static_cast<double>(w)) continue;
            sy = std::max(sy, 0.0), sx = std::max(sx, 0.0);
            int64_t ylo = static_cast<int64_t>(sy), xlo = static_cast<int64_t>(sx), yhi = ylo + 1, xhi = xlo + 1;
            if (ylo >= h - 1) yhi = ylo = h - 1, sy = static_cast<double>(ylo);
            if (xlo >= w - 1) xhi = xlo = w - 1, sx = static_cast<double>(xlo);
            const double ly = sy - static_cast<double>(ylo), lx = sx - static_cast<double>(xlo), hy = 1 - ly, hx = 1 - lx;
            t.add(ylo * w + xlo, hy * hx), t.add(ylo * w + xhi, hy * lx), t.add(yhi * w + xlo, ly * hx), t.add(yhi * w + xhi, ly * lx);
          }
        for (int64_t ch = 0; ch < channels; ++ch) {
          const int64_t plane = (image * channels + ch) * h * w;
          double out = 0;
          for (size_t k = 0; k < samples.size(); ++k) {
            const Taps& t = samples[k];
            if (!max) {
              out += t.apply(x, plane);
              continue;
            }
            double top = t.count ? t.weight[0] * load_f(x, plane + t.at[0]) : 0;  // ONNX Runtime: the largest weighted pixel
            for (int j = 1; j < t.count; ++j) top = std::max(top, t.weight[j] * load_f(x, plane + t.at[j]));
            out = k == 0 ? top : std::max(out, top);
          }
          store_f(y, ((r * channels + ch) * oh + ph) * ow + pw, max ? out : out / count);
        }
      }
  }
}

// Each [n, n] matrix's determinant: LU factorization with partial pivoting in double, as
// numpy.linalg.det (LAPACK's getrf) computes it; each row swap flips the sign.
void det(const KernelCall& c) {
  const TensorRef &x = *c.in[0], &y = *c.out[0];
  const int64_t n = x.shape[x.shape.rank() - 1];
  std::vector<double> a(static_cast<size_t>(n * n));
  auto at = [&](int64_t i, int64_t j) -> double& { return a[static_cast<size_t>(i * n + j)]; };
  for (int64_t m = 0; m < y.size(); ++m) {
    for (int64_t i = 0; i < n * n; ++i) a[static_cast<size_t>(i)] = load_f(x, m * n * n + i);
    double d = 1;
    for (int64_t k = 0; k < n; ++k) {
      int64_t p = k;
      for (int64_t i = k + 1; i < n; ++i)
        if (std::abs(at(i, k)) > std::abs(at(p, k))) p = i;
      if (at(p, k) == 0) {
        d = 0;
        break;
      }
      if (p != k) {
        for (int64_t j = 0; j < n; ++j) std::swap(at(p, j), at(k, j));
        d = -d;
      }
      d *= at(k, k);
      for (int64_t i = k + 1; i < n; ++i) {
        const double f = at(i, k) / at(k, k);
        for (int64_t j = k + 1; j < n; ++j) at(i, j) -= f * at(k, j);
      }
    }
    store_f(y, m, d);
  }
}

void expand(const KernelCall& c) {
  const TensorRef& y = *c.out[0];
  BroadcastWalk walk(y.shape, {c.in[0]->shape});
  for (int64_t i = 0; i < y.size(); ++i, walk.next()) copy_elem(*c.in[0], walk.offset(0), y, i);
}

// A row (the last axis) at a time: each output row's source row is found once, the part of it
// inside the input copied whole and the padding around it filled; reflect and edge find a
// source element per element only in the padding.
void pad(const KernelCall& c) {
  const TensorRef& x = *c.in[0];
  const TensorRef& y = *c.out[0];
  if (y.size() == 0) return;
  const size_t r = x.shape.rank();
  const ir::PadAttrs attrs = c.attrs<ir::PadAttrs>();
  const ir::Span<int64_t> pads = attrs.pads;
  const auto mode = static_cast<int64_t>(attrs.mode);  // constant, reflect, edge
  const size_t es = ir::dtype_size(x.dtype);
  std::vector<uint8_t> fill(es);
  store_f(TensorRef{y.dtype, Shape{1}, fill.data()}, 0, attrs.value);
  // The source index of output index i of an axis of n elements padded by `before`: -1 outside.
  const auto source = [&](int64_t i, int64_t before, int64_t n) -> int64_t {
    const int64_t v = i - before;
    if (v >= 0 && v < n) return v;
    if (mode == 0) return -1;
    if (mode == 1) return v < 0 ? -v : 2 * (n - 1) - v;
    return v < 0 ? 0 : n - 1;
  };
  const int64_t w_out = r ? y.shape[r - 1] : 1, w_in = r ? x.shape[r - 1] : 1, before = r ? pads[r - 1] : 0;
  const std::vector<int64_t> xs = strides_of(x.shape);
  std::vector<int64_t> idx(r, 0);  // the output row's index over the leading axes
  for (int64_t row = 0, rows = y.size() / w_out; row < rows; ++row) {
    int64_t src = 0;
    bool outside = false;
    for (size_t d = 0; d + 1 < r; ++d) {
      const int64_t v = source(idx[d], pads[d], x.shape[d]);
      outside = outside || v < 0;
      src += v * xs[d];
    }
    uint8_t* out = y.bytes + static_cast<size_t>(row * w_out) * es;
    for (int64_t j = 0; j < w_out; ++j) {
      const int64_t v = outside ? -1 : source(j, before, w_in);
      if (v < 0) {
        std::memcpy(out + static_cast<size_t>(j) * es, fill.data(), es);
      } else if (j - before == v) {  // inside: the rest of the input's row at once
        const int64_t run = std::min(w_in - v, w_out - j);
        std::memcpy(out + static_cast<size_t>(j) * es, x.bytes + static_cast<size_t>(src + v) * es, static_cast<size_t>(run) * es);
        j += run - 1;
      } else {
        std::memcpy(out + static_cast<size_t>(j) * es, x.bytes + static_cast<size_t>(src + v) * es, es);
      }
    }
    for (size_t d = r > 0 ? r - 1 : 0; d-- > 0;) {  // the next row's index
      if (++idx[d] < y.shape[d]) break;
      idx[d] = 0;
    }
  }
}

void fill(const KernelCall& c) {
  const double value = c.attrs<ir::FillAttrs>().value;
  for (int64_t i = 0; i < c.out[0]->size(); ++i) store_f(*c.out[0], i, value);
}

void range(const KernelCall& c) {
  const ir::RangeAttrs attrs = c.attrs<ir::RangeAttrs>();
  const double start = attrs.start, step = attrs.step;
  for (int64_t i = 0; i < c.out[0]->size(); ++i) store_f(*c.out[0], i, start + static_cast<double>(i) * step);
}

void integer_range(const KernelCall& c) {
  const ir::IntegerRangeAttrs a = c.attrs<ir::IntegerRangeAttrs>();
  // In unsigned arithmetic, which wraps where int64 would overflow: start + i·step is exact
  // whenever the element itself fits (the rule checked the ends), even when i·step does not.
  const auto start = static_cast<uint64_t>(a.start), step = static_cast<uint64_t>(a.step);
  for (int64_t i = 0; i < c.out[0]->size(); ++i) store_i(*c.out[0], i, static_cast<int64_t>(start + static_cast<uint64_t>(i) * step));
}

}  // namespace

Kernel find_kernel(const ir::OpSchema& op) {
  switch (op.kind) {
    case K::reduce_sum: return [](const KernelCall& c) { reduce(c, Reduce::Sum); };
    case K::reduce_mean: return [](const KernelCall& c) { reduce(c, Reduce::Mean); };
    case K::reduce_max: return [](const KernelCall& c) { reduce(c, Reduce::Max); };
    case K::reduce_min: return [](const KernelCall& c) { reduce(c, Reduce::Min); };
    case K::reduce_prod: return [](const KernelCall& c) { reduce(c, Reduce::Prod); };
    case K::argmax: return [](const KernelCall& c) { arg_reduce(c, true); };
    case K::argmin: return [](const KernelCall& c) { arg_reduce(c, false); };
    case K::softmax:
      return [](const KernelCall& c) {
        const ir::SoftmaxAttrs a = c.attrs<ir::SoftmaxAttrs>();
        softmax(c, a.axis, a.scale, false);
      };
    case K::log_softmax: return [](const KernelCall& c) { softmax(c, c.attrs<ir::LogSoftmaxAttrs>().axis, 1.0, true); };
    case K::layer_norm: return [](const KernelCall& c) { norm<ir::LayerNormAttrs>(c, false); };
    case K::rms_norm: return [](const KernelCall& c) { norm<ir::RmsNormAttrs>(c, true); };
    case K::matmul: return matmul;
    case K::attention: return attention;
    case K::conv2d: return conv2d;
    case K::quantized_conv2d: return quantized_conv2d;
    case K::matmul_integer: return matmul_integer;
    case K::matmul_nbits: return matmul_nbits;
    case K::max_pool2d: return [](const KernelCall& c) { pool2d(c, true); };
    case K::avg_pool2d: return [](const KernelCall& c) { pool2d(c, false); };
    case K::reshape:
    case K::squeeze:
    case K::unsqueeze: return copy_bytes;
    case K::transpose: return transpose;
    case K::concat: return concat;
    case K::split: return split;
    case K::slice: return slice;
    case K::gather: return gather;
    case K::sequence_at: return sequence_at;
    case K::scatter_elements: return scatter_elements;
    case K::scatter_nd: return scatter_nd;
    case K::top_k: return top_k;
    case K::det: return det;
    case K::grid_sample: return grid_sample;
    case K::roi_align: return roi_align;
    case K::expand: return expand;
    case K::pad: return pad;
    case K::fill: return fill;
    case K::range: return range;
    case K::integer_range: return integer_range;
    case K::all_reduce:
    case K::all_gather:
    case K::reduce_scatter:
    case K::broadcast:
    case K::all_to_all:
    case K::send:
    case K::recv: return [](const KernelCall& c) { run_collective(c.graph, c.node, c.in.empty() ? nullptr : c.in[0], *c.out[0]); };
    default: return nullptr;
  }
}

}  // namespace esg::eval
