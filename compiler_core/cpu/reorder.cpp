#include "cpu/reorder.hpp"

#include <algorithm>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>

#include "cpu/onednn.hpp"
#include "cpu/omp_threads.hpp"
#include "cpu/primitive_runner.hpp"
#include "cpu/split.hpp"

namespace esg::cpu {
namespace {

// Where element (n, c, i) of a [N, C, inner...] value lies in format `f`, in elements.
struct Layout {
  int64_t channels, inner, block, blocks;
  Layout(const ir::Shape& s, schedule::Format f)
      : channels(s.rank() >= 2 ? s[1] : 1), inner(1), block(f.kind == schedule::Format::BlockedChannels ? f.block : 1) {
    if (f.kind == schedule::Format::ChannelsLast) block = std::max<int64_t>(channels, 1);  // one block of them all
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

void zero_padding(const eval::TensorRef& t, schedule::Format f) {
  if (f.unpadded(t.shape)) return;
  const Layout l(t.shape, f);
  const size_t size = ir::dtype_size(t.dtype);
  const int64_t batch = t.shape[0], last = l.blocks - 1, used = l.channels - last * l.block;
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t i = 0; i < l.inner; ++i)
      std::memset(t.bytes + (((n * l.blocks + last) * l.inner + i) * l.block + used) * static_cast<int64_t>(size), 0,
                  static_cast<size_t>(l.block - used) * size);
}

namespace {

// Element by element, any formats and dtype.
void reorder_elements(const eval::TensorRef& from, schedule::Format from_format, const eval::TensorRef& to, schedule::Format to_format,
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

}  // namespace

// oneDNN's reorder of the whole value, or of one image at a time when its images are split in
// pieces over the model's pool (cpu/conv_primitive.hpp says why not on oneDNN's OpenMP team),
// each on one thread.
struct Reorder::Primitive {
  PrimitiveRunner reorder;
  int64_t images = 0, pieces = 1;
  int64_t from_image = 0, to_image = 0;  // bytes an image takes in each format (split only)
};

Reorder::Reorder(const ir::Shape& shape, ir::DType dtype, schedule::Format from, schedule::Format to, int threads) : from_(from), to_(to) {
  const dnnl::memory::format_tag a = onednn_tag(from, shape.rank()), b = onednn_tag(to, shape.rank());
  const bool typed = dtype == ir::DType::F32 || dtype == ir::DType::U8 || dtype == ir::DType::I8;  // oneDNN's reorders
  if (!typed || a == dnnl::memory::format_tag::undef || b == dnnl::memory::format_tag::undef || shape.num_elements() == 0) return;
  const dnnl::memory::data_type type = dtype == ir::DType::U8 ? dnnl::memory::data_type::u8
                                       : dtype == ir::DType::I8 ? dnnl::memory::data_type::s8
                                                                : dnnl::memory::data_type::f32;
  const int64_t size = static_cast<int64_t>(ir::dtype_size(dtype));
  // Pieces of whole images, as many as threads worth waking (split.hpp's rule); one image in one.
  const int64_t pieces = std::clamp<int64_t>(shape.num_elements() / kMinElementsPerThread, 1, std::min<int64_t>(shape[0], std::max(threads, 1)));
  try {
    auto p = std::make_unique<Primitive>();
    dnnl::memory::dims dims(shape.begin(), shape.begin() + shape.rank());
    p->images = dims[0];
    p->pieces = pieces;
    if (pieces > 1) dims[0] = 1;
    ir::Shape image = shape;
    image[0] = 1;
    p->from_image = from.physical_elements(image) * size;
    p->to_image = to.physical_elements(image) * size;
    const dnnl::memory::desc from_desc(dims, type, a), to_desc(dims, type, b);
    const OmpThreads scoped(1);
    p->reorder = PrimitiveRunner(dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), from_desc, cpu_engine(), to_desc)),
                                 {{DNNL_ARG_FROM, from_desc}, {DNNL_ARG_TO, to_desc}});
    primitive_ = std::move(p);
  } catch (const dnnl::error&) {
    // oneDNN cannot: element by element.
  }
}

Reorder::~Reorder() = default;
Reorder::Reorder(Reorder&&) noexcept = default;
Reorder& Reorder::operator=(Reorder&&) noexcept = default;

void Reorder::run(const eval::TensorRef& from, const eval::TensorRef& to, const eval::Parallel* parallel) const {
  if (!primitive_) return reorder_elements(from, from_, to, to_, parallel);
  const Primitive& p = *primitive_;
  auto piece = [&](int64_t i) {
    for (int64_t image = p.images * i / p.pieces; image < p.images * (i + 1) / p.pieces; ++image)
      p.reorder.execute({from.bytes + image * p.from_image, to.bytes + image * p.to_image});
  };
  if (p.pieces == 1)
    p.reorder.execute({from.bytes, to.bytes});
  else if (!parallel)
    for (int64_t i = 0; i < p.pieces; ++i) piece(i);
  else
    parallel->run(p.pieces, piece);
  zero_padding(to, to_);
}

}  // namespace esg::cpu
