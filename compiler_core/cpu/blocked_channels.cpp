// Ops that move whole channels, over values in blocked channels (nChw8c, nChw16c), so that the
// values around them stay blocked. Concatenation: when every input but the last fills whole
// blocks, each image's result is its inputs' blocks one after the other, one copy per input and
// image (a DenseNet's concatenations); the last input's padding channels, zeros, become the
// result's. Otherwise (f32), and for gathers of channels (a ShuffleNet's channel shuffle and its
// halves, as the passes restate them), each result block's lanes are picked from where they
// lie, pixel by pixel.
#include <cstring>
#include <string>
#include <utility>
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

// Result channel k is channel from[k].second of source from[k].first (source -1: a padding
// channel, zero); the sources f32 in blocks of B, as the result. Pixel by pixel, each result
// block's lanes picked from where they lie.
template <int64_t B>
void pick_channels(const std::vector<const eval::TensorRef*>& sources, const std::vector<std::pair<int, int64_t>>& from,
                   const eval::TensorRef& y, const eval::Parallel* parallel) {
  const int64_t images = y.shape[0], blocks = (y.shape[1] + B - 1) / B, pixels = y.shape[2] * y.shape[3];
  split_work(images * blocks, pixels * B, parallel, [&](int64_t first, int64_t last) {
    for (int64_t u = first; u < last; ++u) {
      const int64_t n = u / blocks, block = u % blocks;
      const float* lanes[B];
      for (int64_t lane = 0; lane < B; ++lane) {
        const auto [source, channel] = from[static_cast<size_t>(block * B + lane)];
        if (source < 0) {
          lanes[lane] = nullptr;
          continue;
        }
        const eval::TensorRef& x = *sources[static_cast<size_t>(source)];
        const int64_t x_blocks = (x.shape[1] + B - 1) / B;
        lanes[lane] = x.data<float>() + ((n * x_blocks + channel / B) * pixels) * B + channel % B;
      }
      float* dst = y.data<float>() + u * pixels * B;
      for (int64_t p = 0; p < pixels; ++p, dst += B)
        for (int64_t lane = 0; lane < B; ++lane) dst[lane] = lanes[lane] ? lanes[lane][p * B] : 0.0f;
    }
  });
}

// A concatenation whose inputs do not all fill whole blocks: each result channel picked.
template <int64_t B>
void concat_channels_picked(const eval::KernelCall& c) {
  const eval::TensorRef& y = *c.out[0];
  std::vector<std::pair<int, int64_t>> from(static_cast<size_t>((y.shape[1] + B - 1) / B * B), {-1, 0});
  size_t k = 0;
  for (size_t i = 0; i < c.in.size(); ++i)
    for (int64_t j = 0; j < c.in[i]->shape[1]; ++j) from[k++] = {static_cast<int>(i), j};
  pick_channels<B>(c.in, from, y, c.parallel);
}

template <int64_t B>
void gather_channels_blocked(const eval::KernelCall& c) {
  const eval::TensorRef& x = *c.in[0];
  const eval::TensorRef& indices = *c.in[1];
  const eval::TensorRef& y = *c.out[0];
  const int64_t channels = x.shape[1], picked = y.shape[1];
  std::vector<std::pair<int, int64_t>> from(static_cast<size_t>((picked + B - 1) / B * B), {-1, 0});
  for (int64_t k = 0; k < picked; ++k) {
    int64_t at = eval::load_i(indices, k);
    if (at < -channels || at >= channels)
      throw ir::Error(ir::ErrorCode::InvalidArgument, "gather: index " + std::to_string(at) + " is out of range for an axis of " +
                                                          std::to_string(channels));
    from[static_cast<size_t>(k)] = {0, at < 0 ? at + channels : at};
  }
  pick_channels<B>({&x}, from, y, c.parallel);
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
  bool whole = true;
  for (size_t i = 0; i + 1 < in.size(); ++i) whole = whole && g.shape(in[i])[1] % block == 0;
  if (whole) return block == 8 ? concat_channels_blocked<8> : concat_channels_blocked<16>;
  if (g.values[n.first_output].dtype != ir::DType::F32 || g.shape(n.first_output).rank() != 4) return nullptr;
  return block == 8 ? concat_channels_picked<8> : concat_channels_picked<16>;
}

}  // namespace esg::cpu
