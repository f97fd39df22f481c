#include "cpu/conv_primitive.hpp"

#include <algorithm>
#include <mutex>
#include <optional>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

#include "cpu/conv.hpp"
#include "cpu/onednn.hpp"
#include "cpu/gemm.hpp"
#include "cpu/omp_threads.hpp"
#include "ir/op_attrs.gen.hpp"

namespace esg::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

// A constant's bytes, or null.
const uint8_t* constant_bytes(const ir::Graph& g, ir::ValueId v) {
  const ir::NodeId p = v == ir::kNone ? ir::kNone : g.values[v].producer;
  return p == ir::kNone || g.nodes[p].blob == ir::kNone ? nullptr : g.blobs[g.nodes[p].blob]->data();
}

// The filters' dimensions as oneDNN takes them: OIHW, or GOIHW when grouped.
memory::dims filter_dims(const ir::Shape& w, int64_t groups) {
  return groups == 1 ? memory::dims{w[0], w[1], w[2], w[3]} : memory::dims{groups, w[0] / groups, w[1], w[2], w[3]};
}

// The threads a convolution gets: as a GEMM of as many multiply-adds would (gemm.hpp).
int threads_for(const ir::Graph& g, const ir::Node& n, int threads) {
  const ir::Shape w = g.shape(g.operands[n.first_input + 1]);
  return threads_for_macs(static_cast<double>(g.shape(n.first_output).num_elements()) * static_cast<double>(w[1] * w[2] * w[3]), threads);
}

// oneDNN's description of node `n` in `format` with `post_ops` for `threads` threads (set for
// OpenMP while oneDNN plans its work split), its operands f32 or bf16, or nullopt and why not.
std::optional<dnnl::convolution_forward::primitive_desc> describe(const ir::Graph& g, const ir::Node& n, plan::Format src_format,
                                                                  plan::Format dst_format, const std::vector<PostOp>& post_ops,
                                                                  int threads, bool bf16, std::string& why_not) {
  const tag src_tag = onednn_tag(src_format, 4), dst_tag = onednn_tag(dst_format, 4);
  if (src_tag == tag::undef || dst_tag == tag::undef) {
    why_not = "no oneDNN layout for " + (src_tag == tag::undef ? src_format : dst_format).name(4);
    return std::nullopt;
  }
  const auto in = g.inputs(n);
  const ir::Shape x = g.shape(in[0]), w = g.shape(in[1]), y = g.shape(n.first_output);
  const ConvParams a = conv_params(g, n);
  const bool has_bias = in.size() > 2 && in[2] != ir::kNone;
  try {
    // bf16: images and filters rounded to bfloat16, the result (and what post-ops see) f32.
    const memory::data_type operands = bf16 ? memory::data_type::bf16 : memory::data_type::f32;
    const memory::desc src({x[0], x[1], x[2], x[3]}, operands, src_tag);
    const memory::desc dst({y[0], y[1], y[2], y[3]}, memory::data_type::f32, dst_tag);
    const memory::desc filters(filter_dims(w, a.groups), operands, tag::any);
    const memory::desc bias = has_bias ? memory::desc({w[0]}, memory::data_type::f32, tag::x) : memory::desc();
    // oneDNN counts dilation from 0 (no gaps), ONNX from 1.
    const dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
                                               filters, bias, dst, {a.stride_h, a.stride_w}, {a.dilation_h - 1, a.dilation_w - 1},
                                               {a.pad_top, a.pad_left}, {a.pad_bottom, a.pad_right});
    dnnl::post_ops ops;
    for (const PostOp& p : post_ops) {
      if (p.kind == PostOp::Kind::Sum) ops.append_sum(p.alpha);
      else ops.append_eltwise(1.0f, static_cast<dnnl::algorithm>(p.algorithm), p.alpha, p.beta);
    }
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const OmpThreads scoped(threads);
    dnnl::convolution_forward::primitive_desc pd(desc, attr, cpu_engine());
    const std::string implementation = pd.impl_info_str();
    if (implementation.rfind("ref", 0) == 0) {
      why_not = "oneDNN has only its reference kernel (" + implementation + ")";
      return std::nullopt;
    }
    return pd;
  } catch (const dnnl::error& e) {
    why_not = std::string("oneDNN: ") + e.what();
    return std::nullopt;
  }
}

}  // namespace

// What one run passes to oneDNN: a stream and memory objects for each argument, made once and
// pointed at each run's buffers (making them costs about 1.5 us a launch, a sixth of a small
// 1x1 convolution). Runs under way at once take one each.
struct Binding {
  dnnl::stream stream;
  memory src, weights, dst, scratchpad, bias;
  memory reorder_from, reorder_to;  // filters reordered at run time
  memory round_from, round_to;      // images rounded to bf16
  std::unordered_map<int, memory> args;
};

struct ConvPrimitive::Impl {
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward primitive;
  memory::desc plain_filters;                  // the node's OIHW (GOIHW when grouped)
  std::vector<uint8_t> filters;                // reordered at make, when the node's filters are a constant
  std::unique_ptr<dnnl::reorder> run_reorder;  // else: to the primitive's layout at each run, when it differs
  bool has_bias = false;
  size_t scratchpad_bytes = 0, filter_bytes = 0, working_bytes = 0;
  std::string implementation;
  int threads = 1;  // what oneDNN split its work for
  bool bf16 = false;  // its images and filters rounded to bfloat16
  memory::desc f32_images;
  dnnl::reorder round_images;  // bf16: the f32 images to the primitive's bf16 ones
  size_t image_bytes = 0;
  mutable std::mutex bindings_mutex;
  mutable std::vector<std::unique_ptr<Binding>> free_bindings;

  std::unique_ptr<Binding> take_binding() const;
  void give_back(std::unique_ptr<Binding> binding) const;

  // A binding taken for one run and given back when it ends, thrown out of or not.
  struct Lease {
    explicit Lease(const Impl& impl) : impl(impl), binding(impl.take_binding()) {}
    ~Lease() { impl.give_back(std::move(binding)); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    const Impl& impl;
    std::unique_ptr<Binding> binding;
  };
};

std::unique_ptr<Binding> ConvPrimitive::Impl::take_binding() const {
  {
    const std::lock_guard<std::mutex> lock(bindings_mutex);
    if (!free_bindings.empty()) {
      std::unique_ptr<Binding> b = std::move(free_bindings.back());
      free_bindings.pop_back();
      return b;
    }
  }
  const dnnl::engine& engine = cpu_engine();
  auto b = std::make_unique<Binding>();
  b->stream = dnnl::stream(engine);
  b->src = memory(pd.src_desc(), engine, nullptr);
  b->weights = memory(pd.weights_desc(), engine, nullptr);
  b->dst = memory(pd.dst_desc(), engine, nullptr);
  b->scratchpad = memory(pd.scratchpad_desc(), engine, nullptr);
  b->args = {{DNNL_ARG_SRC, b->src}, {DNNL_ARG_WEIGHTS, b->weights}, {DNNL_ARG_DST, b->dst}, {DNNL_ARG_SCRATCHPAD, b->scratchpad}};
  if (has_bias) {
    b->bias = memory(pd.bias_desc(), engine, nullptr);
    b->args.emplace(DNNL_ARG_BIAS, b->bias);
  }
  if (run_reorder) {
    b->reorder_from = memory(plain_filters, engine, nullptr);
    b->reorder_to = memory(pd.weights_desc(), engine, nullptr);
  }
  if (bf16) {
    b->round_from = memory(f32_images, engine, nullptr);
    b->round_to = memory(pd.src_desc(), engine, nullptr);
  }
  return b;
}

void ConvPrimitive::Impl::give_back(std::unique_ptr<Binding> binding) const {
  const std::lock_guard<std::mutex> lock(bindings_mutex);
  free_bindings.push_back(std::move(binding));
}

ConvPrimitive::ConvPrimitive(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ConvPrimitive::~ConvPrimitive() = default;

std::string ConvPrimitive::kernel_for(const ir::Graph& g, const ir::Node& n, plan::Format src, plan::Format dst, int threads) {
  std::string why_not;
  const auto pd = is_conv2d_f32(g, n) ? describe(g, n, src, dst, {}, threads_for(g, n, threads), false, why_not) : std::nullopt;
  return pd ? pd->impl_info_str() : std::string();
}

std::unique_ptr<ConvPrimitive> ConvPrimitive::make(const ir::Graph& g, const ir::Node& n, plan::Format src, plan::Format dst,
                                                   const std::vector<PostOp>& post_ops, int threads, bool bf16, std::string& why_not) {
  if (!is_conv2d_f32(g, n)) {
    why_not = "not all f32";
    return nullptr;
  }
  threads = threads_for(g, n, threads);
  std::optional<dnnl::convolution_forward::primitive_desc> pd;
  if (bf16) pd = describe(g, n, src, dst, post_ops, threads, true, why_not);  // else f32, the reason kept
  const bool rounded = pd.has_value();
  if (!pd) pd = describe(g, n, src, dst, post_ops, threads, false, why_not);
  if (!pd) return nullptr;
  const auto in = g.inputs(n);
  const ir::Shape w = g.shape(in[1]);
  const int64_t groups = conv_params(g, n).groups;
  try {
    auto impl = std::make_unique<Impl>();
    impl->pd = *pd;
    impl->implementation = pd->impl_info_str();
    impl->threads = threads;
    impl->bf16 = rounded;
    const OmpThreads scoped(threads);
    impl->primitive = dnnl::convolution_forward(impl->pd);
    impl->plain_filters = memory::desc(filter_dims(w, groups), memory::data_type::f32, groups == 1 ? tag::oihw : tag::goihw);
    impl->has_bias = in.size() > 2 && in[2] != ir::kNone;
    impl->scratchpad_bytes = impl->pd.scratchpad_desc().get_size();
    const memory::desc& wanted = impl->pd.weights_desc();
    if (rounded) {  // the images rounded to bf16 before each run, into the working buffer
      const memory::desc images = impl->pd.src_desc();
      const memory::desc f32_images(images.dims(), memory::data_type::f32, onednn_tag(src, 4));
      impl->round_images = dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), f32_images, cpu_engine(), images));
      impl->f32_images = f32_images;
      impl->image_bytes = (images.get_size() + 63) / 64 * 64;
    }
    if (const uint8_t* constant = constant_bytes(g, in[1])) {  // reordered once, here
      impl->filters.resize(wanted.get_size());
      memory from(impl->plain_filters, cpu_engine(), const_cast<uint8_t*>(constant)), to(wanted, cpu_engine(), impl->filters.data());
      dnnl::stream s(cpu_engine());
      dnnl::reorder(from, to).execute(s, from, to);
      s.wait();
    } else if (wanted != impl->plain_filters) {
      impl->run_reorder = std::make_unique<dnnl::reorder>(dnnl::reorder::primitive_desc(cpu_engine(), impl->plain_filters, cpu_engine(), wanted));
      impl->filter_bytes = (wanted.get_size() + 63) / 64 * 64;
    }
    impl->working_bytes = impl->filter_bytes + impl->image_bytes + (impl->scratchpad_bytes + 63) / 64 * 64;
    return std::unique_ptr<ConvPrimitive>(new ConvPrimitive(std::move(impl)));
  } catch (const dnnl::error& e) {
    why_not = std::string("oneDNN: ") + e.what();
    return nullptr;
  }
}

void ConvPrimitive::run(const float* images, const float* filters, const float* bias, float* dst, uint8_t* working) const {
  const Impl& p = *impl_;
  const OmpThreads scoped(p.threads);
  const Impl::Lease lease(p);
  Binding* b = lease.binding.get();
  void* weights = p.filters.empty() ? static_cast<void*>(const_cast<float*>(filters)) : const_cast<uint8_t*>(p.filters.data());
  if (p.run_reorder) {
    b->reorder_from.set_data_handle(const_cast<float*>(filters));
    b->reorder_to.set_data_handle(working);
    p.run_reorder->execute(b->stream, b->reorder_from, b->reorder_to);
    weights = working;
  }
  void* source = const_cast<float*>(images);
  if (p.bf16) {
    b->round_from.set_data_handle(source);
    b->round_to.set_data_handle(working + p.filter_bytes);
    p.round_images.execute(b->stream, b->round_from, b->round_to);
    source = working + p.filter_bytes;
  }
  b->src.set_data_handle(source);
  b->weights.set_data_handle(weights);
  b->dst.set_data_handle(dst);
  b->scratchpad.set_data_handle(working + p.filter_bytes + p.image_bytes);
  if (p.has_bias) b->bias.set_data_handle(const_cast<float*>(bias));
  p.primitive.execute(b->stream, b->args);
  b->stream.wait();
}

const std::string& ConvPrimitive::implementation() const { return impl_->implementation; }

size_t ConvPrimitive::working_bytes() const { return impl_->working_bytes; }

bool ConvPrimitive::bf16() const { return impl_->bf16; }

int library_threads(const runtime::CompileOptions& options) { return std::max(1, options.pool_threads() / std::max(1, options.streams)); }

bool cpu_multiplies_bf16() {
  const auto isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  return (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
}

}  // namespace esg::cpu
