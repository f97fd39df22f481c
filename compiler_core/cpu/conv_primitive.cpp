#include "cpu/conv_primitive.hpp"

#include <algorithm>
#include <optional>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "cpu/conv.hpp"
#include "cpu/onednn.hpp"
#include "cpu/omp_threads.hpp"
#include "cpu/primitive_runner.hpp"
#include "cpu/split.hpp"
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

// What one piece of a convolution computes: images [n0, n0 + n) and output channels
// [o0, o0 + o), with the input channels of those outputs (all of them, or their groups' own).
struct Slice {
  int64_t n0, n, o0, o;
};

// The pieces for at most `pieces` threads: the images split among them when there are several,
// else (one image) the output channels, in whole blocks of the result's format (and, grouped,
// of the images' too, so that every piece's operands start on a block).
std::vector<Slice> slices_of(const ir::Graph& g, const ir::Node& n, schedule::Format src, schedule::Format dst, int pieces) {
  const ir::Shape w = g.shape(g.operands[n.first_input + 1]), y = g.shape(n.first_output);
  const int64_t images = y[0], outputs = y[1], groups = conv_params(g, n).groups;
  std::vector<Slice> slices;
  if (pieces > 1 && images > 1) {
    const int64_t parts = std::min<int64_t>(pieces, images);
    for (int64_t i = 0; i < parts; ++i) slices.push_back({images * i / parts, images * (i + 1) / parts - images * i / parts, 0, outputs});
    return slices;
  }
  const int64_t src_block = src.kind == schedule::Format::RowMajor ? 1 : src.block;
  int64_t unit = dst.kind == schedule::Format::RowMajor ? 16 : dst.block;  // output channels a unit
  if (groups > 1) {  // whole groups, as many as put both operands' starts on blocks
    const int64_t per_group = w[0] / groups;
    int64_t u = 1;
    while (u < groups && ((u * w[1]) % src_block != 0 || (u * per_group) % unit != 0)) ++u;
    unit = u * per_group;
  }
  const int64_t units = (outputs + unit - 1) / unit, parts = std::min<int64_t>(pieces, units);
  if (parts < 2) return {{0, images, 0, outputs}};
  for (int64_t i = 0; i < parts; ++i) {
    const int64_t o0 = unit * (units * i / parts), o1 = std::min(outputs, unit * (units * (i + 1) / parts));
    slices.push_back({0, images, o0, o1 - o0});
  }
  return slices;
}

// The pieces a convolution is split into (split.hpp's rule), at most `threads`.
int pieces_for(const ir::Graph& g, const ir::Node& n, int threads) {
  const ir::Shape w = g.shape(g.operands[n.first_input + 1]);
  return pieces_for_macs(static_cast<double>(g.shape(n.first_output).num_elements()) * static_cast<double>(w[1] * w[2] * w[3]), threads);
}

// oneDNN's description of slice `s` of node `n` in the given formats with `post_ops`, for one
// thread, its operands f32 or bf16, or nullopt and why not.
std::optional<dnnl::convolution_forward::primitive_desc> describe(const ir::Graph& g, const ir::Node& n, const Slice& s,
                                                                  schedule::Format src_format, schedule::Format dst_format,
                                                                  const std::vector<PostOp>& post_ops, bool bf16, std::string& why_not) {
  const tag src_tag = onednn_tag(src_format, 4), dst_tag = onednn_tag(dst_format, 4);
  if (src_tag == tag::undef || dst_tag == tag::undef) {
    why_not = "no oneDNN layout for " + (src_tag == tag::undef ? src_format : dst_format).name(4);
    return std::nullopt;
  }
  const auto in = g.inputs(n);
  const ir::Shape x = g.shape(in[0]), w = g.shape(in[1]), y = g.shape(n.first_output);
  const ConvParams a = conv_params(g, n);
  const bool has_bias = in.size() > 2 && in[2] != ir::kNone;
  const int64_t groups = a.groups == 1 ? 1 : s.o / (w[0] / a.groups);  // the slice's own
  try {
    // bf16: images and filters rounded to bfloat16, the result (and what post-ops see) f32.
    const memory::data_type operands = bf16 ? memory::data_type::bf16 : memory::data_type::f32;
    const memory::desc src({s.n, a.groups == 1 ? x[1] : groups * w[1], x[2], x[3]}, operands, src_tag);
    const memory::desc dst({s.n, s.o, y[2], y[3]}, memory::data_type::f32, dst_tag);
    const memory::dims filter_dims = a.groups == 1 ? memory::dims{s.o, w[1], w[2], w[3]} : memory::dims{groups, s.o / groups, w[1], w[2], w[3]};
    const memory::desc filters(filter_dims, operands, tag::any);
    const memory::desc bias = has_bias ? memory::desc({s.o}, memory::data_type::f32, tag::x) : memory::desc();
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
    const OmpThreads scoped(1);
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

// One slice's primitive, its operands' places within the whole convolution's and its working
// memory's place within the convolution's.
struct Piece {
  dnnl::convolution_forward::primitive_desc pd;
  PrimitiveRunner convolution;
  memory::desc plain_filters;    // the slice's OIHW (GOIHW when grouped)
  // Reordered at make, when the node's filters are a constant; shared by pieces of the same
  // filters (a split of the images).
  ir::Blob filters;
  PrimitiveRunner reorder_filters;  // else: to the primitive's layout at each run, when it differs
  PrimitiveRunner round_images;     // bf16: the f32 images to the primitive's bf16 ones
  bool has_bias = false;
  bool bf16 = false;  // its images and filters rounded to bfloat16
  size_t filter_bytes = 0, image_bytes = 0, working_bytes = 0;
  int64_t images_at = 0, filters_at = 0, bias_at = 0, dst_at = 0;  // elements into the whole's
  size_t working_at = 0;                                            // bytes into the whole's

  void run(const float* images, const float* filter_values, const float* bias, float* dst, uint8_t* working) const {
    const void* weights = filters ? static_cast<const void*>(filters->data()) : filter_values;
    if (reorder_filters) {
      reorder_filters.execute({filter_values, working});
      weights = working;
    }
    const void* source = images;
    if (bf16) {
      round_images.execute({images, working + filter_bytes});
      source = working + filter_bytes;
    }
    uint8_t* scratchpad = working + filter_bytes + image_bytes;
    if (has_bias) convolution.execute({source, weights, dst, scratchpad, bias});
    else convolution.execute({source, weights, dst, scratchpad});
  }
};

size_t round_up(size_t bytes) { return (bytes + 63) / 64 * 64; }

// Slice `s`'s piece (bf16 where oneDNN has such a kernel for it, else f32), or null and why not.
// `same_filters`: a piece of the same filters made before (another slice of the images), whose
// reordered constant filters this one shares when it wants the same layout.
std::unique_ptr<Piece> make_piece(const ir::Graph& g, const ir::Node& n, const Slice& s, schedule::Format src, schedule::Format dst,
                                  const std::vector<PostOp>& post_ops, bool bf16, const Piece* same_filters, const PackWeights& pack,
                                  int piece_index, std::string& why_not) {
  std::optional<dnnl::convolution_forward::primitive_desc> pd;
  if (bf16) pd = describe(g, n, s, src, dst, post_ops, true, why_not);  // else f32, the reason kept
  const bool rounded = pd.has_value();
  if (!pd) pd = describe(g, n, s, src, dst, post_ops, false, why_not);
  if (!pd) return nullptr;
  const auto in = g.inputs(n);
  const ir::Shape x = g.shape(in[0]), w = g.shape(in[1]), y = g.shape(n.first_output);
  const int64_t groups = conv_params(g, n).groups;
  auto piece = std::make_unique<Piece>();
  piece->pd = *pd;
  piece->bf16 = rounded;
  const OmpThreads scoped(1);
  std::vector<std::pair<int, memory::desc>> args{{DNNL_ARG_SRC, pd->src_desc()}, {DNNL_ARG_WEIGHTS, pd->weights_desc()},
                                                 {DNNL_ARG_DST, pd->dst_desc()}, {DNNL_ARG_SCRATCHPAD, pd->scratchpad_desc()}};
  piece->has_bias = in.size() > 2 && in[2] != ir::kNone;
  if (piece->has_bias) args.emplace_back(DNNL_ARG_BIAS, pd->bias_desc());
  piece->convolution = PrimitiveRunner(dnnl::convolution_forward(*pd), std::move(args));
  const memory::dims filter_dims = piece->pd.weights_desc().dims();
  piece->plain_filters = memory::desc(filter_dims, memory::data_type::f32, groups == 1 ? tag::oihw : tag::goihw);
  // Where the slice's operands start: a slice of images starts at an image, a slice of output
  // channels at a block of them (one image only, so the channels are the outer axis).
  const int64_t first_input_channel = groups == 1 ? 0 : s.o0 / (w[0] / groups) * w[1];
  piece->images_at = s.n0 * src.physical_elements({1, x[1], x[2], x[3]}) + first_input_channel * x[2] * x[3];
  piece->dst_at = s.n0 * dst.physical_elements({1, y[1], y[2], y[3]}) + s.o0 * y[2] * y[3];
  piece->filters_at = s.o0 * w[1] * w[2] * w[3];
  piece->bias_at = s.o0;
  const memory::desc& wanted = piece->pd.weights_desc();
  if (rounded) {  // the images rounded to bf16 before each run, into the working memory
    const memory::desc images = piece->pd.src_desc();
    const memory::desc f32_images(images.dims(), memory::data_type::f32, onednn_tag(src, 4));
    piece->round_images = PrimitiveRunner(dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), f32_images, cpu_engine(), images)),
                                          {{DNNL_ARG_FROM, f32_images}, {DNNL_ARG_TO, images}});
    piece->image_bytes = round_up(images.get_size());
  }
  if (const uint8_t* constant = constant_bytes(g, in[1])) {  // reordered once, here
    if (same_filters && same_filters->pd.weights_desc() == wanted) {
      piece->filters = same_filters->filters;
    } else {
      const float* first = reinterpret_cast<const float*>(constant) + piece->filters_at;
      piece->filters = pack(piece_index, wanted.get_size(), [&](uint8_t* into) {
        memory from(piece->plain_filters, cpu_engine(), const_cast<float*>(first)), to(wanted, cpu_engine(), into);
        dnnl::stream stream(cpu_engine());
        dnnl::reorder(from, to).execute(stream, from, to);
        stream.wait();
      });
    }
  } else if (wanted != piece->plain_filters) {
    piece->reorder_filters = PrimitiveRunner(dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), piece->plain_filters, cpu_engine(), wanted)),
                                             {{DNNL_ARG_FROM, piece->plain_filters}, {DNNL_ARG_TO, wanted}});
    piece->filter_bytes = round_up(wanted.get_size());
  }
  piece->working_bytes = piece->filter_bytes + piece->image_bytes + round_up(piece->pd.scratchpad_desc().get_size());
  return piece;
}

}  // namespace

struct ConvPrimitive::Impl {
  std::vector<std::unique_ptr<Piece>> pieces;
  std::string implementation;
  size_t working_bytes = 0;
};

ConvPrimitive::ConvPrimitive(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ConvPrimitive::~ConvPrimitive() = default;

std::string ConvPrimitive::kernel_for(const ir::Graph& g, const ir::Node& n, schedule::Format src, schedule::Format dst) {
  std::string why_not;
  const ir::Shape y = g.shape(n.first_output);
  const auto pd = is_conv2d_f32(g, n) ? describe(g, n, Slice{0, y[0], 0, y[1]}, src, dst, {}, false, why_not) : std::nullopt;
  return pd ? pd->impl_info_str() : std::string();
}

std::unique_ptr<ConvPrimitive> ConvPrimitive::make(const ir::Graph& g, const ir::Node& n, schedule::Format src, schedule::Format dst,
                                                   const std::vector<PostOp>& post_ops, int threads, bool bf16, const PackWeights& pack,
                                                   std::string& why_not, const ConvPrimitive* like) {
  if (!is_conv2d_f32(g, n)) {
    why_not = "not all f32";
    return nullptr;
  }
  // In pieces, else (oneDNN has no optimized kernel for some piece) whole, as the layout
  // decision (kernel_for) asked oneDNN.
  const int pieces = pieces_for(g, n, threads);
  for (const int parts : pieces > 1 ? std::vector<int>{pieces, 1} : std::vector<int>{1}) {
    try {
      auto impl = std::make_unique<Impl>();
      for (const Slice& s : slices_of(g, n, src, dst, parts)) {
        // Slices of the images have every output channel: the first one's filters serve them all.
        const bool all_channels = s.o0 == 0 && s.o == g.shape(n.first_output)[1];
        const Piece* same_filters = all_channels && !impl->pieces.empty() ? impl->pieces.front().get() : nullptr;
        const ir::Shape w = g.shape(g.inputs(n)[1]);
        for (size_t k = 0; !same_filters && like && k < like->impl_->pieces.size(); ++k)
          if (like->impl_->pieces[k]->filters && like->impl_->pieces[k]->filters_at == s.o0 * w[1] * w[2] * w[3])
            same_filters = like->impl_->pieces[k].get();
        std::unique_ptr<Piece> piece =
            make_piece(g, n, s, src, dst, post_ops, bf16, same_filters, pack, static_cast<int>(impl->pieces.size()), why_not);
        if (!piece) break;
        piece->working_at = impl->working_bytes;
        impl->working_bytes += piece->working_bytes;
        impl->pieces.push_back(std::move(piece));
      }
      if (impl->pieces.size() != slices_of(g, n, src, dst, parts).size()) continue;
      impl->implementation = impl->pieces.front()->pd.impl_info_str();
      return std::unique_ptr<ConvPrimitive>(new ConvPrimitive(std::move(impl)));
    } catch (const dnnl::error& e) {
      why_not = std::string("oneDNN: ") + e.what();
    }
  }
  return nullptr;
}

void ConvPrimitive::run(const float* images, const float* filters, const float* bias, float* dst, uint8_t* working,
                        const eval::Parallel* parallel) const {
  const auto& pieces = impl_->pieces;
  auto run_piece = [&](int64_t i) {
    const Piece& p = *pieces[static_cast<size_t>(i)];
    p.run(images + p.images_at, filters ? filters + p.filters_at : nullptr, bias ? bias + p.bias_at : nullptr, dst + p.dst_at,
          working + p.working_at);
  };
  const int64_t count = static_cast<int64_t>(pieces.size());
  if (count == 1 || !parallel) {
    for (int64_t i = 0; i < count; ++i) run_piece(i);
    return;
  }
  parallel->run(count, run_piece);
}

const std::string& ConvPrimitive::implementation() const { return impl_->implementation; }

size_t ConvPrimitive::working_bytes() const { return impl_->working_bytes; }

bool ConvPrimitive::bf16() const {
  return std::all_of(impl_->pieces.begin(), impl_->pieces.end(), [](const auto& p) { return p->bf16; });
}

int ConvPrimitive::pieces() const { return static_cast<int>(impl_->pieces.size()); }

int library_threads(const runtime::CompileOptions& options) { return std::max(1, options.pool_threads() / std::max(1, options.streams)); }

bool cpu_multiplies_bf16() {
  const auto isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  return (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
}

}  // namespace esg::cpu
