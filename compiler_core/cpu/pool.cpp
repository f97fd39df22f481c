// f32 max and average pooling over NCHW: each output row's window rows and, per output column,
// the window's columns clipped to the image once, so the inner loops test nothing; planes split
// over the model's threads. The same results as the reference kernel (a NaN is skipped by the
// max as there; the average divides by the window's elements inside the image).
#include <algorithm>
#include <limits>
#include <string>

#include "cpu/split.hpp"
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

}  // namespace

eval::Kernel pool_kernel(const ir::Graph& g, const ir::Node& n) {
  if (g.values[n.first_output].dtype != ir::DType::F32) return nullptr;
  if (n.op->kind == ir::OpKind::max_pool2d) return pool2d_f32<true>;
  return n.op->kind == ir::OpKind::avg_pool2d ? pool2d_f32<false> : nullptr;
}

}  // namespace esg::cpu
