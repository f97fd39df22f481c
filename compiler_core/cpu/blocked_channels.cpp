// Ops that move whole channels, over values in blocked channels (nChw8c, nChw16c), so that the
// values around them stay blocked. Concatenation: when every input but the last fills whole
// blocks, each image's result is its inputs' blocks one after the other, one copy per input and
// image (a DenseNet's concatenations); the last input's padding channels, zeros, become the
// result's. Gathering channels (a ShuffleNet's channel shuffle and its halves, as the passes
// restate them): each result block's lanes picked from the source's, pixel by pixel.
#include <cstring>
#include <string>
#include <vector>

#include "cpu/split.hpp"
#include "eval/kernels.hpp"
#include "ir/error.hpp"

namespace esg::cpu {
namespace {

template <int64_t B>
void concat_channels_blocked(const eval::KernelCall& c) {
  const eval::TensorRef& y = *c.out[0];
  const int64_t images = y.shape[0], element = static_cast<int64_t>(ir::dtype_size(y.dtype));
  int64_t inner = 1;
  for (size_t d = 2; d < y.shape.rank(); ++d) inner *= y.shape[d];
  const int64_t image_bytes = (y.shape[1] + B - 1) / B * inner * B * element;
  split_work(images, image_bytes / element, c.parallel, [&](int64_t first, int64_t last) {
    for (int64_t n = first; n < last; ++n) {
      uint8_t* out = y.bytes + n * image_bytes;
      for (const eval::TensorRef* x : c.in) {
        const int64_t bytes = (x->shape[1] + B - 1) / B * inner * B * element;
        std::memcpy(out, x->bytes + n * bytes, static_cast<size_t>(bytes));
        out += bytes;
      }
    }
  });
}

template <int64_t B>
void gather_channels_blocked(const eval::KernelCall& c) {
  const eval::TensorRef& x = *c.in[0];
  const eval::TensorRef& indices = *c.in[1];
  const eval::TensorRef& y = *c.out[0];
  const int64_t images = x.shape[0], channels = x.shape[1], picked = y.shape[1], pixels = x.shape[2] * x.shape[3];
  const int64_t x_blocks = (channels + B - 1) / B, y_blocks = (picked + B - 1) / B;
  std::vector<int64_t> from(static_cast<size_t>(y_blocks * B), -1);  // per result channel, its source's offset in an image; -1: padding
  for (int64_t k = 0; k < picked; ++k) {
    int64_t at = eval::load_i(indices, k);
    if (at < -channels || at >= channels)
      throw ir::Error(ir::ErrorCode::InvalidArgument, "gather: index " + std::to_string(at) + " is out of range for an axis of " +
                                                          std::to_string(channels));
    at += at < 0 ? channels : 0;
    from[static_cast<size_t>(k)] = at / B * pixels * B + at % B;
  }
  split_work(images * y_blocks, pixels * B, c.parallel, [&](int64_t first, int64_t last) {
    for (int64_t u = first; u < last; ++u) {
      const int64_t n = u / y_blocks, block = u % y_blocks;
      const float* src = x.data<float>() + n * x_blocks * pixels * B;
      float* dst = y.data<float>() + u * pixels * B;
      const int64_t* lanes = from.data() + block * B;
      for (int64_t p = 0; p < pixels; ++p, src += B, dst += B)
        for (int64_t lane = 0; lane < B; ++lane) dst[lane] = lanes[lane] < 0 ? 0.0f : src[lanes[lane]];
    }
  });
}

}  // namespace

eval::Kernel blocked_gather_kernel(const ir::Graph& g, const ir::Node& n, int64_t block) {
  if (n.op->kind != ir::OpKind::gather || ir::GatherAttrs(g, n).axis != 1 || (block != 8 && block != 16)) return nullptr;
  const auto in = g.inputs(n);
  if (g.values[in[0]].dtype != ir::DType::F32 || g.shape(in[0]).rank() != 4 || g.shape(in[1]).rank() != 1) return nullptr;
  return block == 8 ? gather_channels_blocked<8> : gather_channels_blocked<16>;
}

eval::Kernel blocked_concat_kernel(const ir::Graph& g, const ir::Node& n, int64_t block) {
  if (n.op->kind != ir::OpKind::concat || ir::ConcatAttrs(g, n).axis != 1 || (block != 8 && block != 16)) return nullptr;
  const auto in = g.inputs(n);
  for (size_t i = 0; i + 1 < in.size(); ++i)
    if (g.shape(in[i])[1] % block != 0) return nullptr;
  return block == 8 ? concat_channels_blocked<8> : concat_channels_blocked<16>;
}

}  // namespace esg::cpu
