// How a CPU kernel spreads its work over threads: ranges of independent units (chunks of
// elements, rows) in one piece per thread, and none below a size where waking threads costs more
// than it saves.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>

#include "eval/kernels.hpp"

namespace esg::cpu {

// Below this many elements per thread a kernel stays on one thread.
constexpr int64_t kMinElementsPerThread = 64 * 1024;

// Below this many multiply-adds a piece a oneDNN primitive (a convolution, a product with constant
// weights) stays whole: a piece handed to a pool thread pays its hand-off (a few microseconds
// while the workers spin) and reads its operands into another core's cache. Chosen among 1M,
// 2M and 4M on EfficientNet-B1, MobileNet-V3 and ShuffleNet-V2 (bench/RESULTS.md).
constexpr int64_t kMinMacsPerPiece = int64_t{1} << 20;

// A product with constant weights splits from half that: its pieces read weights packed once and
// kept in cache across calls (a GRU's step, 8 x 256 x 768, took 45 us whole, bench/RESULTS.md).
constexpr int64_t kMinProductMacsPerPiece = int64_t{1} << 19;

// The pieces for `macs` multiply-adds on at most `threads` threads, at least `per_piece` each.
inline int pieces_for_macs(double macs, int threads, int64_t per_piece = kMinMacsPerPiece) {
  return static_cast<int>(std::clamp<double>(macs / static_cast<double>(per_piece), 1, std::max(threads, 1)));
}

// piece(begin, end) over the units [0, units), each of about `unit_elements` elements: one
// contiguous range per thread of `parallel` (none: a single range on the calling thread). A
// template, so that the common unsplit call builds no std::function (a heap allocation).
template <class Piece>
void split_work(int64_t units, int64_t unit_elements, const eval::Parallel* parallel, Piece&& piece) {
  const int64_t most = parallel ? parallel->threads() : 1;
  const int64_t pieces = std::max<int64_t>(1, std::min({most, units, units * unit_elements / kMinElementsPerThread}));
  if (pieces == 1) return piece(int64_t{0}, units);
  parallel->run(pieces, [&](int64_t i) { piece(units * i / pieces, units * (i + 1) / pieces); });
}

}  // namespace esg::cpu
