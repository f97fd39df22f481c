// f32 conv2d (NCHW input, OIHW filter) as GEMMs through oneDNN: per image and group, the input
// patches are laid out as a [C/groups·kH·kW, OH·OW] matrix (im2col; a 1x1 filter with unit
// strides and no padding reads the image itself), and the group's filters [O/groups, C/groups·kH·kW]
// multiply it straight into the output's [O/groups, OH·OW] rows; one input channel per filter
// (depthwise) accumulates tap by tap instead. Images and groups split over the model's threads,
// each keeping its im2col buffer between runs.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "cpu/conv.hpp"
#include "cpu/fast_kernels.hpp"
#include "cpu/gemm.hpp"
#include "cpu/split.hpp"
#include "cpu/vector_math.hpp"

namespace esg::cpu {
namespace {

struct ConvShape {
  int64_t C, H, W;          // input channels of one group, input size
  int64_t KH, KW;           // filter size
  int64_t OH, OW;           // output size
  int64_t sh, sw, pt, pl, dh, dw;
};

// The output columns a filter column kw reads inside the image: ow in [lo, hi) reads input
// column ow·sw + shift; the others read the zero padding. Found once per tap, so the loops over
// columns have no bounds test.
struct Columns {
  int64_t lo, hi, shift;
};
Columns columns_inside(const ConvShape& s, int64_t kw) {
  const int64_t shift = kw * s.dw - s.pl;
  const int64_t lo = shift >= 0 ? 0 : std::min(s.OW, (-shift + s.sw - 1) / s.sw);
  const int64_t hi = s.W - 1 - shift < 0 ? lo : std::max(lo, std::min(s.OW, (s.W - 1 - shift) / s.sw + 1));
  return {lo, hi, shift};
}

// The output rows [oh0, oh1) as columns:
// col[(c·KH + kh)·KW + kw][(oh - oh0)·OW + ow] = x[c][oh·sh - pt + kh·dh][ow·sw - pl + kw·dw], 0 outside.
void im2col(const float* x, const ConvShape& s, int64_t oh0, int64_t oh1, float* col) {
  const int64_t P = (oh1 - oh0) * s.OW;
  for (int64_t c = 0; c < s.C; ++c)
    for (int64_t kh = 0; kh < s.KH; ++kh)
      for (int64_t kw = 0; kw < s.KW; ++kw) {
        const Columns cols = columns_inside(s, kw);
        float* row = col + ((c * s.KH + kh) * s.KW + kw) * P;
        for (int64_t oh = oh0; oh < oh1; ++oh, row += s.OW) {
          const int64_t ih = oh * s.sh - s.pt + kh * s.dh;
          if (ih < 0 || ih >= s.H) {
            std::fill_n(row, s.OW, 0.0f);
            continue;
          }
          const float* in = x + (c * s.H + ih) * s.W + cols.shift;
          std::fill_n(row, cols.lo, 0.0f);
          if (s.sw == 1)
            std::copy(in + cols.lo, in + cols.hi, row + cols.lo);
          else
            for (int64_t ow = cols.lo; ow < cols.hi; ++ow) row[ow] = in[ow * s.sw];
          std::fill(row + cols.hi, row + s.OW, 0.0f);
        }
      }
}

// One input channel and one filter (depthwise): out += w[kh][kw] · shifted input, tap by tap.
// A GEMM of 1 x kH·kW x OH·OW would be all overhead. Built for each ISA level like the
// elementwise rows; unit strides (the common case) get a loop of their own, which vectorizes;
// one fused multiply-add per tap, as GEMM accumulates.
ESG_CPU_CLONES void depthwise(const float* image, const float* w, float b, const ConvShape& s, float* out) {
  std::fill_n(out, s.OH * s.OW, b);
  for (int64_t kh = 0; kh < s.KH; ++kh)
    for (int64_t kw = 0; kw < s.KW; ++kw) {
      const float wv = w[kh * s.KW + kw];
      const Columns cols = columns_inside(s, kw);
      for (int64_t oh = 0; oh < s.OH; ++oh) {
        const int64_t ih = oh * s.sh - s.pt + kh * s.dh;
        if (ih < 0 || ih >= s.H) continue;
        const float* in = image + ih * s.W + cols.shift;
        float* o = out + oh * s.OW;
        if (s.sw == 1)
          for (int64_t ow = cols.lo; ow < cols.hi; ++ow) o[ow] = vm::fma(wv, in[ow], o[ow]);
        else
          for (int64_t ow = cols.lo; ow < cols.hi; ++ow) o[ow] = vm::fma(wv, in[ow * s.sw], o[ow]);
      }
    }
}

ConvShape conv_shape(const ConvParams& a, const eval::TensorRef& x, const eval::TensorRef& w, const ir::Shape& out) {
  return {w.shape[1], x.shape[2], x.shape[3], w.shape[2], w.shape[3], out[2], out[3],
          a.stride_h, a.stride_w, a.pad_top, a.pad_left, a.dilation_h, a.dilation_w};
}

constexpr int64_t kColumnBytes = 512 * 1024;

// One image's group of output channels: out = [O/groups, OH·OW] rows of the result. `col` is
// the caller's im2col buffer, kept between calls.
void conv_unit(const ConvShape& s, const ConvParams& a, const eval::TensorRef& x, const eval::TensorRef& w,
               const eval::TensorRef* bias, int64_t n, int64_t g, float* out, const eval::Parallel* parallel, std::vector<float>& col) {
  const int64_t OG = w.shape[0] / a.groups, K = s.C * s.KH * s.KW, P = s.OH * s.OW;
  const float* image = x.data<float>() + (n * a.groups + g) * s.C * s.H * s.W;
  if (s.C == 1 && OG == 1) {
    depthwise(image, w.data<float>() + g * K, bias ? bias->data<float>()[g] : 0.0f, s, out);
    return;
  }
  const bool direct = s.KH == 1 && s.KW == 1 && s.sh == 1 && s.sw == 1 && s.pt == 0 && s.pl == 0 && a.pad_bottom == 0 &&
                      a.pad_right == 0;
  const float* filters = w.data<float>() + g * OG * K;
  if (direct) {
    sgemm(false, false, OG, P, K, filters, K, image, P, out, P, parallel);
  } else {
    // Output rows in bands whose columns fit half of L2, each multiplied right after it is
    // laid out: a whole image's columns (K·P floats, megabytes) would go out to memory and back.
    const int64_t band = std::clamp<int64_t>(kColumnBytes / static_cast<int64_t>(sizeof(float)) / std::max<int64_t>(K * s.OW, 1), 1, s.OH);
    col.resize(static_cast<size_t>(K * band * s.OW));
    for (int64_t oh = 0; oh < s.OH; oh += band) {
      const int64_t rows = std::min(band, s.OH - oh);
      im2col(image, s, oh, oh + rows, col.data());
      sgemm(false, false, OG, rows * s.OW, K, filters, K, col.data(), rows * s.OW, out + oh * s.OW, P, parallel);
    }
  }
  if (bias)
    for (int64_t o = 0; o < OG; ++o) {
      const float b = bias->data<float>()[g * OG + o];
      for (int64_t p = 0; p < P; ++p) out[o * P + p] += b;
    }
}

void conv2d_f32(const eval::KernelCall& c) {
  const eval::TensorRef& x = *c.in[0];
  const eval::TensorRef& w = *c.in[1];
  const eval::TensorRef* bias = c.in.size() > 2 ? c.in[2] : nullptr;
  const eval::TensorRef& y = *c.out[0];
  const ConvParams a = conv_params(c.graph, c.node);
  const ConvShape s = conv_shape(a, x, w, y.shape);
  const int64_t N = x.shape[0], O = w.shape[0], OG = O / a.groups, P = s.OH * s.OW;
  if (y.size() == 0) return;
  // The work of a unit (an image's group) counted in multiply-adds.
  split_work(N * a.groups, OG * P * std::max<int64_t>(s.C * s.KH * s.KW, 1), c.parallel, [&](int64_t first, int64_t last) {
    thread_local std::vector<float> col;
    std::vector<float>& buffer = col;
    for (int64_t i = first; i < last; ++i) {
      const int64_t n = i / a.groups, g = i % a.groups;
      conv_unit(s, a, x, w, bias, n, g, y.data<float>() + (n * O + g * OG) * P, c.parallel, buffer);
    }
  });
}

}  // namespace

ConvParams conv_params(const ir::Graph& g, const ir::Node& n) {
  auto params = [](const auto& a) {
    return ConvParams{a.strides[0], a.strides[1], a.pads[0], a.pads[1], a.pads[2], a.pads[3], a.dilations[0], a.dilations[1], a.groups};
  };
  return n.op->kind == ir::OpKind::quantized_conv2d ? params(ir::QuantizedConv2dAttrs(g, n)) : params(ir::Conv2dAttrs(g, n));
}

bool is_conv2d_f32(const ir::Graph& g, const ir::Node& n) {
  if (n.op->kind != ir::OpKind::conv2d || g.values[n.first_output].dtype != ir::DType::F32) return false;
  for (ir::ValueId v : g.inputs(n))
    if (v != ir::kNone && g.values[v].dtype != ir::DType::F32) return false;
  return true;
}

eval::Kernel conv_kernel(const ir::Graph& g, const ir::Node& n) { return is_conv2d_f32(g, n) ? conv2d_f32 : nullptr; }

}  // namespace esg::cpu
