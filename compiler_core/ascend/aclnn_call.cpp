#include "ascend/aclnn_call.hpp"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <numeric>

#include "ir/error.hpp"
#include "ir/op_attrs.gen.hpp"

namespace esg::ascend {
namespace {

// Element strides of a contiguous row-major tensor.
std::vector<int64_t> row_major_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t d = dims.size(); d-- > 1;) strides[d - 1] = strides[d] * std::max<int64_t>(dims[d], 1);
  return strides;
}

// aclDataType of the element types the calls take (unsupported() admits no others).
aclnn::DataType data_type(ir::DType t) {
  switch (t) {
    case ir::DType::F16: return aclnn::kFloat16;
    case ir::DType::BF16: return aclnn::kBf16;
    case ir::DType::I32: return aclnn::kInt32;
    case ir::DType::I64: return aclnn::kInt64;
    case ir::DType::Bool: return aclnn::kBool;
    default: return aclnn::kFloat;
  }
}

}  // namespace

// The ops with an aclnn mapping (the constructor's cases).
constexpr ir::OpKind kMapped[] = {ir::OpKind::matmul, ir::OpKind::conv2d, ir::OpKind::max_pool2d, ir::OpKind::avg_pool2d,
                                  ir::OpKind::softmax, ir::OpKind::reduce_sum, ir::OpKind::reduce_mean, ir::OpKind::reduce_max,
                                  ir::OpKind::reduce_min, ir::OpKind::reduce_prod, ir::OpKind::argmax, ir::OpKind::argmin,
                                  ir::OpKind::top_k, ir::OpKind::transpose, ir::OpKind::concat, ir::OpKind::slice, ir::OpKind::gather,
                                  ir::OpKind::scatter_elements, ir::OpKind::scatter_nd, ir::OpKind::expand, ir::OpKind::pad,
                                  ir::OpKind::fill, ir::OpKind::range, ir::OpKind::add, ir::OpKind::sub, ir::OpKind::mul,
                                  ir::OpKind::maximum, ir::OpKind::minimum, ir::OpKind::neg, ir::OpKind::abs, ir::OpKind::greater,
                                  ir::OpKind::greater_equal, ir::OpKind::less, ir::OpKind::less_equal, ir::OpKind::equal,
                                  ir::OpKind::not_equal, ir::OpKind::where, ir::OpKind::cast};

// The elementwise ops the library runs one by one: those of integer values, which the generated
// kernels do not compute (kernel_source.hpp), as CANN's ops of the same names.
struct ElementwiseCall {
  ir::OpKind op;
  const char* name;
  aclnn::BinaryPlan aclnn::Functions::*binary;
  aclnn::UnaryPlan aclnn::Functions::*unary;
  aclnn::RunFn aclnn::Functions::*run;
};
const ElementwiseCall kElementwise[] = {
    {ir::OpKind::mul, "aclnnMul", &aclnn::Functions::aclnnMulGetWorkspaceSize, nullptr, &aclnn::Functions::aclnnMul},
    {ir::OpKind::maximum, "aclnnMaximum", &aclnn::Functions::aclnnMaximumGetWorkspaceSize, nullptr, &aclnn::Functions::aclnnMaximum},
    {ir::OpKind::minimum, "aclnnMinimum", &aclnn::Functions::aclnnMinimumGetWorkspaceSize, nullptr, &aclnn::Functions::aclnnMinimum},
    {ir::OpKind::greater, "aclnnGtTensor", &aclnn::Functions::aclnnGtTensorGetWorkspaceSize, nullptr, &aclnn::Functions::aclnnGtTensor},
    {ir::OpKind::greater_equal, "aclnnGeTensor", &aclnn::Functions::aclnnGeTensorGetWorkspaceSize, nullptr, &aclnn::Functions::aclnnGeTensor},
    {ir::OpKind::less, "aclnnLtTensor", &aclnn::Functions::aclnnLtTensorGetWorkspaceSize, nullptr, &aclnn::Functions::aclnnLtTensor},
    {ir::OpKind::less_equal, "aclnnLeTensor", &aclnn::Functions::aclnnLeTensorGetWorkspaceSize, nullptr, &aclnn::Functions::aclnnLeTensor},
    {ir::OpKind::equal, "aclnnEqTensor", &aclnn::Functions::aclnnEqTensorGetWorkspaceSize, nullptr, &aclnn::Functions::aclnnEqTensor},
    {ir::OpKind::not_equal, "aclnnNeTensor", &aclnn::Functions::aclnnNeTensorGetWorkspaceSize, nullptr, &aclnn::Functions::aclnnNeTensor},
    {ir::OpKind::neg, "aclnnNeg", nullptr, &aclnn::Functions::aclnnNegGetWorkspaceSize, &aclnn::Functions::aclnnNeg},
    {ir::OpKind::abs, "aclnnAbs", nullptr, &aclnn::Functions::aclnnAbsGetWorkspaceSize, &aclnn::Functions::aclnnAbs},
};

bool library_type(ir::DType t) {
  return t == ir::DType::F32 || t == ir::DType::F16 || t == ir::DType::BF16 || t == ir::DType::Bool || t == ir::DType::I32 ||
         t == ir::DType::I64;
}

std::string AclnnCall::mapped_ops() {
  std::string list;
  for (ir::OpKind k : kMapped)  // those this op set has (an older one lacks some)
    if (const ir::OpSchema* op = ir::find_op(k)) list += (list.empty() ? "" : ", ") + std::string(op->name);
  return list;
}

std::string AclnnCall::unsupported(const ir::Graph& g, const ir::Node& n) {
  const ir::OpKind k = n.op->kind;
  const ir::DType result = g.values[n.first_output].dtype;
  if (n.op->elementwise && k == ir::OpKind::div)
    return std::string(ir::dtype_is_float(result) ? ir::dtype_name(result) : "integer") +
           " division (the generated kernels divide f32, f16 and bf16; not mapped to aclnn yet)";
  if (std::none_of(std::begin(kMapped), std::end(kMapped), [&](ir::OpKind m) { return k == m; })) return "no aclnn mapping";
  if (n.op->elementwise) {
    auto refused = [](ir::DType t) {
      return std::string(ir::dtype_name(t)) + (ir::dtype_is_float(t) ? " (f32, f16 and bf16 only among floats)" : " (i32 and i64 only among integers)");
    };
    for (ir::ValueId v : g.inputs(n))
      if (v != ir::kNone && !library_type(g.values[v].dtype)) return refused(g.values[v].dtype);
    return library_type(result) ? "" : refused(result);
  }
  for (uint32_t i = 0; i < n.num_inputs; ++i) {
    const ir::ValueId v = g.operands[n.first_input + i];
    const bool index =
        (k == ir::OpKind::gather || k == ir::OpKind::scatter_elements || k == ir::OpKind::scatter_nd) && i == 1;  // i32 or i64 by the signature
    const ir::DType t = v == ir::kNone ? ir::DType::F32 : g.values[v].dtype;
    const bool bool_expand = k == ir::OpKind::expand && t == ir::DType::Bool;  // masks broadcast to their scores
    if (!index && !bool_expand && t != ir::DType::F32 && t != ir::DType::F16 && t != ir::DType::BF16) return "f32, f16 and bf16 only so far";
  }
  if (k == ir::OpKind::softmax && (n.num_inputs > 1 && g.operands[n.first_input + 1] != ir::kNone)) return "a mask (aclnnSoftmax has none)";
  if (k == ir::OpKind::softmax && ir::SoftmaxAttrs(g, n).scale != 1.0) return "a scale (aclnnSoftmax has none)";
  if (k == ir::OpKind::slice)
    for (int64_t step : ir::SliceAttrs(g, n).steps)
      if (step < 0) return "a negative step (a view with negative strides)";
  if (k == ir::OpKind::avg_pool2d) {
    const ir::AvgPool2dAttrs a(g, n);
    const ir::Span<int64_t> pads = a.pads, kernel = a.kernel;
    if (pads[0] != pads[2] || pads[1] != pads[3]) return "asymmetric padding (aclnnAvgPool2d pads both sides alike)";
    if (2 * pads[0] > kernel[0] || 2 * pads[1] > kernel[1]) return "padding beyond half the window (aclnnAvgPool2d takes at most kernel / 2)";
  }
  if (k == ir::OpKind::max_pool2d) {
    const ir::MaxPool2dAttrs a(g, n);
    const ir::Span<int64_t> pads = a.pads, kernel = a.kernel;
    if (pads[0] + pads[2] > kernel[0] || pads[1] + pads[3] > kernel[1]) return "more padding than the window (aclnnMaxPool takes at most a window's)";
    if (g.values[n.first_output].dtype == ir::DType::BF16) return "bf16 (aclnnMaxPool takes f16 and f32 on Atlas A2)";
  }
  if (k == ir::OpKind::conv2d) {
    const ir::Span<int64_t> pads = ir::Conv2dAttrs(g, n).pads;
    if (pads[0] != pads[2] || pads[1] != pads[3]) return "asymmetric padding (aclnnConvolution pads both sides alike)";
  }
  if (k == ir::OpKind::reduce_prod) {
    const size_t axes = ir::ReduceProdAttrs(g, n).axes.size(), rank = g.shape(g.operands[n.first_input]).rank();
    if (axes > 1 && axes < rank) return "a product over some but not all axes (aclnnProdDim takes one, aclnnProd all)";
  }
  if (k == ir::OpKind::pad && ir::PadAttrs(g, n).mode != ir::PadMode::constant) {
    const ir::Shape& xs = g.shape(g.operands[n.first_input]);
    const size_t rank = xs.rank();
    const ir::Span<int64_t> pads = ir::PadAttrs(g, n).pads;
    if (rank == 0) return "reflect or edge padding of a rank-0 tensor";
    for (size_t d = 0; d + 2 < rank; ++d)
      if (pads[d] || pads[rank + d]) return "reflect or edge padding of other axes than the last two (aclnnReflectionPad2d and aclnnReplicationPad2d pad those)";
    for (size_t d = rank < 2 ? 0 : rank - 2; d < rank; ++d)
      if ((pads[d] || pads[rank + d]) && (pads[d] >= xs[d] || pads[rank + d] >= xs[d]))
        return "reflect or edge padding of an axis by its length or more (CANN's border pads take less)";
  }
  if (k == ir::OpKind::scatter_nd && ir::ScatterNdAttrs(g, n).reduction != ir::ScatterNdReduction::none)
    return "a reduction (aclnnScatterNd replaces)";
  if ((k == ir::OpKind::fill || k == ir::OpKind::range) && !library_type(result))
    return std::string(ir::dtype_name(result)) + " (f32, f16, bf16, bool, i32 and i64 only)";
  if (k == ir::OpKind::range && g.shape(n.first_output).num_elements() == 0) return "an empty range (aclnnArange needs start before end)";
  return "";
}

aclnn::Tensor* AclnnCall::tensor(const ir::Graph& g, ir::ValueId v, void* data, bool transpose_last_two) {
  const ir::Shape& s = g.shape(v);
  const ir::DType t = g.values[v].dtype;
  return tensor_of(std::vector<int64_t>(s.begin(), s.end()), data_type(t), data, transpose_last_two);
}

aclnn::Tensor* AclnnCall::tensor_of(std::vector<int64_t> dims, aclnn::DataType dtype, void* data, bool transpose_last_two) {
  std::vector<int64_t> strides = row_major_strides(dims);
  const std::vector<int64_t> storage = dims;
  if (transpose_last_two && dims.size() >= 2) {  // a strided view: no copy
    std::swap(dims[dims.size() - 1], dims[dims.size() - 2]);
    std::swap(strides[strides.size() - 1], strides[strides.size() - 2]);
  }
  return view(dims, strides, 0, storage, dtype, data);
}

aclnn::Tensor* AclnnCall::view(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides, int64_t offset,
                               const std::vector<int64_t>& storage, aclnn::DataType dtype, void* data) {
  aclnn::Tensor* t = lib_.aclCreateTensor(dims.data(), dims.size(), dtype, strides.data(), offset, format_, storage.data(),
                                          storage.size(), data);
  if (!t) throw ir::Error(ir::ErrorCode::Backend, "ascend: aclCreateTensor failed");
  return t;
}

AclnnCall::AclnnCall(const AclnnLibrary& lib, const ir::Graph& g, const ir::Node& n, const std::vector<void*>& in,
                     const std::vector<void*>& out)
    : lib_(lib) {
  const ir::OpKind k = n.op->kind;
  const ir::ValueId x = n.num_inputs ? g.operands[n.first_input] : ir::kNone;  // none for fill and range
  const size_t rank = x == ir::kNone ? 0 : g.shape(x).rank();
  // aclnnAvgPool2d refuses ND descriptors (CANN's documentation): its 4-D tensors are NCHW.
  if (k == ir::OpKind::avg_pool2d) format_ = aclnn::kFormatNchw;
  try {
    for (uint32_t i = 0; i < n.num_outputs; ++i) out_.push_back(tensor(g, n.first_output + i, out[i]));
    out_type_ = data_type(g.values[n.first_output].dtype);
    if (k == ir::OpKind::matmul) {
      const ir::MatmulAttrs a(g, n);
      name_ = "aclnnMatmul", kind_ = Kind::Matmul, run_ = lib_.aclnnMatmul;
      in_.push_back(tensor(g, x, in[0], a.transpose_a));
      in_.push_back(tensor(g, g.operands[n.first_input + 1], in[1], a.transpose_b));
    } else if (k == ir::OpKind::softmax) {
      name_ = "aclnnSoftmax", kind_ = Kind::Softmax, run_ = lib_.aclnnSoftmax;
      in_.push_back(tensor(g, x, in[0]));
      dim_ = static_cast<int64_t>(ir::SoftmaxAttrs(g, n).axis);
    } else if (k == ir::OpKind::reduce_sum || k == ir::OpKind::reduce_mean || k == ir::OpKind::reduce_max || k == ir::OpKind::reduce_min) {
      in_.push_back(tensor(g, x, in[0]));
      if (k == ir::OpKind::reduce_sum) name_ = "aclnnReduceSum", kind_ = Kind::ReduceSum, run_ = lib_.aclnnReduceSum;
      if (k == ir::OpKind::reduce_mean) name_ = "aclnnMean", kind_ = Kind::Mean, run_ = lib_.aclnnMean;
      if (k == ir::OpKind::reduce_max) name_ = "aclnnAmax", kind_ = Kind::Amax, run_ = lib_.aclnnAmax;
      if (k == ir::OpKind::reduce_min) name_ = "aclnnAmin", kind_ = Kind::Amin, run_ = lib_.aclnnAmin;
      const ir::ReduceSumAttrs a(g, n);  // every reduction's view
      std::vector<int64_t> axes(a.axes.begin(), a.axes.end());
      if (axes.empty()) axes.resize(rank), std::iota(axes.begin(), axes.end(), 0);  // every axis
      int_array(axes);
      keep_dims_ = a.keepdims;
    } else if (k == ir::OpKind::reduce_prod) {
      in_.push_back(tensor(g, x, in[0]));
      const ir::ReduceProdAttrs a(g, n);
      if (a.axes.size() == 1 && rank > 1) {
        name_ = "aclnnProdDim", kind_ = Kind::ProdDim, run_ = lib_.aclnnProdDim;
        dim_ = static_cast<int64_t>(a.axes[0]);
        keep_dims_ = a.keepdims;
      } else {  // every axis: the result is one element, whatever its shape says
        name_ = "aclnnProd", kind_ = Kind::Prod, run_ = lib_.aclnnProd;
        lib_.aclDestroyTensor(out_[0]);
        out_[0] = nullptr;
        out_[0] = tensor_of({}, out_type_, out[0]);
      }
    } else if (k == ir::OpKind::argmax || k == ir::OpKind::argmin) {
      const bool max = k == ir::OpKind::argmax;
      name_ = max ? "aclnnArgMax" : "aclnnArgMin", kind_ = max ? Kind::ArgMax : Kind::ArgMin;
      run_ = max ? lib_.aclnnArgMax : lib_.aclnnArgMin;
      in_.push_back(tensor(g, x, in[0]));
      const ir::ArgmaxAttrs a(g, n);  // argmin's view too
      dim_ = static_cast<int64_t>(a.axis);
      keep_dims_ = a.keepdims;
    } else if (k == ir::OpKind::top_k) {  // values and indices (i64), in order: sorted
      const ir::TopKAttrs a(g, n);
      name_ = "aclnnTopk", kind_ = Kind::Topk, run_ = lib_.aclnnTopk;
      in_.push_back(tensor(g, x, in[0]));
      k_ = a.k;
      dim_ = static_cast<int64_t>(a.axis);
      largest_ = a.largest;
    } else if (k == ir::OpKind::add || k == ir::OpKind::sub) {  // self + alpha · other, alpha 1 (an integer, as integer tensors want)
      const bool add = k == ir::OpKind::add;
      name_ = add ? "aclnnAdd" : "aclnnSub", kind_ = Kind::AddSub, run_ = add ? lib_.aclnnAdd : lib_.aclnnSub;
      subtract_ = !add;
      in_.push_back(tensor(g, x, in[0]));
      in_.push_back(tensor(g, g.operands[n.first_input + 1], in[1]));
      scalar(int64_t{1}, aclnn::kInt64);
    } else if (k == ir::OpKind::where) {
      name_ = "aclnnSWhere", kind_ = Kind::Where, run_ = lib_.aclnnSWhere;
      for (uint32_t i = 0; i < 3; ++i) in_.push_back(tensor(g, g.operands[n.first_input + i], in[i]));
    } else if (k == ir::OpKind::cast) {
      name_ = "aclnnCast", kind_ = Kind::Cast, run_ = lib_.aclnnCast;
      in_.push_back(tensor(g, x, in[0]));
    } else if (const auto e = std::find_if(std::begin(kElementwise), std::end(kElementwise), [&](const ElementwiseCall& c) { return k == c.op; });
               e != std::end(kElementwise)) {
      name_ = e->name, run_ = lib_.*(e->run);
      kind_ = e->binary ? Kind::Binary : Kind::Unary;
      if (e->binary) binary_ = lib_.*(e->binary);
      else unary_ = lib_.*(e->unary);
      for (uint32_t i = 0; i < n.num_inputs; ++i) in_.push_back(tensor(g, g.operands[n.first_input + i], in[i]));
    } else if (k == ir::OpKind::expand) {
      name_ = "aclnnExpand", kind_ = Kind::Expand, run_ = lib_.aclnnExpand;
      in_.push_back(tensor(g, x, in[0]));
      const ir::Shape& s = g.shape(n.first_output);
      int_array(std::vector<int64_t>(s.begin(), s.end()));
    } else if (k == ir::OpKind::gather) {
      // IndexSelect takes one axis of indices: the index tensor as a flat view of its elements,
      // the result as a view with those elements on the axis (the same bytes, row-major).
      name_ = "aclnnIndexSelect", kind_ = Kind::IndexSelect, run_ = lib_.aclnnIndexSelect;
      in_.push_back(tensor(g, x, in[0]));
      const ir::ValueId index = g.operands[n.first_input + 1];
      const int64_t picks = g.shape(index).num_elements();
      in_.push_back(tensor_of({picks}, data_type(g.values[index].dtype), in[1]));
      dim_ = static_cast<int64_t>(ir::GatherAttrs(g, n).axis);
      const ir::Shape& xs = g.shape(x);
      std::vector<int64_t> dims(xs.begin(), xs.end());
      dims[static_cast<size_t>(dim_)] = picks;
      lib_.aclDestroyTensor(out_[0]);
      out_[0] = nullptr;
      out_[0] = tensor_of(dims, data_type(g.values[n.first_output].dtype), out[0]);
    } else if (k == ir::OpKind::max_pool2d || k == ir::OpKind::avg_pool2d) {
      const bool max = k == ir::OpKind::max_pool2d;
      name_ = max ? "aclnnMaxPool" : "aclnnAvgPool2d", kind_ = max ? Kind::MaxPool : Kind::AvgPool;
      run_ = max ? lib_.aclnnMaxPool : lib_.aclnnAvgPool2d;
      in_.push_back(tensor(g, x, in[0]));
      const ir::MaxPool2dAttrs a(g, n);  // avg_pool2d's view too
      const ir::Span<int64_t> kernel = a.kernel, strides = a.strides, pads = a.pads;
      int_array({kernel[0], kernel[1]});
      int_array({strides[0], strides[1]});
      // MaxPool takes top, left, bottom, right; AvgPool2d one pad per axis (checked symmetric).
      int_array(max ? std::vector<int64_t>{pads[0], pads[1], pads[2], pads[3]} : std::vector<int64_t>{pads[0], pads[1]});
      if (max) int_array({1, 1});  // dilations
      dim_ = a.ceil_mode;
    } else if (k == ir::OpKind::slice) {
      // The slice as a strided view of x (offset at the starts, strides times the steps), copied
      // into the result by aclnnInplaceCopy.
      name_ = "aclnnInplaceCopy", kind_ = Kind::Copy, run_ = lib_.aclnnInplaceCopy;
      const ir::Shape& xs = g.shape(x);
      const ir::Shape& ys = g.shape(n.first_output);
      const std::vector<int64_t> storage(xs.begin(), xs.end()), strides = row_major_strides(storage);
      std::vector<int64_t> steps(rank, 1), starts(rank, 0);
      const ir::SliceAttrs a(g, n);
      for (size_t i = 0; i < a.starts.size(); ++i) {
        const size_t d = a.axes.size() ? a.axes[i] : i;
        const int64_t dim = xs[d];
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
      in_.push_back(view(std::vector<int64_t>(ys.begin(), ys.end()), view_strides, offset, storage, data_type(g.values[x].dtype), in[0]));
    } else if (k == ir::OpKind::transpose) {
      name_ = "aclnnPermute", kind_ = Kind::Permute, run_ = lib_.aclnnPermute;
      in_.push_back(tensor(g, x, in[0]));
      const ir::TransposeAttrs a(g, n);
      std::vector<int64_t> perm(a.perm.begin(), a.perm.end());
      if (perm.empty())
        for (size_t d = rank; d-- > 0;) perm.push_back(static_cast<int64_t>(d));  // the default: reversed
      int_array(perm);
    } else if (k == ir::OpKind::concat) {
      name_ = "aclnnCat", kind_ = Kind::Cat, run_ = lib_.aclnnCat;
      for (uint32_t i = 0; i < n.num_inputs; ++i) in_.push_back(tensor(g, g.operands[n.first_input + i], in[i]));
      list_ = lib_.aclCreateTensorList(in_.data(), in_.size());
      dim_ = static_cast<int64_t>(ir::ConcatAttrs(g, n).axis);
    } else if (k == ir::OpKind::pad && ir::PadAttrs(g, n).mode != ir::PadMode::constant) {
      // Reflection and replication pads take the last two dims: x and the result as 3-D views
      // [the other dims, H, W], the padding as left, right, top, bottom.
      const ir::PadAttrs a(g, n);
      const bool reflect = a.mode == ir::PadMode::reflect;
      name_ = reflect ? "aclnnReflectionPad2d" : "aclnnReplicationPad2d", kind_ = Kind::BorderPad;
      run_ = reflect ? lib_.aclnnReflectionPad2d : lib_.aclnnReplicationPad2d;
      border_pad_ = reflect ? lib_.aclnnReflectionPad2dGetWorkspaceSize : lib_.aclnnReplicationPad2dGetWorkspaceSize;
      auto as_3d = [&](ir::ValueId v) {
        const ir::Shape& s = g.shape(v);
        const int64_t h = rank >= 2 ? s[rank - 2] : 1;
        return std::vector<int64_t>{s.num_elements() / std::max<int64_t>(1, h * s[rank - 1]), h, s[rank - 1]};
      };
      in_.push_back(tensor_of(as_3d(x), data_type(g.values[x].dtype), in[0]));
      lib_.aclDestroyTensor(out_[0]);
      out_[0] = nullptr;
      out_[0] = tensor_of(as_3d(n.first_output), out_type_, out[0]);
      const ir::Span<int64_t> pads = a.pads;
      int_array({pads[rank - 1], pads[2 * rank - 1], rank >= 2 ? pads[rank - 2] : 0, rank >= 2 ? pads[2 * rank - 2] : 0});
    } else if (k == ir::OpKind::fill) {  // the result filled in place
      name_ = "aclnnInplaceFillScalar", kind_ = Kind::Fill, run_ = lib_.aclnnInplaceFillScalar;
      scalar(ir::FillAttrs(g, n).value, aclnn::kDouble);
    } else if (k == ir::OpKind::range) {
      const ir::RangeAttrs a(g, n);
      name_ = "aclnnArange", kind_ = Kind::Arange, run_ = lib_.aclnnArange;
      for (double bound : {a.start, a.limit, a.step}) scalar(bound, aclnn::kDouble);
    } else if (k == ir::OpKind::scatter_elements) {
      const ir::ScatterElementsAttrs a(g, n);
      name_ = "aclnnScatter", kind_ = Kind::Scatter, run_ = lib_.aclnnScatter;
      for (uint32_t i = 0; i < 3; ++i) in_.push_back(tensor(g, g.operands[n.first_input + i], in[i]));
      dim_ = static_cast<int64_t>(a.axis);
      k_ = static_cast<int64_t>(a.reduction);  // none, add, mul: CANN's 0, 1, 2
    } else if (k == ir::OpKind::scatter_nd) {
      name_ = "aclnnScatterNd", kind_ = Kind::ScatterNd, run_ = lib_.aclnnScatterNd;
      for (uint32_t i = 0; i < 3; ++i) in_.push_back(tensor(g, g.operands[n.first_input + i], in[i]));
    } else if (k == ir::OpKind::pad) {
      // ConstantPadNd takes (before, after) pairs from the last axis on; the value as a scalar.
      name_ = "aclnnConstantPadNd", kind_ = Kind::ConstantPad, run_ = lib_.aclnnConstantPadNd;
      in_.push_back(tensor(g, x, in[0]));
      const ir::PadAttrs a(g, n);
      std::vector<int64_t> pairs;
      for (size_t d = rank; d-- > 0;) pairs.push_back(a.pads[d]), pairs.push_back(a.pads[rank + d]);
      int_array(pairs);
      scalar(static_cast<float>(a.value), aclnn::kFloat);
    } else if (k == ir::OpKind::conv2d) {
      name_ = "aclnnConvolution", kind_ = Kind::Convolution, run_ = lib_.aclnnConvolution;
      in_.push_back(tensor(g, x, in[0]));
      in_.push_back(tensor(g, g.operands[n.first_input + 1], in[1]));
      const ir::ValueId bias = n.num_inputs > 2 ? g.operands[n.first_input + 2] : ir::kNone;
      in_.push_back(bias == ir::kNone ? nullptr : tensor(g, bias, in[2]));
      const ir::Conv2dAttrs a(g, n);
      const ir::Span<int64_t> strides = a.strides, pads = a.pads, dilations = a.dilations;
      int_array({strides[0], strides[1]});
      int_array({pads[0], pads[1]});  // top = bottom, left = right (checked by unsupported())
      int_array({dilations[0], dilations[1]});
      int_array({0, 0});  // output padding: only for transposed convolution
      dim_ = a.groups;
    } else {
      throw ir::Error(ir::ErrorCode::Internal, std::string("ascend: no aclnn mapping for ") + n.op->name);
    }
    lib_.require(name_, n.op->name);
  } catch (...) {
    release();
    throw;
  }
}

aclnn::Executor* AclnnCall::plan(uint64_t* workspace) const {
  aclnn::Executor* e = nullptr;
  *workspace = 0;
  switch (kind_) {
    case Kind::Matmul:  // KEEP_DTYPE: f32 stays f32
      ESG_ACLNN(lib_, aclnnMatmulGetWorkspaceSize, in_[0], in_[1], out_[0], int8_t{0}, workspace, &e);
      break;
    case Kind::Softmax: ESG_ACLNN(lib_, aclnnSoftmaxGetWorkspaceSize, in_[0], dim_, out_[0], workspace, &e); break;
    case Kind::ReduceSum:
      ESG_ACLNN(lib_, aclnnReduceSumGetWorkspaceSize, in_[0], ints_[0], keep_dims_, out_type_, out_[0], workspace, &e);
      break;
    case Kind::Mean: ESG_ACLNN(lib_, aclnnMeanGetWorkspaceSize, in_[0], ints_[0], keep_dims_, out_type_, out_[0], workspace, &e); break;
    case Kind::Amax: ESG_ACLNN(lib_, aclnnAmaxGetWorkspaceSize, in_[0], ints_[0], keep_dims_, out_[0], workspace, &e); break;
    case Kind::Amin: ESG_ACLNN(lib_, aclnnAminGetWorkspaceSize, in_[0], ints_[0], keep_dims_, out_[0], workspace, &e); break;
    case Kind::ProdDim: ESG_ACLNN(lib_, aclnnProdDimGetWorkspaceSize, in_[0], dim_, keep_dims_, out_type_, out_[0], workspace, &e); break;
    case Kind::Prod: ESG_ACLNN(lib_, aclnnProdGetWorkspaceSize, in_[0], out_type_, out_[0], workspace, &e); break;
    case Kind::ArgMax: ESG_ACLNN(lib_, aclnnArgMaxGetWorkspaceSize, in_[0], dim_, keep_dims_, out_[0], workspace, &e); break;
    case Kind::ArgMin: ESG_ACLNN(lib_, aclnnArgMinGetWorkspaceSize, in_[0], dim_, keep_dims_, out_[0], workspace, &e); break;
    case Kind::Topk: ESG_ACLNN(lib_, aclnnTopkGetWorkspaceSize, in_[0], k_, dim_, largest_, true, out_[0], out_[1], workspace, &e); break;
    case Kind::AddSub:
      if (subtract_) ESG_ACLNN(lib_, aclnnSubGetWorkspaceSize, in_[0], in_[1], scalars_[0], out_[0], workspace, &e);
      else ESG_ACLNN(lib_, aclnnAddGetWorkspaceSize, in_[0], in_[1], scalars_[0], out_[0], workspace, &e);
      break;
    case Kind::Binary: lib_.check(binary_(in_[0], in_[1], out_[0], workspace, &e), (std::string(name_) + "GetWorkspaceSize").c_str()); break;
    case Kind::Unary: lib_.check(unary_(in_[0], out_[0], workspace, &e), (std::string(name_) + "GetWorkspaceSize").c_str()); break;
    case Kind::Where: ESG_ACLNN(lib_, aclnnSWhereGetWorkspaceSize, in_[0], in_[1], in_[2], out_[0], workspace, &e); break;
    case Kind::Cast: ESG_ACLNN(lib_, aclnnCastGetWorkspaceSize, in_[0], out_type_, out_[0], workspace, &e); break;
    case Kind::Expand: ESG_ACLNN(lib_, aclnnExpandGetWorkspaceSize, in_[0], ints_[0], out_[0], workspace, &e); break;
    case Kind::IndexSelect: ESG_ACLNN(lib_, aclnnIndexSelectGetWorkspaceSize, in_[0], dim_, in_[1], out_[0], workspace, &e); break;
    case Kind::MaxPool:  // autoPad 0: NOTSET, the explicit pads
      ESG_ACLNN(lib_, aclnnMaxPoolGetWorkspaceSize, in_[0], ints_[0], ints_[1], int64_t{0}, ints_[2], ints_[3], dim_, out_[0], workspace, &e);
      break;
    case Kind::AvgPool:  // the mean of the window's elements inside the input, as the CPU's
      ESG_ACLNN(lib_, aclnnAvgPool2dGetWorkspaceSize, in_[0], ints_[0], ints_[1], ints_[2], dim_ != 0, false, int64_t{0}, int8_t{0}, out_[0],
                workspace, &e);
      break;
    case Kind::Copy: ESG_ACLNN(lib_, aclnnInplaceCopyGetWorkspaceSize, out_[0], in_[0], workspace, &e); break;
    case Kind::Permute: ESG_ACLNN(lib_, aclnnPermuteGetWorkspaceSize, in_[0], ints_[0], out_[0], workspace, &e); break;
    case Kind::Cat: ESG_ACLNN(lib_, aclnnCatGetWorkspaceSize, list_, dim_, out_[0], workspace, &e); break;
    case Kind::ConstantPad: ESG_ACLNN(lib_, aclnnConstantPadNdGetWorkspaceSize, in_[0], ints_[0], scalars_[0], out_[0], workspace, &e); break;
    case Kind::Fill: ESG_ACLNN(lib_, aclnnInplaceFillScalarGetWorkspaceSize, out_[0], scalars_[0], workspace, &e); break;
    case Kind::Arange: ESG_ACLNN(lib_, aclnnArangeGetWorkspaceSize, scalars_[0], scalars_[1], scalars_[2], out_[0], workspace, &e); break;
    case Kind::BorderPad: lib_.check(border_pad_(in_[0], ints_[0], out_[0], workspace, &e), (std::string(name_) + "GetWorkspaceSize").c_str()); break;
    case Kind::Scatter: ESG_ACLNN(lib_, aclnnScatterGetWorkspaceSize, in_[0], dim_, in_[1], in_[2], k_, out_[0], workspace, &e); break;
    case Kind::ScatterNd: ESG_ACLNN(lib_, aclnnScatterNdGetWorkspaceSize, in_[0], in_[1], in_[2], out_[0], workspace, &e); break;
    case Kind::Convolution:
      ESG_ACLNN(lib_, aclnnConvolutionGetWorkspaceSize, in_[0], in_[1], in_[2], ints_[0], ints_[1], ints_[2], false, ints_[3], dim_,
                out_[0], int8_t{0}, workspace, &e);
      break;
  }
  return e;
}

void AclnnCall::queue(void* workspace, uint64_t bytes, aclnn::Executor* e, acl::Stream stream) const {
  lib_.check(run_(workspace, bytes, e, stream), name_);
}

template <class T>
aclnn::Scalar* AclnnCall::scalar(T value, aclnn::DataType dtype) {
  static_assert(sizeof(T) <= sizeof(uint64_t), "a scalar of at most 8 bytes");
  if (scalars_.size() == std::size(scalar_values_)) throw ir::Error(ir::ErrorCode::Internal, "ascend: more scalars than a call keeps");
  void* at = &scalar_values_[scalars_.size()];
  std::memcpy(at, &value, sizeof value);
  aclnn::Scalar* s = lib_.aclCreateScalar(at, dtype);
  if (!s) throw ir::Error(ir::ErrorCode::Backend, "ascend: aclCreateScalar failed");
  scalars_.push_back(s);
  return s;
}

aclnn::IntArray* AclnnCall::int_array(const std::vector<int64_t>& values) {
  aclnn::IntArray* a = lib_.aclCreateIntArray(values.data(), values.size());
  if (!a) throw ir::Error(ir::ErrorCode::Backend, "ascend: aclCreateIntArray failed");
  ints_.push_back(a);
  return a;
}

AclnnCall::~AclnnCall() { release(); }

void AclnnCall::release() noexcept {
  // The list takes its tensors (aclDestroyTensorList releases them too); the rest one by one.
  if (list_) lib_.aclDestroyTensorList(list_), list_ = nullptr, in_.clear();
  for (aclnn::Tensor* t : in_)
    if (t) lib_.aclDestroyTensor(t);
  for (aclnn::Tensor* t : out_)
    if (t) lib_.aclDestroyTensor(t);
  in_.clear(), out_.clear();
  for (aclnn::IntArray* a : ints_) lib_.aclDestroyIntArray(a);
  ints_.clear();
  for (aclnn::Scalar* s : scalars_) lib_.aclDestroyScalar(s);
  scalars_.clear();
}

}  // namespace esg::ascend
