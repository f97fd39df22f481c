#include "schedule/format.hpp"

namespace esg::schedule {

int64_t Format::physical_elements(const ir::Shape& shape) const {
  if (kind != BlockedChannels || shape.rank() < 2) return shape.num_elements();
  const int64_t channels = shape[1];
  if (channels == 0) return 0;
  return shape.num_elements() / channels * ((channels + block - 1) / block * block);
}

ir::Shape Format::physical_shape(const ir::Shape& shape) const {
  // A single element is read as one in every format (element 0 is the value; runtime/formats).
  if (kind == RowMajor || shape.rank() < 2 || shape.num_elements() == 1) return shape;
  int64_t inner = 1;
  for (size_t i = 2; i < shape.rank(); ++i) inner *= shape[i];
  if (kind == ChannelsLast) return ir::Shape{shape[0], 1, inner, shape[1]};
  return ir::Shape{shape[0], (shape[1] + block - 1) / block, inner, block};
}

bool Format::unpadded(const ir::Shape& shape) const { return kind != BlockedChannels || shape.rank() < 2 || shape[1] % block == 0; }

std::string Format::name(size_t rank) const {
  if (kind == RowMajor) return "row-major";
  static const char* const kSpatial[] = {"", "", "", "w", "hw", "dhw"};
  if (kind == ChannelsLast) return std::string("n") + (rank < 6 ? kSpatial[rank] : "…") + "c";
  return std::string("nC") + (rank < 6 ? kSpatial[rank] : "…") + std::to_string(block) + "c";
}

}  // namespace esg::schedule
