#include "cpu/reorder.hpp"

#include <cstring>

#include "cpu/split.hpp"

namespace esg::cpu {
namespace {

// Where element (n, c, i) of a [N, C, inner...] value lies in format `f`, in elements.
struct Layout {
  int64_t channels, inner, block, blocks;
  Layout(const ir::Shape& s, plan::Format f)
      : channels(s.rank() >= 2 ? s[1] : 1), inner(1), block(f.kind == plan::Format::BlockedChannels ? f.block : 1) {
    for (size_t d = 2; d < s.rank(); ++d) inner *= s[d];
    blocks = (channels + block - 1) / block;
  }
  int64_t at(int64_t n, int64_t c, int64_t i) const { return ((n * blocks + c / block) * inner + i) * block + c % block; }
};

template <size_t kBytes>
void copy_elements(const eval::TensorRef& from, const Layout& a, const eval::TensorRef& to, const Layout& b, int64_t batch,
                   const eval::Parallel* parallel) {
  // One unit of work per (image, channel): its `inner` elements, strided by each side's block.
  split_work(batch * a.channels, a.inner, parallel, [&](int64_t first, int64_t last) {
    for (int64_t u = first; u < last; ++u) {
      const int64_t n = u / a.channels, c = u % a.channels;
      const uint8_t* src = from.bytes + a.at(n, c, 0) * static_cast<int64_t>(kBytes);
      uint8_t* dst = to.bytes + b.at(n, c, 0) * static_cast<int64_t>(kBytes);
      const int64_t src_step = a.block * static_cast<int64_t>(kBytes), dst_step = b.block * static_cast<int64_t>(kBytes);
      for (int64_t i = 0; i < a.inner; ++i) std::memcpy(dst + i * dst_step, src + i * src_step, kBytes);
    }
  });
}

}  // namespace

void zero_padding(const eval::TensorRef& t, plan::Format f) {
  if (f.unpadded(t.shape)) return;
  const Layout l(t.shape, f);
  const size_t size = ir::dtype_size(t.dtype);
  const int64_t batch = t.shape[0], last = l.blocks - 1, used = l.channels - last * l.block;
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t i = 0; i < l.inner; ++i)
      std::memset(t.bytes + (((n * l.blocks + last) * l.inner + i) * l.block + used) * static_cast<int64_t>(size), 0,
                  static_cast<size_t>(l.block - used) * size);
}

void reorder(const eval::TensorRef& from, plan::Format from_format, const eval::TensorRef& to, plan::Format to_format,
             const eval::Parallel* parallel) {
  const Layout a(from.shape, from_format), b(to.shape, to_format);
  const int64_t batch = from.shape.rank() >= 1 ? from.shape[0] : 1;
  switch (ir::dtype_size(from.dtype)) {
    case 1: copy_elements<1>(from, a, to, b, batch, parallel); break;
    case 2: copy_elements<2>(from, a, to, b, batch, parallel); break;
    case 4: copy_elements<4>(from, a, to, b, batch, parallel); break;
    default: copy_elements<8>(from, a, to, b, batch, parallel); break;
  }
  zero_padding(to, to_format);
}

}  // namespace esg::cpu
