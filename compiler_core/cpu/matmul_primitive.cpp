#include "cpu/matmul_primitive.hpp"

#include <algorithm>
#include <oneapi/dnnl/dnnl.hpp>

#include "cpu/omp_threads.hpp"
#include "cpu/onednn.hpp"
#include "cpu/primitive_runner.hpp"
#include "ir/error.hpp"
#include "ir/op_attrs.gen.hpp"

namespace esg::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

// The primitive for one count of rows, with its bf16 rounding of A's rows.
struct ForRows {
  int64_t rows = 0;
  PrimitiveRunner product;
  PrimitiveRunner round_rows;  // bf16: A's f32 rows to bf16
  size_t scratchpad_bytes = 0, rounded_bytes = 0;
};

}  // namespace

struct MatmulPrimitive::Impl {
  int64_t k = 0, n = 0;
  std::vector<uint8_t> weights;  // in the layout every ForRows' kernel wants
  std::vector<ForRows> by_rows;
  std::string implementation;
  bool bf16 = false;
};

MatmulPrimitive::MatmulPrimitive(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MatmulPrimitive::~MatmulPrimitive() = default;

bool MatmulPrimitive::takes(const ir::Graph& g, const ir::Node& n) {
  if (n.op->kind != ir::OpKind::matmul) return false;
  const auto in = g.inputs(n);
  const ir::NodeId producer = g.values[in[1]].producer;
  const ir::MatmulAttrs attrs(g, n);
  return g.values[in[0]].dtype == ir::DType::F32 && g.values[in[1]].dtype == ir::DType::F32 && !attrs.transpose_a &&
         g.shape(in[0]).rank() >= 2 && g.shape(in[1]).rank() == 2 && producer != ir::kNone && g.nodes[producer].blob != ir::kNone &&
         g.shape(n.first_output).num_elements() > 0 && g.shape(in[0])[g.shape(in[0]).rank() - 1] > 0;
}

std::unique_ptr<MatmulPrimitive> MatmulPrimitive::make(const ir::Graph& g, const ir::Node& n, std::vector<int64_t> row_counts, bool bf16,
                                                       std::string& why_not) {
  if (!takes(g, n)) {
    why_not = "not an f32 product with constant 2-D weights";
    return nullptr;
  }
  const auto in = g.inputs(n);
  const ir::Shape b = g.shape(in[1]);
  const bool transpose_b = ir::MatmulAttrs(g, n).transpose_b;
  const int64_t k = transpose_b ? b[1] : b[0], columns = transpose_b ? b[0] : b[1];
  const dt operands = bf16 ? dt::bf16 : dt::f32;
  std::sort(row_counts.begin(), row_counts.end());
  row_counts.erase(std::unique(row_counts.begin(), row_counts.end()), row_counts.end());
  try {
    auto impl = std::make_unique<Impl>();
    impl->k = k;
    impl->n = columns;
    impl->bf16 = bf16;
    const OmpThreads scoped(1);
    memory::desc weights;  // the first primitive's choice, which the others are made to take
    for (const int64_t rows : row_counts) {
      const memory::desc a({rows, k}, operands, tag::ab), c({rows, columns}, dt::f32, tag::ab);
      const memory::desc w = weights ? weights : memory::desc({k, columns}, operands, tag::any);
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, w, c), attr, cpu_engine());
      const std::string implementation = pd.impl_info_str();
      if (implementation.rfind("ref", 0) == 0) {
        why_not = "oneDNN has only its reference kernel (" + implementation + ")";
        return nullptr;
      }
      if (!weights) {
        weights = pd.weights_desc();
        impl->implementation = implementation;
      }
      ForRows f;
      f.rows = rows;
      f.scratchpad_bytes = pd.scratchpad_desc().get_size();
      f.product = PrimitiveRunner(dnnl::matmul(pd), {{DNNL_ARG_SRC, pd.src_desc()}, {DNNL_ARG_WEIGHTS, weights},
                                                    {DNNL_ARG_DST, pd.dst_desc()}, {DNNL_ARG_SCRATCHPAD, pd.scratchpad_desc()}});
      if (bf16) {
        const memory::desc f32_rows({rows, k}, dt::f32, tag::ab);
        f.round_rows = PrimitiveRunner(dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), f32_rows, cpu_engine(), a)),
                                       {{DNNL_ARG_FROM, f32_rows}, {DNNL_ARG_TO, a}});
        f.rounded_bytes = (a.get_size() + 63) / 64 * 64;
      }
      impl->by_rows.push_back(std::move(f));
    }
    // The constant weights, once, into that layout (a transposed B is [N, K] row-major: K·N's "ba").
    impl->weights.resize(weights.get_size());
    const memory::desc plain({k, columns}, dt::f32, transpose_b ? tag::ba : tag::ab);
    const uint8_t* constant = g.blobs[g.nodes[g.values[in[1]].producer].blob]->data();
    memory from(plain, cpu_engine(), const_cast<uint8_t*>(constant)), to(weights, cpu_engine(), impl->weights.data());
    dnnl::stream stream(cpu_engine());
    dnnl::reorder(from, to).execute(stream, from, to);
    stream.wait();
    return std::unique_ptr<MatmulPrimitive>(new MatmulPrimitive(std::move(impl)));
  } catch (const dnnl::error& e) {
    why_not = std::string("oneDNN: ") + e.what();
    return nullptr;
  }
}

void MatmulPrimitive::rows(const float* a, int64_t first, int64_t last, float* out) const {
  const Impl& p = *impl_;
  const auto f = std::find_if(p.by_rows.begin(), p.by_rows.end(), [&](const ForRows& r) { return r.rows == last - first; });
  if (f == p.by_rows.end())
    throw ir::Error(ir::ErrorCode::Internal, "cpu: a matmul primitive asked for " + std::to_string(last - first) + " rows, made for others");
  // The thread's scratchpad and rounded rows, kept between calls: a run allocates nothing once
  // each thread has seen the largest.
  thread_local std::vector<uint8_t> working;
  if (working.size() < f->scratchpad_bytes + f->rounded_bytes + 64) working.resize(f->scratchpad_bytes + f->rounded_bytes + 64);
  uint8_t* rounded = working.data() + (64 - reinterpret_cast<uintptr_t>(working.data()) % 64) % 64;
  const float* source = a + first * p.k;
  const void* src = source;
  if (p.bf16) {
    f->round_rows.execute({source, rounded});
    src = rounded;
  }
  f->product.execute({src, p.weights.data(), out, rounded + f->rounded_bytes});
}

const std::string& MatmulPrimitive::implementation() const { return impl_->implementation; }

bool MatmulPrimitive::bf16() const { return impl_->bf16; }

std::vector<int64_t> share_counts(int64_t rows, int64_t pieces) {
  std::vector<int64_t> counts;
  for (int64_t p = 0; p < pieces; ++p) counts.push_back(rows * (p + 1) / pieces - rows * p / pieces);
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  counts.erase(std::remove(counts.begin(), counts.end(), 0), counts.end());
  return counts;
}

}  // namespace esg::cpu
