// What an aclnn lowering is made of: the entry of the table in aclnn_lowerings.cpp (one per op),
// the builder its entry makes the descriptors with, and the step it returns (the aclnn op it
// chose, its planning half bound once to the arguments). The shared mechanics, the descriptors'
// ownership and the builder, are in aclnn_call.cpp.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "ascend/aclnn_library.hpp"
#include "eval/host_tensor.hpp"
#include "ir/graph.hpp"
#include "ir/span.hpp"

namespace esg::ascend {

// aclDataType of the element types the lowerings take (their checks admit no others).
aclnn::DataType data_type(ir::DType t);
// Whether `v` is a constant whose every byte is zero (a zero point of symmetric quantization).
bool zero_constant(const ir::Graph& g, ir::ValueId v);
// Element strides of a contiguous row-major tensor.
std::vector<int64_t> row_major_strides(const std::vector<int64_t>& dims);

// The descriptors of one call. Its planning half reads them at every run, so they live as long
// as the call and are destroyed with it, or with a build that throws halfway.
class AclnnDescriptors {
 public:
  explicit AclnnDescriptors(const AclnnLibrary& lib) : lib_(lib) {}
  ~AclnnDescriptors();
  AclnnDescriptors(const AclnnDescriptors&) = delete;
  AclnnDescriptors& operator=(const AclnnDescriptors&) = delete;

  const AclnnLibrary& lib() const { return lib_; }
  // Whether the tensors made are images: for the ops whose documentation refuses ND for them
  // (aclnnConvolution, aclnnAvgPool2d), those of rank 3 to 5 are NCL, NCHW, NCDHW; any other
  // (a bias) stays ND, as every tensor of the other ops.
  void set_images(bool images) { images_ = images; }
  // A contiguous tensor of `dims` at `data` (a view of another shape over a value's memory);
  // with the last two dims swapped, a strided view: no copy.
  aclnn::Tensor* tensor(std::vector<int64_t> dims, aclnn::DataType dtype, void* data, bool transpose_last_two = false);
  // A view of `dims` with `strides` from element `offset` of the storage `storage` at `data`.
  aclnn::Tensor* view(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides, int64_t offset,
                      const std::vector<int64_t>& storage, aclnn::DataType dtype, void* data);
  aclnn::IntArray* int_array(const std::vector<int64_t>& values);
  // Scalars of the C++ type's aclDataType: int64, float, double.
  aclnn::Scalar* scalar(int64_t value);
  aclnn::Scalar* scalar(float value);
  aclnn::Scalar* scalar(double value);
  // A list of tensors made here, which it takes: aclDestroyTensorList destroys them too.
  aclnn::TensorList* tensor_list(const std::vector<aclnn::Tensor*>& tensors);

 private:
  aclnn::Scalar* scalar(const void* value, size_t bytes, aclnn::DataType dtype);

  const AclnnLibrary& lib_;
  bool images_ = false;
  std::vector<aclnn::Tensor*> tensors_;  // but those a list took
  std::vector<aclnn::TensorList*> lists_;
  std::vector<aclnn::IntArray*> int_arrays_;
  std::vector<aclnn::Scalar*> scalars_;
  std::deque<uint64_t> scalar_values_;  // what scalars_ point at (aclCreateScalar keeps the pointer or the value)
};

// One aclnn op: its two halves in the library and their names, for messages.
template <class Plan>
struct AclnnOp {
  const char* name;       // aclnnFoo, the running half
  const char* plan_name;  // aclnnFooGetWorkspaceSize
  Plan aclnn::Functions::*plan;
  aclnn::RunFn aclnn::Functions::*run;
};
// ESG_ACLNN_OP(aclnnFoo): the AclnnOp of the functions aclnn_api.hpp declares for aclnnFoo.
#define ESG_ACLNN_OP(fn)                                                                  \
  ::esg::ascend::AclnnOp<decltype(::esg::ascend::aclnn::Functions::fn##GetWorkspaceSize)> { \
    #fn, #fn "GetWorkspaceSize", &::esg::ascend::aclnn::Functions::fn##GetWorkspaceSize,     \
        &::esg::ascend::aclnn::Functions::fn                                                 \
  }

// What a lowering builds: the aclnn op it chose, and its planning half with every argument bound.
struct AclnnStep {
  const char* name = "";
  const char* plan_name = "";
  aclnn::RunFn run = nullptr;
  std::function<aclnn::Status(uint64_t* workspace_size, aclnn::Executor** executor)> plan;
};

// What a lowering builds from: its node, the device addresses of the node's inputs (nullptr for
// an absent optional one), outputs and the lowering's own constants, the call's descriptors, and
// the device's SoC.
struct AclnnBuilder {
  const ir::Graph& g;
  const ir::Node& n;
  const std::vector<void*>& in;
  const std::vector<void*>& out;
  const std::vector<void*>& constants;  // the entry's own constants (AclnnLowering::constants), on the device
  AclnnDescriptors& make;
  const std::string& soc;

  ir::ValueId input_value(uint32_t i) const;  // kNone when absent
  std::vector<int64_t> dims(ir::ValueId v) const;
  aclnn::Tensor* input(uint32_t i, bool transpose_last_two = false) const;  // nullptr when absent
  aclnn::Tensor* output(uint32_t i = 0) const;
  aclnn::DataType out_type() const;  // the first output's

  // The step running `op` with `args`, which the compiler checks against the op's signature in
  // aclnn_api.hpp (its workspace size and executor follow them).
  template <class Plan, class... Args>
  AclnnStep bind(const AclnnOp<Plan>& op, Args... args) const {
    const AclnnLibrary& lib = make.lib();
    const Plan plan = lib.*(op.plan);
    return {op.name, op.plan_name, lib.*(op.run), [plan, args...](uint64_t* workspace_size, aclnn::Executor** executor) {
              return plan(args..., workspace_size, executor);
            }};
  }
};

// The table's entry of one op.
struct AclnnLowering {
  ir::OpKind op;
  // Why the aclnn op cannot take the node (empty when it can), which the user sees.
  std::string (*check)(const ir::Graph& g, const ir::Node& n);
  // Makes the node's descriptors and binds its aclnn op (for nodes check passed).
  AclnnStep (*build)(const AclnnBuilder& b);
  // Its tensors are images (AclnnDescriptors::set_images).
  bool images = false;
  // Constants it computes from the node's (for nodes check passed), uploaded once; null: none.
  std::vector<eval::HostTensor> (*constants)(const ir::Graph& g, const ir::Node& n) = nullptr;
  // The inputs (a bit each) whose constants its own replace: never read, so never on the device
  // (their addresses are null), unless another launch reads them.
  uint32_t unread = 0;
};

// Every entry, in the order messages list the ops (aclnn_lowerings.cpp).
ir::Span<AclnnLowering> aclnn_lowerings();

}  // namespace esg::ascend
