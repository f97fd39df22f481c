// The aclnn lowerings, one entry per op in kLowerings: what its aclnn op refuses (check) and how
// the node becomes that op's descriptors and planning call (build), every parameter bound there.
// Adding a lowering is one entry here plus the op in the simulator (tests/ascend_sim/opapi_sim.cpp),
// and its two functions in aclnn_api.hpp if no entry calls that aclnn op yet. AclnnCall's
// unsupported() and mapped_ops() read the table; aclnn_call.cpp needs no edit.
#include "ascend/aclnn_lowerings.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <numeric>

#include "eval/quantized.hpp"
#include "ir/op_attrs.gen.hpp"
#include "passes/rewrite.hpp"

namespace esg::ascend {

bool zero_constant(const ir::Graph& g, ir::ValueId v) {
  const eval::TensorRef t = passes::constant_data(g, v);
  if (!t.bytes) return false;
  for (int64_t i = 0; i < t.size(); ++i)
    if (eval::load_i(t, i) != 0) return false;
  return true;
}

namespace {

using ir::OpKind;

bool float_type(ir::DType t) { return t == ir::DType::F32 || t == ir::DType::F16 || t == ir::DType::BF16; }
// The element types of CANN's elementwise ops and generators that the backend uses.
bool library_type(ir::DType t) { return float_type(t) || t == ir::DType::Bool || t == ir::DType::I32 || t == ir::DType::I64; }

// The elementwise ops: integer values too, which the generated kernels do not compute
// (kernel_source.hpp).
std::string library_values(const ir::Graph& g, const ir::Node& n) {
  auto refused = [](ir::DType t) {
    return std::string(ir::dtype_name(t)) +
           (ir::dtype_is_float(t) ? " (f32, f16 and bf16 only among floats)" : " (i32 and i64 only among integers)");
  };
  for (ir::ValueId v : g.inputs(n))
    if (v != ir::kNone && !library_type(g.values[v].dtype)) return refused(g.values[v].dtype);
  const ir::DType result = g.values[n.first_output].dtype;
  return library_type(result) ? "" : refused(result);
}

// aclnnCast takes 8-bit integers too (ops-math's aclnnCast.md, Atlas A2): the quantized ops reach
// the device as f32 arithmetic between casts (legalize.hpp).
std::string cast_values(const ir::Graph& g, const ir::Node& n) {
  const auto eight_bits = [](ir::DType t) { return t == ir::DType::I8 || t == ir::DType::U8; };
  const ir::DType from = g.values[g.operands[n.first_input]].dtype, to = g.values[n.first_output].dtype;
  return (eight_bits(from) || library_type(from)) && (eight_bits(to) || library_type(to)) ? "" : library_values(g, n);
}

// quantized_conv2d as aclnnQuantConvolution takes it on Atlas A2 (ops-nn's
// aclnnQuantConvolution.md): INT8 input and filters with no offsets, groups 1, strides up to 63,
// padding (both sides alike) and dilations up to 255; the scales constants, from which the
// lowering makes its per-channel scale and FLOAT bias. Its result is FLOAT16 or BFLOAT16: a float
// result is this op's; an 8-bit one is legalized into one and the requantization after it
// (legalize.hpp), so the check leaves the result's type to those two.
std::string quant_convolution(const ir::Graph& g, const ir::Node& n) {
  const auto in = g.inputs(n);
  if (g.values[in[0]].dtype != ir::DType::I8)
    return "u8 activations (aclnnQuantConvolution takes INT8 input and no offset on Atlas A2: quantize them symmetric, as "
           "esgraph.quantize(..., symmetric=True) does)";
  if (g.values[in[3]].dtype != ir::DType::I8) return "u8 filters (aclnnQuantConvolution takes INT8 ones)";
  if (!zero_constant(g, in[2]) || !zero_constant(g, in[5]))
    return "a zero point other than a constant 0 (aclnnQuantConvolution takes symmetric INT8 operands)";
  for (size_t i : {1, 4, 6, 7})
    if (!passes::constant_data(g, in[i]).bytes) return "scales or an output zero point computed at run time";
  if (in.size() > 8 && in[8] != ir::kNone && !passes::constant_data(g, in[8]).bytes) return "a bias computed at run time";
  const ir::DType result = g.values[n.first_output].dtype;
  if (result == ir::DType::F32) return "an f32 result (aclnnQuantConvolution gives FLOAT16 or BFLOAT16 on Atlas A2)";
  const ir::QuantizedConv2dAttrs a(g, n);
  if (ir::dtype_is_float(result) && (a.min != -INFINITY || a.max != INFINITY))
    return "bounds on a float result (aclnnQuantConvolution has no clamp)";
  if (a.groups != 1) return "groups other than 1 (aclnnQuantConvolution takes 1 on Atlas A2)";
  const ir::Span<int64_t> pads = a.pads, strides = a.strides, dilations = a.dilations;
  if (pads[0] != pads[2] || pads[1] != pads[3]) return "asymmetric padding (aclnnQuantConvolution pads both sides alike)";
  if (pads[0] > 255 || pads[1] > 255 || dilations[0] > 255 || dilations[1] > 255 || strides[0] > 63 || strides[1] > 63)
    return "padding or dilation beyond 255, or a stride beyond 63 (aclnnQuantConvolution's limits)";
  for (ir::ValueId v : {in[0], in[3], n.first_output})
    if (g.shape(v).num_elements() == 0) return "an empty tensor (aclnnQuantConvolution takes none)";
  return "";
}

// matmul_nbits as aclnnWeightQuantBatchMatmulV2 takes it on Atlas A2 (ops-nn's
// aclnnWeightQuantBatchMatmulV2.md): FLOAT16 or BFLOAT16 activations, INT8 or INT4 weights of k
// and n in [1, 65535], one group along K (per channel) or groups of a multiple of 32 below k;
// the codes, scales and zero points constants, from which the lowering makes CANN's forms.
std::string weight_quant_matmul(const ir::Graph& g, const ir::Node& n) {
  const auto in = g.inputs(n);
  const ir::DType a = g.values[in[0]].dtype;
  if (a != ir::DType::F16 && a != ir::DType::BF16)
    return std::string(ir::dtype_name(a)) + " activations (aclnnWeightQuantBatchMatmulV2 takes FLOAT16 and BFLOAT16 ones only)";
  const ir::MatmulNbitsAttrs attrs(g, n);
  if (attrs.bits != 4 && attrs.bits != 8) return "2-bit codes (aclnnWeightQuantBatchMatmulV2 takes INT8 and INT4 weights)";
  for (size_t i = 1; i < in.size(); ++i)
    if (in[i] != ir::kNone && !passes::constant_data(g, in[i]).bytes) return "codes, scales or zero points computed at run time";
  const ir::Shape& as = g.shape(in[0]);
  const int64_t k = as[as.rank() - 1], columns = g.shape(in[1])[0], blocks = g.shape(in[1])[1];
  if (k % attrs.block_size) return "K not a multiple of block_size (aclnnWeightQuantBatchMatmulV2 reads no padded codes)";
  if (blocks > 1 && attrs.block_size % 32)
    return "blocks of " + std::to_string(attrs.block_size) + " (aclnnWeightQuantBatchMatmulV2's groups are a multiple of 32)";
  if (k > 65535 || columns > 65535) return "K or N beyond 65535 (aclnnWeightQuantBatchMatmulV2's limit)";
  if (as.num_elements() == 0 || columns == 0) return "an empty operand";
  return "";
}

constexpr uint32_t kNoIndex = UINT32_MAX;
// The other ops take floats so far, but for the input at `index`: an index tensor, i32 or i64
// as the op's signature says.
std::string float_inputs(const ir::Graph& g, const ir::Node& n, uint32_t index) {
  for (uint32_t i = 0; i < n.num_inputs; ++i) {
    const ir::ValueId v = g.operands[n.first_input + i];
    if (i != index && v != ir::kNone && !float_type(g.values[v].dtype)) return "f32, f16 and bf16 only so far";
  }
  return "";
}
std::string floats(const ir::Graph& g, const ir::Node& n) { return float_inputs(g, n, kNoIndex); }
std::string floats_and_index(const ir::Graph& g, const ir::Node& n) { return float_inputs(g, n, 1); }

// The generators' results: no inputs to check.
std::string library_result(const ir::Graph& g, const ir::Node& n) {
  const ir::DType t = g.values[n.first_output].dtype;
  return library_type(t) ? "" : std::string(ir::dtype_name(t)) + " (f32, f16, bf16, bool, i32 and i64 only)";
}

// Reductions over a list of axes, every axis when it is empty; `result_type` for those that
// take the result's type.
template <class Plan, class... ResultType>
AclnnStep reduce(const AclnnBuilder& b, const AclnnOp<Plan>& op, ResultType... result_type) {
  const ir::ReduceSumAttrs a(b.g, b.n);  // every reduction's view
  std::vector<int64_t> axes(a.axes.begin(), a.axes.end());
  if (axes.empty()) axes.resize(b.g.shape(b.input_value(0)).rank()), std::iota(axes.begin(), axes.end(), 0);
  return b.bind(op, b.input(0), b.make.int_array(axes), a.keepdims, result_type..., b.output());
}

template <class Plan>
AclnnStep arg_reduce(const AclnnBuilder& b, const AclnnOp<Plan>& op) {
  const ir::ArgmaxAttrs a(b.g, b.n);  // argmin's view too
  return b.bind(op, b.input(0), static_cast<int64_t>(a.axis), a.keepdims, b.output());
}

// self + alpha · other (or minus), alpha 1: an integer, as integer tensors want.
template <class Plan>
AclnnStep add_sub(const AclnnBuilder& b, const AclnnOp<Plan>& op) {
  return b.bind(op, b.input(0), b.input(1), b.make.scalar(int64_t{1}), b.output());
}

// The elementwise ops of CANN's shared signatures (aclnn_api.hpp).
AclnnStep binary(const AclnnBuilder& b, const AclnnOp<aclnn::BinaryPlan>& op) {
  return b.bind(op, b.input(0), b.input(1), b.output());
}
AclnnStep unary(const AclnnBuilder& b, const AclnnOp<aclnn::UnaryPlan>& op) { return b.bind(op, b.input(0), b.output()); }

// A 2-D attribute (window, strides, dilations), or the pads at the start of both axes.
aclnn::IntArray* first_two(const AclnnBuilder& b, ir::Span<int64_t> values) { return b.make.int_array({values[0], values[1]}); }

// The table's flag for the ops that take NCL/NCHW/NCDHW descriptors (AclnnDescriptors::set_images).
constexpr bool kImages = true;

// In the order messages list the ops.
constexpr AclnnLowering kLowerings[] = {
    {OpKind::matmul,
     [](const ir::Graph& g, const ir::Node& n) -> std::string {
       if (std::string why = floats(g, n); !why.empty()) return why;
       for (ir::ValueId v : {g.operands[n.first_input], g.operands[n.first_input + 1]})
         if (g.shape(v).rank() > 6) return "rank " + std::to_string(g.shape(v).rank()) + " (aclnnMatmul takes at most 6 dims)";
       return "";
     },
     [](const AclnnBuilder& b) {
       // cubeMathType 0, KEEP_DTYPE: f32 stays f32, except on 310P, whose rule refuses it for
       // FLOAT and computes f32 in FLOAT16 with 1, ALLOW_FP32_DOWN_PRECISION (ops-nn v8.5.0,
       // matmul_util.cpp Ascend310AMatMulRule).
       const ir::MatmulAttrs a(b.g, b.n);
       const bool f32_on_310p = b.soc.rfind("Ascend310P", 0) == 0 && b.g.values[b.input_value(0)].dtype == ir::DType::F32;
       return b.bind(ESG_ACLNN_OP(aclnnMatmul), b.input(0, a.transpose_a), b.input(1, a.transpose_b), b.output(),
                     static_cast<int8_t>(f32_on_310p ? 1 : 0));
     }},
    {OpKind::matmul_integer,
     [](const ir::Graph& g, const ir::Node& n) -> std::string {
       // aclnnQuantMatmulV5 on Atlas A2 (ops-nn's aclnnQuantMatmulV5.md): x1 INT8 with no x1Offset,
       // x2 INT8 in ND of 2 to 6 dims, no empty tensor; an INT32 result is x1 @ x2, exact.
       const ir::ValueId a = g.operands[n.first_input], b = g.operands[n.first_input + 1];
       if (g.values[a].dtype != ir::DType::I8)
         return "u8 activations (aclnnQuantMatmulV5 takes INT8 x1 and no x1 offset: quantize them symmetric, as "
                "esgraph.quantize(..., symmetric=True) does)";
       if (g.values[b].dtype != ir::DType::I8) return "u8 weights (aclnnQuantMatmulV5 takes INT8 x2)";
       if (!zero_constant(g, g.operands[n.first_input + 2]) || !zero_constant(g, g.operands[n.first_input + 3]))
         return "a zero point other than a constant 0 (aclnnQuantMatmulV5 takes symmetric INT8 operands)";
       if (g.shape(b).rank() != 2) return "batched weights (only a 2-D x2 is lowered to aclnnQuantMatmulV5 so far)";
       if (g.shape(a).num_elements() == 0 || g.shape(b).num_elements() == 0)
         return "an empty operand (aclnnQuantMatmulV5 takes no empty tensor)";
       return "";
     },
     [](const AclnnBuilder& b) {
       // a's leading axes as more rows of one 2-D product (the same bytes).
       const std::vector<int64_t> w = b.dims(b.input_value(1));
       const int64_t k = w[0], n = w[1], rows = b.g.shape(b.input_value(0)).num_elements() / k;
       return b.bind(ESG_ACLNN_OP(aclnnQuantMatmulV5), b.make.tensor({rows, k}, aclnn::kInt8, b.in[0]),
                     b.make.tensor({k, n}, aclnn::kInt8, b.in[1]), nullptr, b.make.tensor({1}, aclnn::kFloat, b.constants[0]),
                     nullptr, nullptr, nullptr, nullptr, nullptr, false, false, int64_t{0},
                     b.make.tensor({rows, n}, aclnn::kInt32, b.out[0]));
     },
     false,
     [](const ir::Graph&, const ir::Node&) {
       // CANN requires an x2Scale, FLOAT32 of (1,), even for an INT32 result, whose scales "do not
       // take part" (its words): a 1.
       eval::HostTensor one(ir::DType::F32, ir::Shape{1});
       eval::store_f(one, 0, 1.0);
       return std::vector<eval::HostTensor>{one};
     }},
    {OpKind::quantized_conv2d, quant_convolution,
     [](const AclnnBuilder& b) {
       // The 2-D convolution as a 3-D one of depth 1 (Atlas A2 has no other), NCDHW.
       const ir::QuantizedConv2dAttrs a(b.g, b.n);
       auto depth_one = [&](ir::ValueId v) {
         std::vector<int64_t> d = b.dims(v);
         d.insert(d.begin() + 2, 1);
         return d;
       };
       const int64_t channels = b.dims(b.input_value(3))[0];
       const ir::Span<int64_t> strides = a.strides, pads = a.pads, dilations = a.dilations;
       return b.bind(ESG_ACLNN_OP(aclnnQuantConvolution), b.make.tensor(depth_one(b.input_value(0)), aclnn::kInt8, b.in[0]),
                     b.make.tensor(depth_one(b.input_value(3)), aclnn::kInt8, b.in[3]),
                     b.make.tensor({channels}, aclnn::kFloat, b.constants[1]), b.make.tensor({channels}, aclnn::kFloat, b.constants[0]),
                     nullptr, b.make.int_array({1, strides[0], strides[1]}), b.make.int_array({0, pads[0], pads[1]}),
                     b.make.int_array({1, dilations[0], dilations[1]}), false, nullptr, int64_t{1}, int32_t{0}, nullptr,
                     b.make.tensor(depth_one(b.n.first_output), b.out_type(), b.out[0]));
     },
     kImages,
     [](const ir::Graph& g, const ir::Node& n) {
       // sum · scale + bias = (sum + the int32 bias) · m + the zero point, m = x_scale · w_scale / y_scale.
       const auto in = g.inputs(n);
       const int64_t channels = g.shape(in[3])[0];
       const eval::RealResult r = eval::real_result(passes::constant_data(g, in[1]), passes::constant_data(g, in[4]), passes::constant_data(g, in[6]),
                                                    passes::constant_data(g, in[7]), -INFINITY, INFINITY);
       const eval::TensorRef bias = in.size() > 8 ? passes::constant_data(g, in[8]) : eval::TensorRef{};
       eval::HostTensor scale(ir::DType::F32, ir::Shape{channels}), shift(ir::DType::F32, ir::Shape{channels});
       for (int64_t o = 0; o < channels; ++o) {
         const float m = r.multiplier[r.multiplier.size() == 1 ? 0 : static_cast<size_t>(o)];
         eval::store_f(scale, o, m);
         eval::store_f(shift, o, (bias.bytes ? static_cast<float>(eval::load_i(bias, o)) * m : 0.0f) + r.zero_point);
       }
       return std::vector<eval::HostTensor>{scale, shift};
     }},
    {OpKind::matmul_nbits, weight_quant_matmul,
     [](const AclnnBuilder& b) {
       // x @ ((w + offset) · scale): the codes as signed ints in storage (n, k), read as their
       // transposed view (k, n); the scales and offsets per group (blocks, n), or per column.
       const ir::MatmulNbitsAttrs a(b.g, b.n);
       const std::vector<int64_t> codes = b.dims(b.input_value(1));
       const int64_t n = codes[0], blocks = codes[1], k = blocks * a.block_size;
       const int64_t rows = b.g.shape(b.input_value(0)).num_elements() / k;
       const aclnn::DataType type = data_type(b.g.values[b.input_value(0)].dtype);
       const std::vector<int64_t> groups = blocks == 1 ? std::vector<int64_t>{n} : std::vector<int64_t>{blocks, n};
       return b.bind(ESG_ACLNN_OP(aclnnWeightQuantBatchMatmulV2), b.make.tensor({rows, k}, type, b.in[0]),
                     b.make.tensor({n, k}, a.bits == 4 ? aclnn::kInt4 : aclnn::kInt8, b.constants[0], true),
                     b.make.tensor(groups, type, b.constants[1]),
                     b.constants.size() > 2 ? b.make.tensor(groups, type, b.constants[2]) : nullptr, nullptr, nullptr, nullptr,
                     static_cast<int>(blocks == 1 ? 0 : a.block_size), b.make.tensor({rows, n}, type, b.out[0]));
     },
     false,
     [](const ir::Graph& g, const ir::Node& n) {
       const auto in = g.inputs(n);
       const ir::MatmulNbitsAttrs a(g, n);
       const ir::DType type = g.values[in[0]].dtype;
       const eval::TensorRef codes = passes::constant_data(g, in[1]), scales = passes::constant_data(g, in[2]);
       const eval::TensorRef zero_points = in.size() > 3 ? passes::constant_data(g, in[3]) : eval::TensorRef{};
       const int64_t columns = codes.shape[0], blocks = codes.shape[1];
       // Codes less 2^(bits-1) in two's complement: each byte's top bit flipped (8 bits), each
       // nibble's (4 bits: INT4 packs two a byte, the first in the low half, as the codes lie).
       eval::HostTensor weights(ir::DType::U8, codes.shape);
       const uint8_t flip = a.bits == 8 ? 0x80 : 0x88;
       for (int64_t i = 0; i < codes.size(); ++i) weights.bytes[static_cast<size_t>(i)] = codes.data<uint8_t>()[i] ^ flip;
       const ir::Shape groups = blocks == 1 ? ir::Shape{columns} : ir::Shape{blocks, columns};
       eval::HostTensor scale(type, groups), offset(type, groups);
       const int64_t half = int64_t{1} << (a.bits - 1);
       for (int64_t j = 0; j < columns; ++j)
         for (int64_t g_ = 0; g_ < blocks; ++g_) {
           eval::store_f(scale, g_ * columns + j, eval::load_f(scales, j * blocks + g_));
           eval::store_f(offset, g_ * columns + j, static_cast<double>(half - (zero_points.bytes ? eval::load_i(zero_points, j * blocks + g_) : half)));
         }
       std::vector<eval::HostTensor> made = {weights, scale};
       if (zero_points.bytes) made.push_back(offset);  // (w - 2^(bits-1) + 2^(bits-1) - zp) · scale
       return made;
     },
     0b1110u},  // the codes, scales and zero points: its own forms stand for them
    {OpKind::conv2d,
     [](const ir::Graph& g, const ir::Node& n) -> std::string {
       if (std::string why = floats(g, n); !why.empty()) return why;
       const ir::Conv2dAttrs a(g, n);
       const ir::Span<int64_t> pads = a.pads;
       if (pads[0] != pads[2] || pads[1] != pads[3]) return "asymmetric padding (aclnnConvolution pads both sides alike)";
       if (pads[0] > 255 || pads[1] > 255) return "padding beyond 255 (aclnnConvolution's limit for 2-D on Atlas A2)";
       return a.groups > 65535 ? "more than 65535 groups (aclnnConvolution's limit)" : "";
     },
     [](const AclnnBuilder& b) {
       const ir::Conv2dAttrs a(b.g, b.n);
       // Pads top = bottom and left = right (checked); not transposed, so no output padding.
       // cubeMathType: ops-nn's aclnnConvolution.md documents KEEP_DTYPE (0) as not supported for
       // FLOAT on Atlas A2/A3 and Atlas inference products alike; ALLOW_FP32_DOWN_PRECISION (1) is
       // what every one of them takes (HFLOAT32 on A2/A3, FLOAT16 on 310P). f16 and bf16 keep their type.
       const int8_t cube_math = b.g.values[b.n.first_output].dtype == ir::DType::F32 ? 1 : 0;
       return b.bind(ESG_ACLNN_OP(aclnnConvolution), b.input(0), b.input(1), b.input(2), first_two(b, a.strides),
                     first_two(b, a.pads), first_two(b, a.dilations), false, b.make.int_array({0, 0}), a.groups, b.output(),
                     cube_math);
     },
     kImages},
    {OpKind::max_pool2d,
     [](const ir::Graph& g, const ir::Node& n) -> std::string {
       if (std::string why = floats(g, n); !why.empty()) return why;
       const ir::MaxPool2dAttrs a(g, n);
       const ir::Span<int64_t> pads = a.pads, kernel = a.kernel;
       if (pads[0] + pads[2] > kernel[0] || pads[1] + pads[3] > kernel[1])
         return "more padding than the window (aclnnMaxPool takes at most a window's)";
       return g.values[n.first_output].dtype == ir::DType::BF16 ? "bf16 (aclnnMaxPool takes f16 and f32 on Atlas A2)" : "";
     },
     [](const AclnnBuilder& b) {
       const ir::MaxPool2dAttrs a(b.g, b.n);
       const ir::Span<int64_t> pads = a.pads;
       // autoPad 0 (NOTSET): the pads, top, left, bottom, right; no dilation.
       return b.bind(ESG_ACLNN_OP(aclnnMaxPool), b.input(0), first_two(b, a.kernel), first_two(b, a.strides), int64_t{0},
                     b.make.int_array({pads[0], pads[1], pads[2], pads[3]}), b.make.int_array({1, 1}),
                     static_cast<int64_t>(a.ceil_mode), b.output());
     }},
    {OpKind::avg_pool2d,
     [](const ir::Graph& g, const ir::Node& n) -> std::string {
       if (std::string why = floats(g, n); !why.empty()) return why;
       const ir::AvgPool2dAttrs a(g, n);
       const ir::Span<int64_t> pads = a.pads, kernel = a.kernel;
       if (pads[0] != pads[2] || pads[1] != pads[3]) return "asymmetric padding (aclnnAvgPool2d pads both sides alike)";
       if (2 * pads[0] > kernel[0] || 2 * pads[1] > kernel[1])
         return "padding beyond half the window (aclnnAvgPool2d takes at most kernel / 2)";
       return "";
     },
     [](const AclnnBuilder& b) {
       const ir::AvgPool2dAttrs a(b.g, b.n);
       // One pad per axis (checked symmetric); the mean of the window's elements inside the input,
       // as the CPU's: countIncludePad false, no divisor, cubeMathType 0.
       return b.bind(ESG_ACLNN_OP(aclnnAvgPool2d), b.input(0), first_two(b, a.kernel), first_two(b, a.strides),
                     first_two(b, a.pads), a.ceil_mode, false, int64_t{0}, int8_t{0}, b.output());
     },
     kImages},
    {OpKind::softmax,
     [](const ir::Graph& g, const ir::Node& n) -> std::string {
       if (std::string why = floats(g, n); !why.empty()) return why;
       if (n.num_inputs > 1 && g.operands[n.first_input + 1] != ir::kNone) return "a mask (aclnnSoftmax has none)";
       return ir::SoftmaxAttrs(g, n).scale != 1.0 ? "a scale (aclnnSoftmax has none)" : "";
     },
     [](const AclnnBuilder& b) {
       return b.bind(ESG_ACLNN_OP(aclnnSoftmax), b.input(0), static_cast<int64_t>(ir::SoftmaxAttrs(b.g, b.n).axis), b.output());
     }},
    {OpKind::reduce_sum, floats, [](const AclnnBuilder& b) { return reduce(b, ESG_ACLNN_OP(aclnnReduceSum), b.out_type()); }},
    {OpKind::reduce_mean, floats, [](const AclnnBuilder& b) { return reduce(b, ESG_ACLNN_OP(aclnnMean), b.out_type()); }},
    {OpKind::reduce_max, floats, [](const AclnnBuilder& b) { return reduce(b, ESG_ACLNN_OP(aclnnAmax)); }},
    {OpKind::reduce_min, floats, [](const AclnnBuilder& b) { return reduce(b, ESG_ACLNN_OP(aclnnAmin)); }},
    {OpKind::reduce_prod,
     [](const ir::Graph& g, const ir::Node& n) -> std::string {
       if (std::string why = floats(g, n); !why.empty()) return why;
       const size_t axes = ir::ReduceProdAttrs(g, n).axes.size(), rank = g.shape(g.operands[n.first_input]).rank();
       return axes > 1 && axes < rank ? "a product over some but not all axes (aclnnProdDim takes one, aclnnProd all)" : "";
     },
     [](const AclnnBuilder& b) {
       const ir::ReduceProdAttrs a(b.g, b.n);
       if (a.axes.size() == 1 && b.g.shape(b.input_value(0)).rank() > 1)
         return b.bind(ESG_ACLNN_OP(aclnnProdDim), b.input(0), static_cast<int64_t>(a.axes[0]), a.keepdims, b.out_type(),
                       b.output());
       // Every axis: the result is one element, whatever its shape says.
       return b.bind(ESG_ACLNN_OP(aclnnProd), b.input(0), b.out_type(), b.make.tensor({}, b.out_type(), b.out[0]));
     }},
    {OpKind::argmax, floats, [](const AclnnBuilder& b) { return arg_reduce(b, ESG_ACLNN_OP(aclnnArgMax)); }},
    {OpKind::argmin, floats, [](const AclnnBuilder& b) { return arg_reduce(b, ESG_ACLNN_OP(aclnnArgMin)); }},
    {OpKind::top_k, floats,
     [](const AclnnBuilder& b) {  // values and i64 indices, sorted
       const ir::TopKAttrs a(b.g, b.n);
       return b.bind(ESG_ACLNN_OP(aclnnTopk), b.input(0), a.k, static_cast<int64_t>(a.axis), a.largest, true, b.output(0),
                     b.output(1));
     }},
    {OpKind::transpose, floats,
     [](const AclnnBuilder& b) {
       const ir::TransposeAttrs a(b.g, b.n);
       std::vector<int64_t> perm(a.perm.begin(), a.perm.end());
       if (perm.empty())  // the default: reversed
         for (size_t d = b.g.shape(b.input_value(0)).rank(); d-- > 0;) perm.push_back(static_cast<int64_t>(d));
       return b.bind(ESG_ACLNN_OP(aclnnPermute), b.input(0), b.make.int_array(perm), b.output());
     }},
    {OpKind::concat, floats,
     [](const AclnnBuilder& b) {
       std::vector<aclnn::Tensor*> parts;
       for (uint32_t i = 0; i < b.n.num_inputs; ++i) parts.push_back(b.input(i));
       const int64_t axis = static_cast<int64_t>(ir::ConcatAttrs(b.g, b.n).axis);
       return b.bind(ESG_ACLNN_OP(aclnnCat), b.make.tensor_list(parts), axis, b.output());
     }},
    {OpKind::slice,
     [](const ir::Graph& g, const ir::Node& n) -> std::string {
       if (std::string why = floats(g, n); !why.empty()) return why;
       for (int64_t step : ir::SliceAttrs(g, n).steps)
         if (step < 0) return "a negative step (a view with negative strides)";
       return "";
     },
     [](const AclnnBuilder& b) {
       // The slice as a strided view of x (offset at the starts, strides times the steps), copied
       // into the result by aclnnInplaceCopy.
       const ir::ValueId x = b.input_value(0);
       const std::vector<int64_t> storage = b.dims(x), strides = row_major_strides(storage), ys = b.dims(b.n.first_output);
       const size_t rank = storage.size();
       std::vector<int64_t> steps(rank, 1), starts(rank, 0);
       const ir::SliceAttrs a(b.g, b.n);
       for (size_t i = 0; i < a.starts.size(); ++i) {
         const size_t d = a.axes.size() ? a.axes[i] : i;
         const int64_t dim = storage[d];
         const int64_t start = a.starts[i] < 0 ? a.starts[i] + dim : a.starts[i];
         starts[d] = std::min(std::max<int64_t>(start, 0), dim);
         steps[d] = a.steps.size() ? a.steps[i] : 1;
       }
       int64_t offset = 0;
       std::vector<int64_t> view_strides(rank);
       for (size_t d = 0; d < rank; ++d) {
         offset += ys[d] ? starts[d] * strides[d] : 0;
         view_strides[d] = strides[d] * steps[d];
       }
       aclnn::Tensor* src = b.make.view(ys, view_strides, offset, storage, data_type(b.g.values[x].dtype), b.in[0]);
       return b.bind(ESG_ACLNN_OP(aclnnInplaceCopy), b.output(), src);
     }},
    {OpKind::gather, floats_and_index,
     [](const AclnnBuilder& b) {
       // IndexSelect takes one axis of indices: the index tensor as a flat view of its elements,
       // the result as a view with those elements on the axis (the same bytes, row-major).
       const ir::ValueId index = b.input_value(1);
       const int64_t picks = b.g.shape(index).num_elements();
       const size_t axis = ir::GatherAttrs(b.g, b.n).axis;
       std::vector<int64_t> dims = b.dims(b.input_value(0));
       dims[axis] = picks;
       return b.bind(ESG_ACLNN_OP(aclnnIndexSelect), b.input(0), static_cast<int64_t>(axis),
                     b.make.tensor({picks}, data_type(b.g.values[index].dtype), b.in[1]),
                     b.make.tensor(dims, b.out_type(), b.out[0]));
     }},
    {OpKind::scatter_elements,
     [](const ir::Graph& g, const ir::Node& n) -> std::string {
       if (std::string why = floats_and_index(g, n); !why.empty()) return why;
       const ir::ScatterElementsReduction r = ir::ScatterElementsAttrs(g, n).reduction;
       return r == ir::ScatterElementsReduction::max || r == ir::ScatterElementsReduction::min
                  ? "a max or min reduction (aclnnScatter's reduce is none, add or mul)"
                  : "";
     },
     [](const AclnnBuilder& b) {
       const ir::ScatterElementsAttrs a(b.g, b.n);
       // The reduction none, add, mul is CANN's reduce 0, 1, 2.
       return b.bind(ESG_ACLNN_OP(aclnnScatter), b.input(0), static_cast<int64_t>(a.axis), b.input(1), b.input(2),
                     static_cast<int64_t>(a.reduction), b.output());
     }},
    {OpKind::scatter_nd,
     [](const ir::Graph& g, const ir::Node& n) -> std::string {
       if (std::string why = floats_and_index(g, n); !why.empty()) return why;
       return ir::ScatterNdAttrs(g, n).reduction != ir::ScatterNdReduction::none ? "a reduction (aclnnScatterNd replaces)" : "";
     },
     [](const AclnnBuilder& b) { return b.bind(ESG_ACLNN_OP(aclnnScatterNd), b.input(0), b.input(1), b.input(2), b.output()); }},
    {OpKind::expand,
     [](const ir::Graph& g, const ir::Node& n) {  // bool too: masks broadcast to their scores
       return g.values[g.operands[n.first_input]].dtype == ir::DType::Bool ? std::string() : floats(g, n);
     },
     [](const AclnnBuilder& b) {
       return b.bind(ESG_ACLNN_OP(aclnnExpand), b.input(0), b.make.int_array(b.dims(b.n.first_output)), b.output());
     }},
    {OpKind::pad,
     [](const ir::Graph& g, const ir::Node& n) -> std::string {
       if (std::string why = floats(g, n); !why.empty()) return why;
       const ir::PadAttrs a(g, n);
       if (a.mode == ir::PadMode::constant) return "";
       const ir::Shape xs = g.shape(g.operands[n.first_input]);
       const size_t rank = xs.rank();
       if (rank == 0) return "reflect or edge padding of a rank-0 tensor";
       for (size_t d = 0; d + 2 < rank; ++d)
         if (a.pads[d] || a.pads[rank + d])
           return "reflect or edge padding of other axes than the last two (aclnnReflectionPad2d and aclnnReplicationPad2d "
                  "pad those)";
       for (size_t d = rank < 2 ? 0 : rank - 2; d < rank; ++d)
         if ((a.pads[d] || a.pads[rank + d]) && (a.pads[d] >= xs[d] || a.pads[rank + d] >= xs[d]))
           return "reflect or edge padding of an axis by its length or more (CANN's border pads take less)";
       return "";
     },
     [](const AclnnBuilder& b) {
       const ir::PadAttrs a(b.g, b.n);
       const ir::ValueId x = b.input_value(0);
       const size_t rank = b.g.shape(x).rank();
       if (a.mode == ir::PadMode::constant) {
         // (before, after) pairs from the last axis on; the value as a scalar.
         std::vector<int64_t> pairs;
         for (size_t d = rank; d-- > 0;) pairs.push_back(a.pads[d]), pairs.push_back(a.pads[rank + d]);
         return b.bind(ESG_ACLNN_OP(aclnnConstantPadNd), b.input(0), b.make.int_array(pairs),
                       b.make.scalar(static_cast<float>(a.value)), b.output());
       }
       // Reflection and replication pads take the last two dims: x and the result as 3-D views
       // [the other dims, H, W], the padding as left, right, top, bottom.
       auto as_3d = [&](ir::ValueId v) {
         const ir::Shape s = b.g.shape(v);
         const int64_t h = rank >= 2 ? s[rank - 2] : 1;
         return std::vector<int64_t>{s.num_elements() / std::max<int64_t>(1, h * s[rank - 1]), h, s[rank - 1]};
       };
       const ir::Span<int64_t> pads = a.pads;
       const int64_t top = rank >= 2 ? pads[rank - 2] : 0, bottom = rank >= 2 ? pads[2 * rank - 2] : 0;
       return b.bind(a.mode == ir::PadMode::reflect ? ESG_ACLNN_OP(aclnnReflectionPad2d) : ESG_ACLNN_OP(aclnnReplicationPad2d),
                     b.make.tensor(as_3d(x), data_type(b.g.values[x].dtype), b.in[0]),
                     b.make.int_array({pads[rank - 1], pads[2 * rank - 1], top, bottom}),
                     b.make.tensor(as_3d(b.n.first_output), b.out_type(), b.out[0]));
     }},
    {OpKind::fill, library_result,
     [](const AclnnBuilder& b) {  // the result filled in place
       return b.bind(ESG_ACLNN_OP(aclnnInplaceFillScalar), b.output(), b.make.scalar(ir::FillAttrs(b.g, b.n).value));
     }},
    {OpKind::range,
     [](const ir::Graph& g, const ir::Node& n) -> std::string {
       if (std::string why = library_result(g, n); !why.empty()) return why;
       if (g.values[n.first_output].dtype == ir::DType::Bool) return "bool (aclnnArange makes f32, f16, bf16, i32 and i64)";
       return g.shape(n.first_output).num_elements() == 0 ? "an empty range (aclnnArange needs start before end)" : "";
     },
     [](const AclnnBuilder& b) {
       const ir::RangeAttrs a(b.g, b.n);
       return b.bind(ESG_ACLNN_OP(aclnnArange), b.make.scalar(a.start), b.make.scalar(a.limit), b.make.scalar(a.step),
                     b.output());
     }},
    {OpKind::add, library_values, [](const AclnnBuilder& b) { return add_sub(b, ESG_ACLNN_OP(aclnnAdd)); }},
    {OpKind::sub, library_values, [](const AclnnBuilder& b) { return add_sub(b, ESG_ACLNN_OP(aclnnSub)); }},
    {OpKind::mul, library_values, [](const AclnnBuilder& b) { return binary(b, ESG_ACLNN_OP(aclnnMul)); }},
    {OpKind::maximum, library_values, [](const AclnnBuilder& b) { return binary(b, ESG_ACLNN_OP(aclnnMaximum)); }},
    {OpKind::minimum, library_values, [](const AclnnBuilder& b) { return binary(b, ESG_ACLNN_OP(aclnnMinimum)); }},
    {OpKind::neg, library_values, [](const AclnnBuilder& b) { return unary(b, ESG_ACLNN_OP(aclnnNeg)); }},
    {OpKind::abs, library_values, [](const AclnnBuilder& b) { return unary(b, ESG_ACLNN_OP(aclnnAbs)); }},
    {OpKind::greater, library_values, [](const AclnnBuilder& b) { return binary(b, ESG_ACLNN_OP(aclnnGtTensor)); }},
    {OpKind::greater_equal, library_values, [](const AclnnBuilder& b) { return binary(b, ESG_ACLNN_OP(aclnnGeTensor)); }},
    {OpKind::less, library_values, [](const AclnnBuilder& b) { return binary(b, ESG_ACLNN_OP(aclnnLtTensor)); }},
    {OpKind::less_equal, library_values, [](const AclnnBuilder& b) { return binary(b, ESG_ACLNN_OP(aclnnLeTensor)); }},
    {OpKind::equal, library_values, [](const AclnnBuilder& b) { return binary(b, ESG_ACLNN_OP(aclnnEqTensor)); }},
    {OpKind::not_equal, library_values, [](const AclnnBuilder& b) { return binary(b, ESG_ACLNN_OP(aclnnNeTensor)); }},
    {OpKind::where, library_values,
     [](const AclnnBuilder& b) { return b.bind(ESG_ACLNN_OP(aclnnSWhere), b.input(0), b.input(1), b.input(2), b.output()); }},
    {OpKind::cast, cast_values,
     [](const AclnnBuilder& b) { return b.bind(ESG_ACLNN_OP(aclnnCast), b.input(0), b.out_type(), b.output()); }},
};

}  // namespace

ir::Span<AclnnLowering> aclnn_lowerings() { return {kLowerings, std::size(kLowerings)}; }

}  // namespace esg::ascend
