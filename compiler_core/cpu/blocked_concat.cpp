// Concatenation along the channels of values in blocked channels (nChw8c, nChw16c): when every
// input but the last fills whole blocks, each image's result is its inputs' blocks one after
// the other, so the kernel is one copy per input and image (a DenseNet's concatenations stay
// blocked). The last input's padding channels, zeros, become the result's.
#include <cstring>

#include "cpu/split.hpp"
#include "eval/kernels.hpp"

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

}  // namespace

eval::Kernel blocked_concat_kernel(const ir::Graph& g, const ir::Node& n, int64_t block) {
  if (n.op->kind != ir::OpKind::concat || ir::ConcatAttrs(g, n).axis != 1 || (block != 8 && block != 16)) return nullptr;
  const auto in = g.inputs(n);
  for (size_t i = 0; i + 1 < in.size(); ++i)
    if (g.shape(in[i])[1] % block != 0) return nullptr;
  return block == 8 ? concat_channels_blocked<8> : concat_channels_blocked<16>;
}

}  // namespace esg::cpu
