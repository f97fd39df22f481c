#include "cpu/matmul_primitive.hpp"

#include <algorithm>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>

#include "cpu/omp_threads.hpp"
#include "cpu/onednn.hpp"
#include "cpu/packed_gemm.hpp"
#include "cpu/primitive_runner.hpp"
#include "cpu/row_product.hpp"
#include "ir/error.hpp"
#include "ir/op_attrs.gen.hpp"

namespace esg::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

// A share of the result's columns: its weights, reordered once into the layout its kernels want
// (shared by the primitives of the same product at other sizes).
struct Columns {
  int64_t first = 0, count = 0;
  memory::desc layout;
  ir::Blob weights;
  bool in_place = false;  // `weights` is the constant itself: the kernel reads a plain layout
};

// Whether oneDNN's chosen layout is a plain matrix (gemm's, on CPUs without brgemm), which the
// constant already is, so its kernel can read the constant where it lies, strides and all.
bool is_plain(const memory::desc& d) {
  return d.data.format_kind == dnnl_blocked && d.data.format_desc.blocking.inner_nblks == 0;
}

// Whether oneDNN's kernel for an f32 product of `rows` x k by k x n takes plain weights: its
// gemm, which packs them again at every call.
bool onednn_packs_per_call(int64_t rows, int64_t k, int64_t n) {
  const memory::desc a({rows, k}, dt::f32, tag::ab), w({k, n}, dt::f32, tag::any), result({rows, n}, dt::f32, tag::ab);
  return is_plain(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, w, result), cpu_engine()).weights_desc());
}

// The primitives for one count of rows: one per share of columns, and the bf16 rounding of A's rows.
struct ForRows {
  int64_t rows = 0;
  std::vector<PrimitiveRunner> products;  // per share of columns
  std::vector<size_t> scratchpad_bytes;
  PrimitiveRunner round_rows;  // bf16: A's f32 rows to bf16
  size_t rounded_bytes = 0;
  // Each share's result dense in a buffer, then copied to its columns: oneDNN's brgemm kernels
  // take no result rows farther apart than the share (its gemm fallback repacks the weights
  // at every call).
  bool staged = false;
};

// A thread's buffer of at least `bytes`, 64-byte aligned, kept between calls (a run allocates
// nothing once each thread has seen the largest).
uint8_t* aligned_buffer(std::vector<uint8_t>& buffer, size_t bytes) {
  if (buffer.size() < bytes + 64) buffer.resize(bytes + 64);
  return buffer.data() + (64 - reinterpret_cast<uintptr_t>(buffer.data()) % 64) % 64;
}

}  // namespace

struct MatmulPrimitive::Impl {
  int64_t k = 0, n = 0;
  std::vector<Columns> columns;
  std::vector<ForRows> by_rows;
  std::string implementation;
  bool bf16 = false;
  bool transpose_b = false;
  Kernel kernel = Kernel::onednn;  // the kernels but oneDNN's make no primitives
  // One row on K x N weights splits its rows of K, not its columns, over the pool: each share
  // then streams one contiguous block of the weights (columns of a short row would interleave
  // two threads' reads row by row), the partial sums added after.
  int64_t depth_shares = 1;
};

MatmulPrimitive::MatmulPrimitive(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MatmulPrimitive::~MatmulPrimitive() = default;

bool MatmulPrimitive::packs_at_every_call(const ir::Graph& g, const ir::Node& n, bool bf16) {
  if (bf16 || !takes(g, n)) return false;
  const ir::Shape b = g.shape(g.inputs(n)[1]);
  const bool transpose_b = ir::MatmulAttrs(g, n).transpose_b;
  try {
    return onednn_packs_per_call(kPackedGemmRows + 1, transpose_b ? b[1] : b[0], transpose_b ? b[0] : b[1]);
  } catch (const dnnl::error&) {
    return false;
  }
}

bool MatmulPrimitive::takes(const ir::Graph& g, const ir::Node& n) {
  if (n.op->kind != ir::OpKind::matmul) return false;
  const auto in = g.inputs(n);
  const ir::NodeId producer = g.values[in[1]].producer;
  const ir::MatmulAttrs attrs(g, n);
  return g.values[in[0]].dtype == ir::DType::F32 && g.values[in[1]].dtype == ir::DType::F32 && !attrs.transpose_a &&
         g.shape(in[0]).rank() >= 2 && g.shape(in[1]).rank() == 2 && producer != ir::kNone && g.nodes[producer].blob != ir::kNone &&
         g.shape(n.first_output).num_elements() > 0 && g.shape(in[0])[g.shape(in[0]).rank() - 1] > 0;
}

std::unique_ptr<MatmulPrimitive> MatmulPrimitive::make(const ir::Graph& g, const ir::Node& n, std::vector<int64_t> row_counts,
                                                       int column_shares, bool bf16, const PackWeights& pack, std::string& why_not,
                                                       const MatmulPrimitive* like) {
  if (!takes(g, n)) {
    why_not = "not an f32 product with constant 2-D weights";
    return nullptr;
  }
  const auto in = g.inputs(n);
  const ir::Shape b = g.shape(in[1]);
  const bool transpose_b = ir::MatmulAttrs(g, n).transpose_b;
  const int64_t k = transpose_b ? b[1] : b[0], width = transpose_b ? b[0] : b[1];
  const dt operands = bf16 ? dt::bf16 : dt::f32;
  std::sort(row_counts.begin(), row_counts.end());
  row_counts.erase(std::unique(row_counts.begin(), row_counts.end()), row_counts.end());
  // Shares of whole 16-column blocks (brgemm's), the last one taking the rest.
  const int64_t blocks = (width + 15) / 16, shares = std::clamp<int64_t>(column_shares, 1, blocks);
  try {
    auto impl = std::make_unique<Impl>();
    impl->k = k;
    impl->n = width;
    impl->bf16 = bf16;
    // One row a call (a decoder's token) streams the weights: our kernel reads them in place, in
    // their order (row_product.hpp). Calls of a few rows on our packed GEMM where oneDNN would
    // pack the weights at each: there the packing costs as much as the product. Beyond
    // kPackedGemmRows oneDNN's gemm is about as fast, and reads the constant where it lies.
    impl->transpose_b = transpose_b;
    if (!bf16 && row_product::available() && row_counts == std::vector<int64_t>{1})
      impl->kernel = Kernel::row_product;
    else if (!bf16 && packed_gemm::available() && row_counts.back() <= kPackedGemmRows && row_counts.back() > 1 &&
             onednn_packs_per_call(row_counts.front(), k, width))
      impl->kernel = Kernel::packed_gemm;
    if (impl->kernel == Kernel::row_product && !transpose_b) impl->depth_shares = std::min(shares, k);
    const int64_t column_shares_made = impl->depth_shares > 1 ? 1 : shares;
    const bool reuse = like && like->impl_->k == k && like->impl_->n == width && like->impl_->bf16 == bf16 &&
                       like->impl_->kernel == impl->kernel && static_cast<int64_t>(like->impl_->columns.size()) == column_shares_made;
    if (reuse) impl->columns = like->impl_->columns;  // its layouts, which these primitives take, and its weights
    for (int64_t s = 0; s < column_shares_made && !reuse; ++s) {
      const int64_t first = 16 * (blocks * s / column_shares_made), last = std::min(width, 16 * (blocks * (s + 1) / column_shares_made));
      impl->columns.push_back({first, last - first, {}, {}});
    }
    const OmpThreads scoped(1);
    if (impl->kernel == Kernel::packed_gemm) impl->implementation = "packed:avx2";
    if (impl->kernel == Kernel::row_product) impl->implementation = "row:avx2";
    for (const int64_t rows : row_counts) {
      ForRows f;
      f.rows = rows;
      if (impl->kernel != Kernel::onednn) {  // no primitives: the count checks the calls
        impl->by_rows.push_back(std::move(f));
        continue;
      }
      f.staged = shares > 1 && rows > 1;
      const memory::desc a({rows, k}, operands, tag::ab);
      for (Columns& c : impl->columns) {
        const memory::desc result({rows, c.count}, dt::f32, memory::dims{f.staged ? c.count : width, 1});
        const memory::desc w = c.layout ? c.layout : memory::desc({k, c.count}, operands, tag::any);
        dnnl::primitive_attr attr;
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, w, result), attr, cpu_engine());
        const std::string implementation = pd.impl_info_str();
        if (implementation.rfind("ref", 0) == 0) {
          why_not = "oneDNN has only its reference kernel (" + implementation + ")";
          return nullptr;
        }
        if (!c.layout && !bf16 && is_plain(pd.weights_desc())) {
          // The constant's own layout: columns [first, first + count) of K × N, or of [N, K] transposed.
          const memory::desc in_place({k, c.count}, dt::f32, transpose_b ? memory::dims{1, k} : memory::dims{width, 1});
          dnnl::matmul::primitive_desc direct(dnnl::matmul::desc(a, in_place, result), attr, cpu_engine());
          if (direct.impl_info_str() == implementation) {
            pd = direct;
            c.in_place = true;
          }
        }
        if (!c.layout) c.layout = pd.weights_desc();  // the first count's choice, which the others take
        if (impl->implementation.empty()) impl->implementation = implementation;
        f.products.emplace_back(dnnl::matmul(pd), std::vector<std::pair<int, memory::desc>>{{DNNL_ARG_SRC, pd.src_desc()},
                                                                                          {DNNL_ARG_WEIGHTS, c.layout},
                                                                                          {DNNL_ARG_DST, pd.dst_desc()},
                                                                                          {DNNL_ARG_SCRATCHPAD, pd.scratchpad_desc()}});
        f.scratchpad_bytes.push_back(pd.scratchpad_desc().get_size());
      }
      if (bf16) {
        const memory::desc f32_rows({rows, k}, dt::f32, tag::ab);
        f.round_rows = PrimitiveRunner(dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), f32_rows, cpu_engine(), a)),
                                       {{DNNL_ARG_FROM, f32_rows}, {DNNL_ARG_TO, a}});
        f.rounded_bytes = a.get_size();
      }
      impl->by_rows.push_back(std::move(f));
    }
    // Each share's constant weights, once, into its layout: columns [first, first + count) of the
    // K × N matrix (a transposed B is [N, K] row-major: its rows, K apart).
    const ir::Blob& blob = g.blobs[g.nodes[g.values[in[1]].producer].blob];
    const float* constant = reinterpret_cast<const float*>(blob->data());
    dnnl::stream stream(cpu_engine());
    for (size_t share = 0; share < impl->columns.size() && !reuse; ++share) {
      Columns& c = impl->columns[share];
      const float* first = constant + (transpose_b ? c.first * k : c.first);
      if (impl->kernel == Kernel::packed_gemm) {
        const PackedFrom from{first, "packed_gemm " + std::to_string(k) + "x" + std::to_string(c.count) + (transpose_b ? " of [N, K]" : " of [K, N]")};
        c.weights = pack(static_cast<int>(share), packed_gemm::packed_bytes(k, c.count), from, [&](uint8_t* into) {
          packed_gemm::pack(first, transpose_b ? k : width, transpose_b, k, c.count, reinterpret_cast<float*>(into));
        });
        continue;
      }
      c.in_place = c.in_place || impl->kernel == Kernel::row_product;
      if (c.in_place) {  // no copy: the share's first weight, the constant kept alive by its bytes
        const size_t spanned = static_cast<size_t>(transpose_b ? c.count * k : (k - 1) * width + c.count) * sizeof(float);
        c.weights = std::make_shared<const ir::Bytes>(reinterpret_cast<const uint8_t*>(first), spanned, blob);
        continue;
      }
      const memory::desc plain({k, c.count}, dt::f32, transpose_b ? memory::dims{1, k} : memory::dims{width, 1});
      const std::string into_layout = layout_text(c.layout.data);
      const PackedFrom from{first, into_layout.empty() ? "" : layout_text(plain.data) + " to " + into_layout};
      c.weights = pack(static_cast<int>(share), c.layout.get_size(), from, [&](uint8_t* into) {
        memory from(plain, cpu_engine(), const_cast<float*>(first));
        memory to(c.layout, cpu_engine(), into);
        dnnl::reorder(from, to).execute(stream, from, to);
        stream.wait();
      });
    }
    return std::unique_ptr<MatmulPrimitive>(new MatmulPrimitive(std::move(impl)));
  } catch (const dnnl::error& e) {
    why_not = std::string("oneDNN: ") + e.what();
    return nullptr;
  }
}

void MatmulPrimitive::rows(const float* a, int64_t first, int64_t last, float* out, const eval::Parallel* parallel) const {
  const Impl& p = *impl_;
  const auto f = std::find_if(p.by_rows.begin(), p.by_rows.end(), [&](const ForRows& r) { return r.rows == last - first; });
  if (f == p.by_rows.end())
    throw ir::Error(ir::ErrorCode::Internal, "cpu: a matmul primitive asked for " + std::to_string(last - first) + " rows, made for others");
  const void* src = a + first * p.k;
  if (p.bf16) {
    thread_local std::vector<uint8_t> rounded;
    uint8_t* to = aligned_buffer(rounded, f->rounded_bytes);
    f->round_rows.execute({src, to});
    src = to;
  }
  if (p.depth_shares > 1) {  // one row, K split: a partial row a share, added in order after
    const float* x = a + first * p.k;
    const float* w = reinterpret_cast<const float*>(p.columns[0].weights->data());
    thread_local std::vector<float> partials;
    partials.resize(static_cast<size_t>((p.depth_shares - 1) * p.n));
    float* partial = partials.data();
    auto depth_share = [&](int64_t s) {
      const int64_t k0 = p.k * s / p.depth_shares, k1 = p.k * (s + 1) / p.depth_shares;
      row_product::multiply(x + k0, k1 - k0, w + k0 * p.n, p.n, false, p.n, s == 0 ? out : partial + (s - 1) * p.n);
    };
    if (parallel)
      parallel->run(p.depth_shares, depth_share);
    else
      for (int64_t s = 0; s < p.depth_shares; ++s) depth_share(s);
    for (int64_t s = 1; s < p.depth_shares; ++s)
      for (int64_t j = 0; j < p.n; ++j) out[j] += partial[(s - 1) * p.n + j];
    return;
  }
  auto share = [&](int64_t s) {
    const Columns& c = p.columns[static_cast<size_t>(s)];
    if (p.kernel == Kernel::row_product)
      return row_product::multiply(a + first * p.k, p.k, reinterpret_cast<const float*>(c.weights->data()), p.transpose_b ? p.k : p.n,
                                   p.transpose_b, c.count, out + c.first);
    if (p.kernel == Kernel::packed_gemm)
      return packed_gemm::multiply(a + first * p.k, p.k, f->rows, reinterpret_cast<const float*>(c.weights->data()), p.k, c.count,
                                   out + c.first, p.n);
    thread_local std::vector<uint8_t> scratchpad, staging;
    const size_t row_bytes = static_cast<size_t>(c.count) * sizeof(float);
    float* result = f->staged ? reinterpret_cast<float*>(aligned_buffer(staging, static_cast<size_t>(f->rows) * row_bytes)) : out + c.first;
    f->products[static_cast<size_t>(s)].execute(
        {src, c.weights->data(), result, aligned_buffer(scratchpad, f->scratchpad_bytes[static_cast<size_t>(s)])});
    if (f->staged)
      for (int64_t r = 0; r < f->rows; ++r) std::memcpy(out + r * p.n + c.first, result + r * c.count, row_bytes);
  };
  const int64_t shares = static_cast<int64_t>(p.columns.size());
  if (shares == 1 || !parallel)
    for (int64_t s = 0; s < shares; ++s) share(s);
  else
    parallel->run(shares, share);
}

const std::string& MatmulPrimitive::implementation() const { return impl_->implementation; }

bool MatmulPrimitive::bf16() const { return impl_->bf16; }

MatmulPrimitive::Kernel MatmulPrimitive::kernel() const { return impl_->kernel; }

int MatmulPrimitive::column_shares() const { return static_cast<int>(std::max<int64_t>(impl_->depth_shares, static_cast<int64_t>(impl_->columns.size()))); }

int MatmulPrimitive::weights_in_place() const {
  return static_cast<int>(std::count_if(impl_->columns.begin(), impl_->columns.end(), [](const Columns& c) { return c.in_place; }));
}

std::vector<int64_t> share_counts(int64_t rows, int64_t pieces) {
  std::vector<int64_t> counts;  // (make keeps each count once)
  for (int64_t p = 0; p < pieces; ++p) counts.push_back(rows * (p + 1) / pieces - rows * p / pieces);
  return counts;
}

}  // namespace esg::cpu
