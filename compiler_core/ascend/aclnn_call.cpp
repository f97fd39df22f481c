// The mechanics every aclnn lowering shares: the descriptors and their ownership, the builder,
// and a call's plan and queue. The lowerings themselves are the table in aclnn_lowerings.cpp.
#include "ascend/aclnn_call.hpp"

#include <algorithm>
#include <cstring>

#include "ir/error.hpp"

namespace esg::ascend {
namespace {

// Keeps what `create` makes in `owned`, made room for first: a push after creating could throw
// and lose the descriptor.
template <class T, class Create>
T* keep(std::vector<T*>& owned, const char* call, Create create) {
  owned.push_back(nullptr);
  if (!(owned.back() = create())) {
    owned.pop_back();
    throw ir::Error(ir::ErrorCode::Backend, std::string("ascend: ") + call + " failed");
  }
  return owned.back();
}

const AclnnLowering* find_lowering(ir::OpKind op) {
  const ir::Span<AclnnLowering> all = aclnn_lowerings();
  const AclnnLowering* found = std::find_if(all.begin(), all.end(), [&](const AclnnLowering& l) { return l.op == op; });
  return found == all.end() ? nullptr : found;
}

}  // namespace

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t d = dims.size(); d-- > 1;) strides[d - 1] = strides[d] * std::max<int64_t>(dims[d], 1);
  return strides;
}

aclnn::DataType data_type(ir::DType t) {
  switch (t) {
    case ir::DType::F16: return aclnn::kFloat16;
    case ir::DType::BF16: return aclnn::kBf16;
    case ir::DType::I32: return aclnn::kInt32;
    case ir::DType::I64: return aclnn::kInt64;
    case ir::DType::Bool: return aclnn::kBool;
    case ir::DType::I8: return aclnn::kInt8;
    case ir::DType::U8: return aclnn::kUint8;
    default: return aclnn::kFloat;
  }
}

aclnn::Tensor* AclnnDescriptors::tensor(std::vector<int64_t> dims, aclnn::DataType dtype, void* data, bool transpose_last_two) {
  std::vector<int64_t> strides = row_major_strides(dims);
  const std::vector<int64_t> storage = dims;
  if (transpose_last_two && dims.size() >= 2) {
    std::swap(dims[dims.size() - 1], dims[dims.size() - 2]);
    std::swap(strides[strides.size() - 1], strides[strides.size() - 2]);
  }
  return view(dims, strides, 0, storage, dtype, data);
}

aclnn::Tensor* AclnnDescriptors::view(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides, int64_t offset,
                                      const std::vector<int64_t>& storage, aclnn::DataType dtype, void* data) {
  return keep(tensors_, "aclCreateTensor", [&] {
    const aclnn::Format format = images_ ? aclnn::image_format(dims.size()) : aclnn::kFormatNd;
    return lib_.aclCreateTensor(dims.data(), dims.size(), dtype, strides.data(), offset, format, storage.data(), storage.size(),
                                data);
  });
}

aclnn::IntArray* AclnnDescriptors::int_array(const std::vector<int64_t>& values) {
  return keep(int_arrays_, "aclCreateIntArray", [&] { return lib_.aclCreateIntArray(values.data(), values.size()); });
}

aclnn::Scalar* AclnnDescriptors::scalar(int64_t value) { return scalar(&value, sizeof value, aclnn::kInt64); }
aclnn::Scalar* AclnnDescriptors::scalar(float value) { return scalar(&value, sizeof value, aclnn::kFloat); }
aclnn::Scalar* AclnnDescriptors::scalar(double value) { return scalar(&value, sizeof value, aclnn::kDouble); }

aclnn::Scalar* AclnnDescriptors::scalar(const void* value, size_t bytes, aclnn::DataType dtype) {
  void* at = &scalar_values_.emplace_back();  // a deque's elements stay put as it grows
  std::memcpy(at, value, bytes);
  return keep(scalars_, "aclCreateScalar", [&] { return lib_.aclCreateScalar(at, dtype); });
}

aclnn::TensorList* AclnnDescriptors::tensor_list(const std::vector<aclnn::Tensor*>& tensors) {
  aclnn::TensorList* list =
      keep(lists_, "aclCreateTensorList", [&] { return lib_.aclCreateTensorList(tensors.data(), tensors.size()); });
  tensors_.erase(std::remove_if(tensors_.begin(), tensors_.end(),
                                [&](aclnn::Tensor* t) { return std::find(tensors.begin(), tensors.end(), t) != tensors.end(); }),
                 tensors_.end());
  return list;
}

AclnnDescriptors::~AclnnDescriptors() {
  for (aclnn::TensorList* l : lists_) lib_.aclDestroyTensorList(l);
  for (aclnn::Tensor* t : tensors_) lib_.aclDestroyTensor(t);
  for (aclnn::IntArray* a : int_arrays_) lib_.aclDestroyIntArray(a);
  for (aclnn::Scalar* s : scalars_) lib_.aclDestroyScalar(s);
}

ir::ValueId AclnnBuilder::input_value(uint32_t i) const { return i < n.num_inputs ? g.operands[n.first_input + i] : ir::kNone; }

std::vector<int64_t> AclnnBuilder::dims(ir::ValueId v) const {
  const ir::Shape s = g.shape(v);
  return std::vector<int64_t>(s.begin(), s.end());
}

aclnn::Tensor* AclnnBuilder::input(uint32_t i, bool transpose_last_two) const {
  const ir::ValueId v = input_value(i);
  return v == ir::kNone ? nullptr : make.tensor(dims(v), data_type(g.values[v].dtype), in[i], transpose_last_two);
}

aclnn::Tensor* AclnnBuilder::output(uint32_t i) const {
  const ir::ValueId v = n.first_output + i;
  return make.tensor(dims(v), data_type(g.values[v].dtype), out[i]);
}

aclnn::DataType AclnnBuilder::out_type() const { return data_type(g.values[n.first_output].dtype); }

std::string AclnnCall::mapped_ops() {
  std::string list;
  for (const AclnnLowering& l : aclnn_lowerings())  // those this op set has (an older one lacks some)
    if (const ir::OpSchema* op = ir::find_op(l.op)) list += (list.empty() ? "" : ", ") + std::string(op->name);
  return list;
}

std::string AclnnCall::unsupported(const ir::Graph& g, const ir::Node& n) {
  if (n.op->kind == ir::OpKind::div) {
    const ir::DType result = g.values[n.first_output].dtype;
    return std::string(ir::dtype_is_float(result) ? ir::dtype_name(result) : "integer") +
           " division (the generated kernels divide f32, f16 and bf16; not mapped to aclnn yet)";
  }
  const AclnnLowering* lowering = find_lowering(n.op->kind);
  // (CANN's ops take up to 8 dims, as many as a shape has.)
  return lowering ? lowering->check(g, n) : "no aclnn mapping";
}

std::vector<eval::HostTensor> AclnnCall::constants(const ir::Graph& g, const ir::Node& n) {
  const AclnnLowering* lowering = find_lowering(n.op->kind);
  return lowering && lowering->constants ? lowering->constants(g, n) : std::vector<eval::HostTensor>{};
}

bool AclnnCall::reads(const ir::Node& n, uint32_t i) {
  const AclnnLowering* lowering = find_lowering(n.op->kind);
  return !lowering || !(lowering->unread >> i & 1u);
}

AclnnCall::AclnnCall(const AclnnLibrary& lib, const ir::Graph& g, const ir::Node& n, const std::vector<void*>& in,
                     const std::vector<void*>& out, const std::vector<void*>& constants, const std::string& soc)
    : lib_(lib), descriptors_(lib) {
  const AclnnLowering* lowering = find_lowering(n.op->kind);
  if (!lowering) throw ir::Error(ir::ErrorCode::Internal, std::string("ascend: no aclnn mapping for ") + n.op->name);
  descriptors_.set_images(lowering->images);
  step_ = lowering->build({g, n, in, out, constants, descriptors_, soc});  // descriptors_ goes, with what it holds, if this throws
  lib_.require(step_.name, n.op->name);
}

AclnnCall::~AclnnCall() = default;

aclnn::Executor* AclnnCall::plan(uint64_t* workspace_bytes) const {
  aclnn::Executor* e = nullptr;
  *workspace_bytes = 0;
  lib_.check(step_.plan(workspace_bytes, &e), step_.plan_name);
  return e;
}

void AclnnCall::queue(void* workspace, uint64_t workspace_bytes, aclnn::Executor* e, acl::Stream stream) const {
  lib_.check(step_.run(workspace, workspace_bytes, e, stream), step_.name);
}

}  // namespace esg::ascend
