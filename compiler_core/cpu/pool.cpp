// 8-bit max pooling over channels last (quantized activations), and f32 max and average pooling
// over NCHW, and over blocked channels (nChw8c, nChw16c: a block's
// channels side by side, so the innermost loop is one vector over them): each output row's
// window rows and, per output column, the window's columns clipped to the image once, so the
// inner loops test nothing; planes (or planes of blocks) split over the model's threads. The same
// results as the reference kernel (a NaN is skipped by the max as there; the average divides by
// the window's elements inside the image). Global pools (reduce_mean / reduce_max over H and W)
// over blocked channels too, so that a squeeze-excitation block stays blocked.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "cpu/split.hpp"
#include "cpu/vector_math.hpp"
#include "eval/kernels.hpp"

namespace esg::cpu {
namespace {

template <bool kMax>
void pool2d_f32(const eval::KernelCall& c) {
  const eval::TensorRef& x = *c.in[0];
  const eval::TensorRef& y = *c.out[0];
  const ir::MaxPool2dAttrs attrs = c.attrs<ir::MaxPool2dAttrs>();  // both pools' view
  const ir::Span<int64_t> k = attrs.kernel, st = attrs.strides, pads = attrs.pads;
  const int64_t planes = x.shape[0] * x.shape[1], H = x.shape[2], W = x.shape[3], OH = y.shape[2], OW = y.shape[3];
  split_work(planes, H * W, c.parallel, [&](int64_t first, int64_t last) {
    for (int64_t p = first; p < last; ++p) {
      const float* in = x.data<float>() + p * H * W;
      float* out = y.data<float>() + p * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh) {
        const int64_t h0 = std::max<int64_t>(0, oh * st[0] - pads[0]), h1 = std::min(H, oh * st[0] - pads[0] + k[0]);
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t w0 = std::max<int64_t>(0, ow * st[1] - pads[1]), w1 = std::min(W, ow * st[1] - pads[1] + k[1]);
          float acc = kMax ? -std::numeric_limits<float>::infinity() : 0.0f;
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw) {
              const float v = in[ih * W + iw];
              acc = kMax ? (acc < v ? v : acc) : acc + v;
            }
          const int64_t count = std::max<int64_t>(0, h1 - h0) * std::max<int64_t>(0, w1 - w0);
          out[oh * OW + ow] = kMax ? acc : acc / static_cast<float>(count ? count : 1);
        }
      }
    }
  });
}

// One output row's windows over a plane of blocks of B channels: rows [h0, h1) of the input, each
// window's columns clipped to the image. B is a constant here, so a window's lanes stay in one
// vector register (two on AVX2 for B = 16) through the whole window.
template <bool kMax, int64_t B>
ESG_VM_INLINE void pool_row_blocked(const float* in, int64_t W, int64_t h0, int64_t h1, int64_t OW, int64_t stride, int64_t pad,
                                    int64_t k, float* out) {
  for (int64_t ow = 0; ow < OW; ++ow, out += B) {
    const int64_t w0 = std::max<int64_t>(0, ow * stride - pad), w1 = std::min(W, ow * stride - pad + k);
    float acc[B];
    for (int64_t lane = 0; lane < B; ++lane) acc[lane] = kMax ? -std::numeric_limits<float>::infinity() : 0.0f;
    for (int64_t ih = h0; ih < h1; ++ih)
      for (int64_t iw = w0; iw < w1; ++iw) {
        const float* v = in + (ih * W + iw) * B;
        if constexpr (kMax)
          for (int64_t lane = 0; lane < B; ++lane) acc[lane] = acc[lane] < v[lane] ? v[lane] : acc[lane];
        else
          for (int64_t lane = 0; lane < B; ++lane) acc[lane] += v[lane];
      }
    const float count = static_cast<float>(std::max<int64_t>(1, std::max<int64_t>(0, h1 - h0) * std::max<int64_t>(0, w1 - w0)));
    for (int64_t lane = 0; lane < B; ++lane) out[lane] = kMax ? acc[lane] : acc[lane] / count;
  }
}

// The row above for blocks of 8 or 16 lanes, built for each ISA level.
ESG_CPU_CLONES void pool_row(const float* in, int64_t W, int64_t lanes, int64_t h0, int64_t h1, int64_t OW, int64_t stride,
                             int64_t pad, int64_t k, bool max, float* out) {
  if (max && lanes == 16) pool_row_blocked<true, 16>(in, W, h0, h1, OW, stride, pad, k, out);
  else if (max) pool_row_blocked<true, 8>(in, W, h0, h1, OW, stride, pad, k, out);
  else if (lanes == 16) pool_row_blocked<false, 16>(in, W, h0, h1, OW, stride, pad, k, out);
  else pool_row_blocked<false, 8>(in, W, h0, h1, OW, stride, pad, k, out);
}

// The same over blocks of B channels: element (h, w, lane) of a plane of blocks at (h·W + w)·B + lane.
template <bool kMax, int64_t B>
void pool2d_blocked_f32(const eval::KernelCall& c) {
  const eval::TensorRef& x = *c.in[0];
  const eval::TensorRef& y = *c.out[0];
  const ir::MaxPool2dAttrs attrs = c.attrs<ir::MaxPool2dAttrs>();
  const ir::Span<int64_t> k = attrs.kernel, st = attrs.strides, pads = attrs.pads;
  const int64_t planes = x.shape[0] * ((x.shape[1] + B - 1) / B), H = x.shape[2], W = x.shape[3], OH = y.shape[2], OW = y.shape[3];
  // Rows of planes: a network's first pool has few planes of blocks (one image, 64 channels:
  // four) but many rows.
  split_work(planes * OH, W * B * k[0], c.parallel, [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      const int64_t p = r / OH, oh = r % OH;
      const int64_t h0 = std::max<int64_t>(0, oh * st[0] - pads[0]), h1 = std::min(H, oh * st[0] - pads[0] + k[0]);
      pool_row(x.data<float>() + p * H * W * B, W, B, h0, h1, OW, st[1], pads[1], k[1], kMax, y.data<float>() + (p * OH + oh) * OW * B);
    }
  });
}

// The lanes' sums or maxima (a NaN wins, as in the reference) over `pixels` rows of B floats,
// into acc[0, B): B a constant, so that the accumulator stays in a register.
template <bool kMax, int64_t B>
ESG_VM_INLINE void reduce_lanes_of(const float* in, int64_t pixels, float* out) {
  float acc[B];
  for (int64_t lane = 0; lane < B; ++lane) acc[lane] = kMax ? -std::numeric_limits<float>::infinity() : 0.0f;
  for (int64_t i = 0; i < pixels; ++i, in += B) {
    if constexpr (kMax)
      for (int64_t lane = 0; lane < B; ++lane) acc[lane] = acc[lane] < in[lane] || in[lane] != in[lane] ? in[lane] : acc[lane];
    else
      for (int64_t lane = 0; lane < B; ++lane) acc[lane] += in[lane];
  }
  for (int64_t lane = 0; lane < B; ++lane) out[lane] = acc[lane];
}

// The above for blocks of 8 or 16 lanes, built for each ISA level.
ESG_CPU_CLONES void reduce_lanes(const float* in, int64_t pixels, int64_t lanes, bool max, float* acc) {
  if (max && lanes == 16) reduce_lanes_of<true, 16>(in, pixels, acc);
  else if (max) reduce_lanes_of<true, 8>(in, pixels, acc);
  else if (lanes == 16) reduce_lanes_of<false, 16>(in, pixels, acc);
  else reduce_lanes_of<false, 8>(in, pixels, acc);
}

// A global pool (reduce_mean or reduce_max over H and W, keeping them) over blocks of B
// channels: one vector of B sums or maxima per plane of blocks, the result [N, C, 1, 1] blocked
// too. Sums in order, as the reference does.
template <bool kMax, int64_t B>
void global_pool_blocked_f32(const eval::KernelCall& c) {
  const eval::TensorRef& x = *c.in[0];
  const eval::TensorRef& y = *c.out[0];
  const int64_t planes = x.shape[0] * ((x.shape[1] + B - 1) / B), HW = x.shape[2] * x.shape[3];
  split_work(planes, HW * B, c.parallel, [&](int64_t first, int64_t last) {
    for (int64_t p = first; p < last; ++p) {
      float acc[B];
      reduce_lanes(x.data<float>() + p * HW * B, HW, B, kMax, acc);
      float* o = y.data<float>() + p * B;
      for (int64_t lane = 0; lane < B; ++lane) o[lane] = kMax ? acc[lane] : acc[lane] / static_cast<float>(HW);
    }
  });
}

// Whether `n` reduces a rank-4 value over exactly its axes 2 and 3, keeping them.
bool is_global_pool(const ir::Graph& g, const ir::Node& n) {
  if (n.op->kind != ir::OpKind::reduce_mean && n.op->kind != ir::OpKind::reduce_max) return false;
  const ir::ReduceMaxAttrs a(g, n);  // every reduction's view
  std::vector<size_t> axes = a.axes;
  std::sort(axes.begin(), axes.end());
  return a.keepdims && axes == std::vector<size_t>{2, 3} && g.shape(g.operands[n.first_input]).rank() == 4;
}

}  // namespace

eval::Kernel blocked_pool_kernel(const ir::Graph& g, const ir::Node& n, int64_t block) {
  if (g.values[n.first_output].dtype != ir::DType::F32 || (block != 8 && block != 16)) return nullptr;
  if (is_global_pool(g, n)) {
    const bool max = n.op->kind == ir::OpKind::reduce_max;
    if (block == 8) return max ? global_pool_blocked_f32<true, 8> : global_pool_blocked_f32<false, 8>;
    return max ? global_pool_blocked_f32<true, 16> : global_pool_blocked_f32<false, 16>;
  }
  const bool max = n.op->kind == ir::OpKind::max_pool2d;
  if (!max && n.op->kind != ir::OpKind::avg_pool2d) return nullptr;
  if (block == 8) return max ? pool2d_blocked_f32<true, 8> : pool2d_blocked_f32<false, 8>;
  return max ? pool2d_blocked_f32<true, 16> : pool2d_blocked_f32<false, 16>;
}

namespace {
// Window by window, a lane-wise max of C side-by-side channels; built for each ISA level (one
// vector instruction per 32 lanes with AVX2).
ESG_CPU_CLONES void max_lanes_u8(uint8_t* acc, const uint8_t* v, int64_t lanes) {
  for (int64_t c = 0; c < lanes; ++c) acc[c] = acc[c] < v[c] ? v[c] : acc[c];
}
ESG_CPU_CLONES void max_lanes_i8(int8_t* acc, const int8_t* v, int64_t lanes) {
  for (int64_t c = 0; c < lanes; ++c) acc[c] = acc[c] < v[c] ? v[c] : acc[c];
}
void max_lanes(uint8_t* acc, const uint8_t* v, int64_t lanes) { max_lanes_u8(acc, v, lanes); }
void max_lanes(int8_t* acc, const int8_t* v, int64_t lanes) { max_lanes_i8(acc, v, lanes); }

// 8-bit max pooling over channels last (nhwc): quantized activations, whose max is the max of
// what they stand for (the scale is positive). Each output pixel's C channels are the window's
// pixels' maxed lane by lane; a window all in the padding gives the dtype's minimum, as the
// reference's -inf stores. Rows of output pixels split over the model's threads.
template <class Int>
void max_pool2d_channels_last(const eval::KernelCall& c) {
  const eval::TensorRef& x = *c.in[0];
  const eval::TensorRef& y = *c.out[0];
  const ir::MaxPool2dAttrs attrs = c.attrs<ir::MaxPool2dAttrs>();
  const ir::Span<int64_t> k = attrs.kernel, st = attrs.strides, pads = attrs.pads;
  const int64_t C = x.shape[1], H = x.shape[2], W = x.shape[3], OH = y.shape[2], OW = y.shape[3];
  split_work(x.shape[0] * OH, OW * C * k[0] * k[1], c.parallel, [&](int64_t first, int64_t last) {
    for (int64_t row = first; row < last; ++row) {
      const int64_t n = row / OH, oh = row % OH;
      const int64_t h0 = std::max<int64_t>(0, oh * st[0] - pads[0]), h1 = std::min(H, oh * st[0] - pads[0] + k[0]);
      const Int* in = x.data<Int>() + n * H * W * C;
      Int* out = y.data<Int>() + row * OW * C;
      for (int64_t ow = 0; ow < OW; ++ow, out += C) {
        const int64_t w0 = std::max<int64_t>(0, ow * st[1] - pads[1]), w1 = std::min(W, ow * st[1] - pads[1] + k[1]);
        std::fill_n(out, C, std::numeric_limits<Int>::min());
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) max_lanes(out, in + (ih * W + iw) * C, C);
      }
    }
  });
}
}  // namespace

eval::Kernel channels_last_pool_kernel(const ir::Graph& g, const ir::Node& n) {
  if (n.op->kind != ir::OpKind::max_pool2d) return nullptr;
  switch (g.values[n.first_output].dtype) {
    case ir::DType::U8: return max_pool2d_channels_last<uint8_t>;
    case ir::DType::I8: return max_pool2d_channels_last<int8_t>;
    default: return nullptr;
  }
}

eval::Kernel pool_kernel(const ir::Graph& g, const ir::Node& n) {
  if (g.values[n.first_output].dtype != ir::DType::F32) return nullptr;
  if (n.op->kind == ir::OpKind::max_pool2d) return pool2d_f32<true>;
  return n.op->kind == ir::OpKind::avg_pool2d ? pool2d_f32<false> : nullptr;
}

}  // namespace esg::cpu
