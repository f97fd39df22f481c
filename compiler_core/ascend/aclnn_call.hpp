// One graph op run through CANN's operator library: its aclnn descriptors, made once when the
// device program is built (the operands' device addresses are fixed by then), and the two
// phases of each run: plan (workspace size and executor) and queue on a stream.
#pragma once
#include <string>
#include <vector>

#include "ascend/aclnn_library.hpp"
#include "ir/graph.hpp"

namespace esg::ascend {

class AclnnCall {
 public:
  // Why the op cannot go through aclnn (empty when it can): which ops, dtypes and attributes
  // have a mapping.
  static std::string unsupported(const ir::Graph& g, const ir::Node& n);
  // The ops it maps, listed for messages.
  static std::string mapped_ops();

  // `in` and `out`: device addresses of the node's inputs (nullptr for an absent optional one)
  // and outputs.
  AclnnCall(const AclnnLibrary& lib, const ir::Graph& g, const ir::Node& n, const std::vector<void*>& in,
            const std::vector<void*>& out);
  ~AclnnCall();
  AclnnCall(const AclnnCall&) = delete;
  AclnnCall& operator=(const AclnnCall&) = delete;

  aclnn::Executor* plan(uint64_t* workspace_bytes) const;
  void queue(void* workspace, uint64_t workspace_bytes, aclnn::Executor* executor, acl::Stream stream) const;
  const char* name() const { return name_; }

 private:
  aclnn::Tensor* tensor(const ir::Graph& g, ir::ValueId v, void* data, bool transpose_last_two = false);
  // A contiguous tensor of `dims` at `data` (a view of another shape over a value's memory).
  aclnn::Tensor* tensor_of(std::vector<int64_t> dims, aclnn::DataType dtype, void* data, bool transpose_last_two = false);
  // A view of `dims` with `strides` from element `offset` of the storage `storage` at `data`.
  aclnn::Tensor* view(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides, int64_t offset,
                      const std::vector<int64_t>& storage, aclnn::DataType dtype, void* data);
  void release() noexcept;
  aclnn::IntArray* int_array(const std::vector<int64_t>& values);
  // A scalar of `value` as `dtype` (float, double or int64), kept with the call.
  template <class T>
  aclnn::Scalar* scalar(T value, aclnn::DataType dtype);

  const AclnnLibrary& lib_;
  enum class Kind { Matmul, Softmax, ReduceSum, Mean, Amax, Amin, ProdDim, Prod, ArgMax, ArgMin, Topk, AddSub, Binary, Unary, Where,
                    Cast, Expand, IndexSelect, MaxPool, AvgPool, Copy, Permute, Cat, ConstantPad, BorderPad, Scatter, ScatterNd, Fill, Arange,
                    Convolution };
  const char* name_ = "";  // the aclnn op
  Kind kind_ = Kind::Matmul;
  aclnn::DataType out_type_ = aclnn::kFloat;  // the result's element type (reductions take it)
  aclnn::Format format_ = aclnn::kFormatNd;    // ND, but for ops that insist (aclnnAvgPool2d: NCHW)
  aclnn::RunFn run_ = nullptr;  // its running half, chosen once (a run looks nothing up)
  std::vector<aclnn::Tensor*> in_, out_;
  std::vector<aclnn::IntArray*> ints_;  // the op's integer lists, in its parameters' order
  aclnn::TensorList* list_ = nullptr;
  std::vector<aclnn::Scalar*> scalars_;  // pad's and fill's value, add's and sub's alpha, range's start, end and step
  aclnn::BinaryPlan binary_ = nullptr;  // the elementwise ops of one signature
  aclnn::UnaryPlan unary_ = nullptr;
  aclnn::BorderPadPlan border_pad_ = nullptr;
  bool subtract_ = false;
  int64_t dim_ = 0;  // the axis of softmax, concat, the arg-reductions, top-k, a one-axis product; conv2d's groups
  int64_t k_ = 0;    // top-k's k; scatter's reduction
  bool largest_ = true;
  uint64_t scalar_values_[3] = {};  // what scalars_ point at (aclCreateScalar keeps the pointer or the value)
  bool keep_dims_ = false;
};

}  // namespace esg::ascend
