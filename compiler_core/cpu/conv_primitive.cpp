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
#include "eval/quantized.hpp"
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

// What differs between the convolutions a primitive serves: conv2d in f32 (its images and
// filters rounded to bf16 on request) and quantized_conv2d in 8-bit integers, whose zero points
// and requantization oneDNN applies (u8 or s8 images, s8 filters, s32 sums, the multipliers as
// output scales, a folded clip as an eltwise post-op ahead of the output's zero point, on the
// scaled sum: clamping it to integer bounds before rounding is clamping after).
//
// Without VNNI, oneDNN's int8 kernels multiply u8 by s8 with vpmaddubsw, which sums each pair of
// products in 16 bits, saturating: 255 · 127 · 2 does not fit. A filter of values within
// [-64, 64] never saturates (255 · 64 · 2 = 32,640), so there every filter value w is split in
// two such halves, w/2 rounded toward zero and the rest, each image channel read twice, one
// half against each: twice the products, summed exactly. (Depthwise kernels sum in 32 bits.)
struct Operands {
  size_t x = 0, w = 1, bias = 2;  // input positions
  bool quantized = false;
  eval::Requantization requantize;
  int32_t x_zero_point = 0;
  bool split_filters = false;
  // Without VNNI, oneDNN multiplies s8 images by halved filters (exact only for u8 images): s8
  // images are shifted into u8 by +128 as they are reordered, their zero point with them.
  bool shift_images = false;
};

bool cpu_has_int8_dot_product() {
  const auto isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  return (isa & dnnl_cpu_isa_avx512_core_vnni) == dnnl_cpu_isa_avx512_core_vnni || (isa & dnnl_cpu_isa_avx2_vnni) == dnnl_cpu_isa_avx2_vnni;
}

// A filter value's two halves, each within [-64, 64].
int8_t first_half(int8_t w) { return static_cast<int8_t>(w / 2); }
int8_t second_half(int8_t w) { return static_cast<int8_t>(w - w / 2); }

memory::data_type onednn_type(ir::DType t) {
  switch (t) {
    case ir::DType::U8: return memory::data_type::u8;
    case ir::DType::I8: return memory::data_type::s8;
    case ir::DType::I32: return memory::data_type::s32;
    case ir::DType::BF16: return memory::data_type::bf16;
    default: return memory::data_type::f32;
  }
}

eval::TensorRef constant_ref(const ir::Graph& g, ir::ValueId v) {
  return {g.values[v].dtype, g.shape(v), const_cast<uint8_t*>(constant_bytes(g, v))};
}

// The node's operands, or nullopt and why not.
std::optional<Operands> operands_of(const ir::Graph& g, const ir::Node& n, std::string& why_not) {
  if (is_conv2d_f32(g, n)) return Operands{};
  if (n.op->kind != ir::OpKind::quantized_conv2d) {
    why_not = "not all f32";
    return std::nullopt;
  }
  const auto in = g.inputs(n);
  if (ir::dtype_is_float(g.values[n.first_output].dtype)) {
    why_not = "its result is a float, not requantized";
    return std::nullopt;
  }
  Operands o{0, 3, 8, true, {}, 0};
  for (size_t i : {1, 2, 4, 5, 6, 7})
    if (!constant_bytes(g, in[i])) {
      why_not = "its scales and zero points are not constants";
      return std::nullopt;
    }
  if (g.values[in[3]].dtype != ir::DType::I8) {
    why_not = "oneDNN takes s8 filters only";
    return std::nullopt;
  }
  const eval::TensorRef w_zero_point = constant_ref(g, in[5]);
  for (int64_t i = 0; i < w_zero_point.size(); ++i)
    if (eval::load_i(w_zero_point, i) != 0) {
      why_not = "the filters' zero point is not 0 (oneDNN 2.6 has none)";
      return std::nullopt;
    }
  o.requantize = eval::requantization(constant_ref(g, in[1]), constant_ref(g, in[4]), constant_ref(g, in[6]), constant_ref(g, in[7]),
                                      ir::QuantizedConv2dAttrs(g, n).min, ir::QuantizedConv2dAttrs(g, n).max);
  o.x_zero_point = static_cast<int32_t>(eval::load_i(constant_ref(g, in[2]), 0));
  const ir::Shape w = g.shape(in[3]);
  if (!cpu_has_int8_dot_product() && w[1] > 1) {  // saturation, unless every value is within [-64, 64]
    const eval::TensorRef filters = constant_ref(g, in[3]);
    if (!filters.bytes) {
      why_not = "its filters are not constants, and without VNNI oneDNN's int8 sums saturate on filter values beyond [-64, 64]";
      return std::nullopt;
    }
    const int8_t* v = filters.data<int8_t>();
    o.split_filters = std::any_of(v, v + filters.size(), [](int8_t x) { return x < -64 || x > 64; });
  }
  if (!cpu_has_int8_dot_product() && g.values[in[0]].dtype == ir::DType::I8) {
    o.shift_images = true;
    o.x_zero_point += 128;
  }
  return o;
}

// The node's filters: conv2d's second input, quantized_conv2d's fourth.
ir::ValueId filters_of(const ir::Graph& g, const ir::Node& n) {
  return g.operands[n.first_input + (n.op->kind == ir::OpKind::quantized_conv2d ? 3 : 1)];
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
  const ir::Shape w = g.shape(filters_of(g, n)), y = g.shape(n.first_output);
  const int64_t images = y[0], outputs = y[1], groups = conv_params(g, n).groups;
  std::vector<Slice> slices;
  if (pieces > 1 && images > 1) {
    const int64_t parts = std::min<int64_t>(pieces, images);
    for (int64_t i = 0; i < parts; ++i) slices.push_back({images * i / parts, images * (i + 1) / parts - images * i / parts, 0, outputs});
    return slices;
  }
  const int64_t src_block = src.kind == schedule::Format::BlockedChannels ? src.block : 1;
  int64_t unit = dst.kind == schedule::Format::BlockedChannels ? dst.block : 16;  // output channels a unit
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
  const ir::Shape w = g.shape(filters_of(g, n));
  return pieces_for_macs(static_cast<double>(g.shape(n.first_output).num_elements()) * static_cast<double>(w[1] * w[2] * w[3]), threads);
}

// oneDNN's description of slice `s` of node `n` in the given formats with `post_ops`, for one
// thread, an f32 convolution's operands f32 or bf16, or nullopt and why not. A quantized one
// leaves its images' and result's layouts to oneDNN (its int8 kernels want channels last).
std::optional<dnnl::convolution_forward::primitive_desc> describe(const ir::Graph& g, const ir::Node& n, const Operands& o, const Slice& s,
                                                                  schedule::Format src_format, schedule::Format dst_format,
                                                                  const std::vector<PostOp>& post_ops, bool bf16, std::string& why_not) {
  const tag src_tag = o.quantized ? tag::any : onednn_tag(src_format, 4), dst_tag = o.quantized ? tag::any : onednn_tag(dst_format, 4);
  if (src_tag == tag::undef || dst_tag == tag::undef) {
    why_not = "no oneDNN layout for " + (src_tag == tag::undef ? src_format : dst_format).name(4);
    return std::nullopt;
  }
  const auto in = g.inputs(n);
  const ir::Shape x = g.shape(in[o.x]), w = g.shape(in[o.w]), y = g.shape(n.first_output);
  const ConvParams a = conv_params(g, n);
  const bool has_bias = in.size() > o.bias && in[o.bias] != ir::kNone;
  const int64_t groups = a.groups == 1 ? 1 : s.o / (w[0] / a.groups);  // the slice's own
  try {
    // bf16: images and filters rounded to bfloat16, the result (and what post-ops see) f32.
    const memory::data_type images = o.shift_images ? memory::data_type::u8
                                     : o.quantized  ? onednn_type(g.values[in[o.x]].dtype)
                                     : bf16         ? memory::data_type::bf16
                                                    : memory::data_type::f32;
    const memory::data_type filter_type = o.quantized ? memory::data_type::s8 : images;
    const int64_t reads = o.split_filters ? 2 : 1;  // each image channel, against each half of the filters
    const int64_t per_group = reads * w[1];
    const memory::desc src({s.n, a.groups == 1 ? reads * x[1] : groups * per_group, x[2], x[3]}, images, src_tag);
    const memory::desc dst({s.n, s.o, y[2], y[3]}, onednn_type(g.values[n.first_output].dtype), dst_tag);
    const memory::dims filter_dims =
        a.groups == 1 ? memory::dims{s.o, per_group, w[2], w[3]} : memory::dims{groups, s.o / groups, per_group, w[2], w[3]};
    const memory::desc filters(filter_dims, filter_type, tag::any);
    const memory::desc bias = has_bias ? memory::desc({s.o}, onednn_type(g.values[in[o.bias]].dtype), tag::x) : memory::desc();
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
    if (o.quantized) {
      const std::vector<float>& m = o.requantize.multiplier;
      attr.set_output_scales(m.size() == 1 ? 0 : 1 << 1, m.size() == 1 ? m : std::vector<float>(m.begin() + s.o0, m.begin() + s.o0 + s.o));
      attr.set_zero_points(DNNL_ARG_SRC, 0, {o.x_zero_point});
      attr.set_zero_points(DNNL_ARG_DST, 0, {static_cast<int32_t>(o.requantize.zero_point)});
      const eval::Requantization& r = o.requantize;
      const eval::IntRange range = eval::int_range(g.values[n.first_output].dtype);
      if (r.low > range.min || r.high < range.max)
        ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, static_cast<float>(r.low - r.zero_point),
                           static_cast<float>(r.high - r.zero_point));
    }
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
  // The images into the primitive's layout or type (bf16, channels last) before each run, and
  // its result into the launch's layout after it, when they differ.
  PrimitiveRunner reorder_images, reorder_result;
  PrimitiveRunner reorder_images_again;  // split filters: the images' second copy, beside the first
  bool has_bias = false;
  bool bf16 = false;  // its images and filters rounded to bfloat16
  size_t filter_bytes = 0, image_bytes = 0, result_bytes = 0, working_bytes = 0;
  size_t images_at = 0, filters_at = 0, bias_at = 0, dst_at = 0;  // bytes into the whole's operands
  size_t working_at = 0;                                          // bytes into the whole's

  void run(const uint8_t* images, const uint8_t* filter_values, const uint8_t* bias, uint8_t* dst, uint8_t* working) const {
    const void* weights = filters ? static_cast<const void*>(filters->data()) : filter_values;
    if (reorder_filters) {
      reorder_filters.execute({filter_values, working});
      weights = working;
    }
    const void* source = images;
    if (reorder_images) {
      reorder_images.execute({images, working + filter_bytes});
      if (reorder_images_again) reorder_images_again.execute({images, working + filter_bytes});
      source = working + filter_bytes;
    }
    uint8_t* result = reorder_result ? working + filter_bytes + image_bytes : dst;
    uint8_t* scratchpad = working + filter_bytes + image_bytes + result_bytes;
    if (has_bias) convolution.execute({source, weights, result, scratchpad, bias});
    else convolution.execute({source, weights, result, scratchpad});
    if (reorder_result) reorder_result.execute({result, dst});
  }
};

size_t round_up(size_t bytes) { return (bytes + 63) / 64 * 64; }

// A reorder from one layout and type to another, adding `shift` to every value (s8 to u8).
PrimitiveRunner reorder_between(const memory::desc& from, const memory::desc& to, int32_t shift = 0) {
  dnnl::primitive_attr attr;
  if (shift) attr.set_zero_points(DNNL_ARG_DST, 0, {shift});
  return PrimitiveRunner(dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), from, cpu_engine(), to, attr)),
                         {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
}

// Slice `s`'s piece (bf16 where oneDNN has such a kernel for it, else f32), or null and why not.
// `same_filters`: a piece of the same filters made before (another slice of the images), whose
// reordered constant filters this one shares when it wants the same layout.
std::unique_ptr<Piece> make_piece(const ir::Graph& g, const ir::Node& n, const Operands& o, const Slice& s, schedule::Format src,
                                  schedule::Format dst, const std::vector<PostOp>& post_ops, bool bf16, const Piece* same_filters,
                                  const PackWeights& pack, int piece_index, std::string& why_not) {
  std::optional<dnnl::convolution_forward::primitive_desc> pd;
  if (bf16 && !o.quantized) pd = describe(g, n, o, s, src, dst, post_ops, true, why_not);  // else f32, the reason kept
  const bool rounded = pd.has_value();
  if (!pd) pd = describe(g, n, o, s, src, dst, post_ops, false, why_not);
  if (!pd) return nullptr;
  const auto in = g.inputs(n);
  const ir::Shape x = g.shape(in[o.x]), w = g.shape(in[o.w]), y = g.shape(n.first_output);
  const ir::DType x_type = g.values[in[o.x]].dtype, w_type = g.values[in[o.w]].dtype, y_type = g.values[n.first_output].dtype;
  const int64_t groups = conv_params(g, n).groups;
  auto piece = std::make_unique<Piece>();
  piece->pd = *pd;
  piece->bf16 = rounded;
  const OmpThreads scoped(1);
  std::vector<std::pair<int, memory::desc>> args{{DNNL_ARG_SRC, pd->src_desc()}, {DNNL_ARG_WEIGHTS, pd->weights_desc()},
                                                 {DNNL_ARG_DST, pd->dst_desc()}, {DNNL_ARG_SCRATCHPAD, pd->scratchpad_desc()}};
  piece->has_bias = in.size() > o.bias && in[o.bias] != ir::kNone;
  if (piece->has_bias) args.emplace_back(DNNL_ARG_BIAS, pd->bias_desc());
  piece->convolution = PrimitiveRunner(dnnl::convolution_forward(*pd), std::move(args));
  const memory::dims filter_dims = piece->pd.weights_desc().dims();
  piece->plain_filters = memory::desc(filter_dims, onednn_type(w_type), groups == 1 ? tag::oihw : tag::goihw);
  // Where the slice's operands start: a slice of images starts at an image, a slice of output
  // channels at a block of them (one image only, so the channels are the outer axis).
  const int64_t first_input_channel = groups == 1 ? 0 : s.o0 / (w[0] / groups) * w[1];
  const auto bytes = [](int64_t elements, ir::DType t) { return static_cast<size_t>(elements) * ir::dtype_size(t); };
  // Channels last, a slice of channels is strided: its first channel is the descriptions'
  // offset (below), not the pointer's.
  const bool src_last = src.kind == schedule::Format::ChannelsLast, dst_last = dst.kind == schedule::Format::ChannelsLast;
  piece->images_at = bytes(s.n0 * src.physical_elements({1, x[1], x[2], x[3]}) + (src_last ? 0 : first_input_channel * x[2] * x[3]), x_type);
  piece->dst_at = bytes(s.n0 * dst.physical_elements({1, y[1], y[2], y[3]}) + (dst_last ? 0 : s.o0 * y[2] * y[3]), y_type);
  piece->filters_at = bytes(s.o0 * w[1] * w[2] * w[3], w_type);
  piece->bias_at = piece->has_bias ? bytes(s.o0, g.values[in[o.bias]].dtype) : 0;
  // The images and the result as the launch holds them, and reorders where the primitive wants
  // another layout or type.
  const memory::desc& images = piece->pd.src_desc();
  const int64_t slice_groups = groups == 1 ? 1 : s.o / (w[0] / groups), per_group = w[1];
  const memory::dims slice_images{s.n, slice_groups * per_group, x[2], x[3]};
  const memory::desc given_images =
      src_last ? memory::desc({s.n, x[1], x[2], x[3]}, onednn_type(x_type), tag::nhwc).submemory_desc(slice_images, {0, first_input_channel, 0, 0})
               : memory::desc(slice_images, onednn_type(x_type), onednn_tag(src, 4));
  if (o.split_filters) {  // each group's channels twice: [g][copy][channel]
    const memory::dims per_copy{s.n, slice_groups, per_group, x[2], x[3]};
    const memory::desc from = given_images.reshape(per_copy), copies = images.reshape({s.n, slice_groups, 2 * per_group, x[2], x[3]});
    const int32_t shift = o.shift_images ? 128 : 0;
    piece->reorder_images = reorder_between(from, copies.submemory_desc(per_copy, {0, 0, 0, 0, 0}), shift);
    piece->reorder_images_again = reorder_between(from, copies.submemory_desc(per_copy, {0, 0, per_group, 0, 0}), shift);
    piece->image_bytes = round_up(images.get_size());
  } else if (images != given_images) {
    piece->reorder_images = reorder_between(given_images, images, o.shift_images ? 128 : 0);
    piece->image_bytes = round_up(images.get_size());
  }
  const memory::desc& result = piece->pd.dst_desc();
  const memory::desc wanted_result =
      dst_last ? memory::desc({s.n, y[1], y[2], y[3]}, onednn_type(y_type), tag::nhwc).submemory_desc(result.dims(), {0, s.o0, 0, 0})
               : memory::desc(result.dims(), onednn_type(y_type), onednn_tag(dst, 4));
  if (result != wanted_result) {
    piece->reorder_result = reorder_between(result, wanted_result);
    piece->result_bytes = round_up(result.get_size());
  }
  const memory::desc& wanted = piece->pd.weights_desc();
  if (const uint8_t* constant = constant_bytes(g, in[o.w])) {  // reordered once, here
    if (same_filters && same_filters->pd.weights_desc() == wanted) {
      piece->filters = same_filters->filters;
    } else {
      const uint8_t* first = constant + piece->filters_at;
      std::vector<int8_t> halves;  // split filters: per output channel, the first halves, then the second
      if (o.split_filters) {
        const int64_t taps = per_group * w[2] * w[3];
        const auto* v = reinterpret_cast<const int8_t*>(first);
        for (int64_t oc = 0; oc < s.o; ++oc) {
          for (int64_t t = 0; t < taps; ++t) halves.push_back(first_half(v[oc * taps + t]));
          for (int64_t t = 0; t < taps; ++t) halves.push_back(second_half(v[oc * taps + t]));
        }
        first = reinterpret_cast<const uint8_t*>(halves.data());
      }
      const std::string into_layout = layout_text(wanted.data);
      const PackedFrom from{constant + piece->filters_at,
                            into_layout.empty() ? "" : layout_text(piece->plain_filters.data) + " to " + into_layout + (o.split_filters ? " split" : "")};
      piece->filters = pack(piece_index, wanted.get_size(), from, [&](uint8_t* into) {
        memory from(piece->plain_filters, cpu_engine(), const_cast<uint8_t*>(first)), to(wanted, cpu_engine(), into);
        dnnl::stream stream(cpu_engine());
        dnnl::reorder(from, to).execute(stream, from, to);
        stream.wait();
      });
    }
  } else if (wanted != piece->plain_filters) {
    piece->reorder_filters = reorder_between(piece->plain_filters, wanted);
    piece->filter_bytes = round_up(wanted.get_size());
  }
  piece->working_bytes = piece->filter_bytes + piece->image_bytes + piece->result_bytes + round_up(piece->pd.scratchpad_desc().get_size());
  return piece;
}

}  // namespace

struct ConvPrimitive::Impl {
  Operands operands;
  std::vector<std::unique_ptr<Piece>> pieces;
  std::string implementation;
  size_t working_bytes = 0;
};

ConvPrimitive::ConvPrimitive(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ConvPrimitive::~ConvPrimitive() = default;

std::string ConvPrimitive::kernel_for(const ir::Graph& g, const ir::Node& n, schedule::Format src, schedule::Format dst) {
  std::string why_not;
  const ir::Shape y = g.shape(n.first_output);
  const std::optional<Operands> o = operands_of(g, n, why_not);
  const auto pd = o ? describe(g, n, *o, Slice{0, y[0], 0, y[1]}, src, dst, {}, false, why_not) : std::nullopt;
  return pd ? pd->impl_info_str() : std::string();
}

std::unique_ptr<ConvPrimitive> ConvPrimitive::make(const ir::Graph& g, const ir::Node& n, schedule::Format src, schedule::Format dst,
                                                   const std::vector<PostOp>& post_ops, int threads, bool bf16, const PackWeights& pack,
                                                   std::string& why_not, const ConvPrimitive* like) {
  const std::optional<Operands> o = operands_of(g, n, why_not);
  if (!o) return nullptr;
  // In pieces, else (oneDNN has no optimized kernel for some piece) whole, as the layout
  // decision (kernel_for) asked oneDNN.
  const int pieces = pieces_for(g, n, threads);
  for (const int parts : pieces > 1 ? std::vector<int>{pieces, 1} : std::vector<int>{1}) {
    try {
      auto impl = std::make_unique<Impl>();
      impl->operands = *o;
      for (const Slice& s : slices_of(g, n, src, dst, parts)) {
        // Slices of the images have every output channel: the first one's filters serve them all.
        const bool all_channels = s.o0 == 0 && s.o == g.shape(n.first_output)[1];
        const Piece* same_filters = all_channels && !impl->pieces.empty() ? impl->pieces.front().get() : nullptr;
        const ir::Shape w = g.shape(g.inputs(n)[o->w]);
        const size_t filters_at = static_cast<size_t>(s.o0 * w[1] * w[2] * w[3]) * ir::dtype_size(g.values[g.inputs(n)[o->w]].dtype);
        for (size_t k = 0; !same_filters && like && k < like->impl_->pieces.size(); ++k)
          if (like->impl_->pieces[k]->filters && like->impl_->pieces[k]->filters_at == filters_at)
            same_filters = like->impl_->pieces[k].get();
        std::unique_ptr<Piece> piece =
            make_piece(g, n, *o, s, src, dst, post_ops, bf16, same_filters, pack, static_cast<int>(impl->pieces.size()), why_not);
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

void ConvPrimitive::run(const void* images, const void* filters, const void* bias, void* dst, uint8_t* working,
                        const eval::Parallel* parallel) const {
  const auto& pieces = impl_->pieces;
  const auto at = [](const void* base, size_t offset) { return base ? static_cast<const uint8_t*>(base) + offset : nullptr; };
  auto run_piece = [&](int64_t i) {
    const Piece& p = *pieces[static_cast<size_t>(i)];
    p.run(at(images, p.images_at), at(filters, p.filters_at), at(bias, p.bias_at), static_cast<uint8_t*>(dst) + p.dst_at,
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

std::string ConvPrimitive::precision() const {
  if (impl_->operands.quantized) return impl_->operands.split_filters ? "int8, filters in halves" : "int8";
  return std::all_of(impl_->pieces.begin(), impl_->pieces.end(), [](const auto& p) { return p->bf16; }) ? "bf16" : "f32";
}

int ConvPrimitive::pieces() const { return static_cast<int>(impl_->pieces.size()); }

int library_threads(const runtime::CompileOptions& options) { return std::max(1, options.pool_threads() / std::max(1, options.streams)); }

bool cpu_multiplies_bf16() {
  const auto isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  return (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
}

}  // namespace esg::cpu
