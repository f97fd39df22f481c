// How a value's elements lie in memory, apart from its logical shape: its physical format.
// Row-major is the logical order itself. A blocked-channel format stores axis 1 (the channels
// of NCHW and the like) in blocks of `block` channels, innermost: nChw8c is
// [N][ceil(C/8)][H][W][8]. The channel count is padded to a whole block, and the padding holds
// zeros, so a kernel may compute whole blocks (oneDNN's nChw8c/nChw16c; Ascend's NC1HWC0 is the
// same layout with C0 = 16). Channels last (NHWC) stores the channels innermost, unblocked:
// [N][H][W][C], the layout of oneDNN's int8 convolutions, which quantized activations keep
// between them.
#pragma once
#include <cstdint>
#include <string>

#include "ir/shape.hpp"

namespace esg::schedule {

struct Format {
  enum Kind : uint8_t { RowMajor, BlockedChannels, ChannelsLast } kind = RowMajor;
  int64_t block = 1;  // channels per block (BlockedChannels)

  static Format row_major() { return {}; }
  static Format blocked_channels(int64_t block) { return {BlockedChannels, block}; }
  static Format channels_last() { return {ChannelsLast, 1}; }
  bool operator==(const Format& o) const { return kind == o.kind && block == o.block; }
  bool operator!=(const Format& o) const { return !(*this == o); }
  // Elements in memory for `shape`: the logical count, the channels padded to a whole block.
  int64_t physical_elements(const ir::Shape& shape) const;
  // The elements in memory as a shape: [N, ⌈C/block⌉, the other axes' product, block] for a
  // blocked format (rank 2 and up; channels last is one block of every channel), `shape`
  // itself for row-major. Elementwise kernels broadcast
  // over these as over any shape: a per-channel value [N or 1, C, 1, 1] becomes
  // [N or 1, ⌈C/block⌉, 1, block] beside [N, ⌈C/block⌉, H·W, block].
  ir::Shape physical_shape(const ir::Shape& shape) const;
  // Whether the padding of `shape` in this format is empty (the channels fill whole blocks).
  bool unpadded(const ir::Shape& shape) const;
  // "row-major", or oneDNN's name for the format at this rank: "nChw8c", "nCw16c", "nhwc", ….
  std::string name(size_t rank) const;
};

}  // namespace esg::schedule
