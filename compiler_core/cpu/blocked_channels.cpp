// Ops that move whole channels, over values in blocked channels (nChw8c, nChw16c), so that the
// values around them stay blocked. Concatenation: when every input but the last fills whole
// blocks, each image's result is its inputs' blocks one after the other, one copy per input and
// image (a DenseNet's concatenations); the last input's padding channels, zeros, become the
// result's. Otherwise (f32), and for gathers of channels (a ShuffleNet's channel shuffle and its
// halves, as the passes restate them), each result block's lanes are picked from where they
// lie: a vector permute per pixel when they lie in at most two source blocks.
#include <cstring>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif
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

// One result block's lanes, each from one of two source blocks a and b (lane index < B: a's,
// else b's lane index - B) or zero (keep bit clear), pixel by pixel: one permute of two vectors
// per pixel where the CPU has it (AVX-512 for blocks of 16, AVX2 for blocks of 8).
struct LanePermute {
  const float* a = nullptr;
  const float* b = nullptr;
  int32_t index[16] = {};
  uint32_t keep = 0;  // bit `lane`: the lane is picked, else zero
};

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f"))) void permute_pixels16(const LanePermute& m, int64_t pixels, float* dst) {
  const __m512i index = _mm512_loadu_si512(m.index);
  const __mmask16 keep = static_cast<__mmask16>(m.keep);
  const float* b = m.b ? m.b : m.a;
  for (int64_t p = 0; p < pixels; ++p)
    _mm512_storeu_ps(dst + p * 16, _mm512_maskz_permutex2var_ps(keep, _mm512_loadu_ps(m.a + p * 16), index, _mm512_loadu_ps(b + p * 16)));
}

__attribute__((target("avx2"))) void permute_pixels8(const LanePermute& m, int64_t pixels, float* dst) {
  const __m256i index = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m.index));
  int32_t from_b[8], keep[8];
  for (int lane = 0; lane < 8; ++lane) {
    from_b[lane] = m.index[lane] >= 8 ? -1 : 0;
    keep[lane] = (m.keep >> lane & 1) ? -1 : 0;
  }
  const __m256 use_b = _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(from_b)));
  const __m256 kept = _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(keep)));
  const float* b = m.b ? m.b : m.a;
  for (int64_t p = 0; p < pixels; ++p) {
    const __m256 from_a = _mm256_permutevar8x32_ps(_mm256_loadu_ps(m.a + p * 8), index);  // uses index mod 8
    const __m256 from_second = _mm256_permutevar8x32_ps(_mm256_loadu_ps(b + p * 8), index);
    _mm256_storeu_ps(dst + p * 8, _mm256_and_ps(_mm256_blendv_ps(from_a, from_second, use_b), kept));
  }
}
#endif

template <int64_t B>
void permute_pixels(const LanePermute& m, int64_t pixels, float* dst) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool vector = B == 16 ? __builtin_cpu_supports("avx512f") : __builtin_cpu_supports("avx2");
  if (vector) return B == 16 ? permute_pixels16(m, pixels, dst) : permute_pixels8(m, pixels, dst);
#endif
  for (int64_t p = 0; p < pixels; ++p)
    for (int64_t lane = 0; lane < B; ++lane) {
      const int32_t i = m.index[lane];
      dst[p * B + lane] = (m.keep >> lane & 1) ? (i < B ? m.a : m.b)[p * B + i % B] : 0.0f;
    }
}

// Result channel k is channel from[k].second of source from[k].first (source -1: a padding
// channel, zero); the sources f32 in blocks of B, as the result. Each result block's lanes as a
// permute of the two source blocks they come from (a shuffle's halves, a concatenation across
// a block boundary), else lane by lane.
template <int64_t B>
void pick_channels(const std::vector<const eval::TensorRef*>& sources, const std::vector<std::pair<int, int64_t>>& from,
                   const eval::TensorRef& y, const eval::Parallel* parallel) {
  const int64_t images = y.shape[0], blocks = (y.shape[1] + B - 1) / B, pixels = y.shape[2] * y.shape[3];
  split_work(images * blocks, pixels * B, parallel, [&](int64_t first, int64_t last) {
    for (int64_t u = first; u < last; ++u) {
      const int64_t n = u / blocks, block = u % blocks;
      LanePermute m;
      const float* lanes[B];
      bool two_blocks = true;
      for (int64_t lane = 0; lane < B; ++lane) {
        const auto [source, channel] = from[static_cast<size_t>(block * B + lane)];
        lanes[lane] = nullptr;
        if (source < 0) continue;
        const eval::TensorRef& x = *sources[static_cast<size_t>(source)];
        const int64_t x_blocks = (x.shape[1] + B - 1) / B;
        const float* start = x.data<float>() + (n * x_blocks + channel / B) * pixels * B;
        lanes[lane] = start + channel % B;
        if (!m.a || m.a == start) m.a = start;
        else if (!m.b || m.b == start) m.b = start;
        else two_blocks = false;
        m.index[lane] = static_cast<int32_t>(channel % B + (start == m.a ? 0 : B));
        m.keep |= 1u << lane;
      }
      float* dst = y.data<float>() + u * pixels * B;
      if (two_blocks && m.a) {
        permute_pixels<B>(m, pixels, dst);
        continue;
      }
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
