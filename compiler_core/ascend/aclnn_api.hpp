// The part of CANN's operator library the Ascend backend calls for ops it does not generate
// kernels for: tensor descriptors from libnnopbase.so and the two-phase aclnn ops from
// libopapi.so (aclnnXxxGetWorkspaceSize plans the op and sizes its workspace, aclnnXxx queues
// it on a stream). Declared from CANN's aclnn/acl_meta.h and the op headers (docs/ascend.md),
// resolved by name at run time like AscendCL itself.
#pragma once
#include <cstdint>

#include "ascend/acl_api.hpp"

namespace esg::ascend::aclnn {

using Status = int32_t;  // aclnnStatus; 0 is success
struct Tensor;           // aclTensor
struct IntArray;         // aclIntArray
struct TensorList;       // aclTensorList
struct Scalar;           // aclScalar
struct Executor;         // aclOpExecutor: one planned op, consumed by its run

enum DataType : int32_t {  // aclDataType
  kFloat = 0, kFloat16 = 1, kInt8 = 2, kInt32 = 3, kUint8 = 4, kInt16 = 6, kUint16 = 7, kUint32 = 8,
  kInt64 = 9, kUint64 = 10, kDouble = 11, kBool = 12, kBf16 = 27, kInt4 = 29,  // INT4: two a byte, the first low
};
// aclFormat: ACL_FORMAT_ND for plain row-major tensors; NCL, NCHW and NCDHW for the row-major
// images of the ops that insist on them (acl_base.h's values).
enum Format : int32_t { kFormatNchw = 0, kFormatNd = 2, kFormatNcdhw = 30, kFormatNcl = 47 };
// The format of a row-major image of `rank` (3: NCL, 4: NCHW, 5: NCDHW), else ND.
constexpr Format image_format(uint64_t rank) {
  return rank == 3 ? kFormatNcl : rank == 4 ? kFormatNchw : rank == 5 ? kFormatNcdhw : kFormatNd;
}

// libnnopbase.so. aclCreateTensor takes the view (dims, strides and offset in elements) over
// storage of `storage_dims` at `data` (device memory).
#define ESG_ACLNN_BASE_FUNCTIONS(X)                                                                          \
  X(aclCreateTensor, Tensor*,                                                                                   \
    (const int64_t* view_dims, uint64_t view_rank, DataType dtype, const int64_t* strides, int64_t offset,     \
     Format format, const int64_t* storage_dims, uint64_t storage_rank, void* data))                            \
  X(aclDestroyTensor, Status, (const Tensor* tensor))                                                          \
  X(aclCreateIntArray, IntArray*, (const int64_t* values, uint64_t size))                                      \
  X(aclDestroyIntArray, Status, (const IntArray* array))                                                       \
  X(aclCreateTensorList, TensorList*, (const Tensor* const* values, uint64_t size))                            \
  X(aclDestroyTensorList, Status, (const TensorList* list))                                                    \
  X(aclCreateScalar, Scalar*, (void* value, DataType dtype))                                                   \
  X(aclDestroyScalar, Status, (const Scalar* scalar))

// libnnopbase.so, optional: frees an executor that was planned and will not run (a run frees
// its own). Without it such an executor stays allocated (opbase v8.5.0: nothing else frees one).
#define ESG_ACLNN_EXECUTOR_FUNCTIONS(X) X(aclDestroyAclOpExecutor, Status, (Executor * executor))

// The elementwise ops of one and two tensors share their signatures.
using UnaryPlan = Status (*)(const Tensor* self, Tensor* out, uint64_t* workspace_size, Executor** executor);
using BinaryPlan = Status (*)(const Tensor* self, const Tensor* other, Tensor* out, uint64_t* workspace_size, Executor** executor);
// The border pads (reflection, replication) of a tensor's last two dims: padding is left,
// right, top, bottom.
using BorderPadPlan = Status (*)(const Tensor* self, const IntArray* padding, Tensor* out, uint64_t* workspace_size, Executor** executor);
#define ESG_ACLNN_BORDER_PAD(X, name) \
  X(name, Status, (const Tensor* self, const IntArray* padding, Tensor* out, uint64_t* workspace_size, Executor** executor))
#define ESG_ACLNN_UNARY(X, name) X(name, Status, (const Tensor* self, Tensor* out, uint64_t* workspace_size, Executor** executor))
#define ESG_ACLNN_BINARY(X, name) \
  X(name, Status, (const Tensor* self, const Tensor* other, Tensor* out, uint64_t* workspace_size, Executor** executor))

// libopapi.so: each op's planning half; the running half has one signature for all (ESG_ACLNN_RUN).
#define ESG_ACLNN_PLAN_FUNCTIONS(X)                                                                          \
  X(aclnnMatmulGetWorkspaceSize, Status,                                                                        \
    (const Tensor* self, const Tensor* mat2, Tensor* out, int8_t cube_math_type, uint64_t* workspace_size,      \
     Executor** executor))                                                                                      \
  X(aclnnSoftmaxGetWorkspaceSize, Status,                                                                       \
    (const Tensor* self, int64_t dim, Tensor* out, uint64_t* workspace_size, Executor** executor))             \
  X(aclnnReduceSumGetWorkspaceSize, Status,                                                                     \
    (const Tensor* self, const IntArray* dims, bool keep_dims, DataType dtype, Tensor* out,                     \
     uint64_t* workspace_size, Executor** executor))                                                            \
  X(aclnnMeanGetWorkspaceSize, Status,                                                                          \
    (const Tensor* self, const IntArray* dim, bool keep_dim, DataType dtype, Tensor* out, uint64_t* workspace_size, \
     Executor** executor))                                                                                      \
  X(aclnnAmaxGetWorkspaceSize, Status,                                                                          \
    (const Tensor* self, const IntArray* dim, bool keep_dim, Tensor* out, uint64_t* workspace_size,             \
     Executor** executor))                                                                                      \
  X(aclnnAminGetWorkspaceSize, Status,                                                                          \
    (const Tensor* self, const IntArray* dim, bool keep_dim, Tensor* out, uint64_t* workspace_size,             \
     Executor** executor))                                                                                      \
  X(aclnnProdDimGetWorkspaceSize, Status,                                                                       \
    (const Tensor* self, int64_t dim, bool keep_dim, DataType dtype, Tensor* out, uint64_t* workspace_size,     \
     Executor** executor))                                                                                      \
  X(aclnnProdGetWorkspaceSize, Status,                                                                          \
    (const Tensor* self, DataType dtype, Tensor* out, uint64_t* workspace_size, Executor** executor))          \
  X(aclnnArgMaxGetWorkspaceSize, Status,                                                                        \
    (const Tensor* self, int64_t dim, bool keep_dim, Tensor* out, uint64_t* workspace_size, Executor** executor)) \
  X(aclnnArgMinGetWorkspaceSize, Status,                                                                        \
    (const Tensor* self, int64_t dim, bool keep_dim, Tensor* out, uint64_t* workspace_size, Executor** executor)) \
  X(aclnnTopkGetWorkspaceSize, Status,                                                                          \
    (const Tensor* self, int64_t k, int64_t dim, bool largest, bool sorted, Tensor* values_out,                 \
     Tensor* indices_out, uint64_t* workspace_size, Executor** executor))                                      \
  X(aclnnAddGetWorkspaceSize, Status,                                                                           \
    (const Tensor* self, const Tensor* other, const Scalar* alpha, Tensor* out, uint64_t* workspace_size,       \
     Executor** executor))                                                                                      \
  X(aclnnSubGetWorkspaceSize, Status,                                                                           \
    (const Tensor* self, const Tensor* other, const Scalar* alpha, Tensor* out, uint64_t* workspace_size,       \
     Executor** executor))                                                                                      \
  ESG_ACLNN_BINARY(X, aclnnMulGetWorkspaceSize)                                                                 \
  ESG_ACLNN_BINARY(X, aclnnMaximumGetWorkspaceSize)                                                             \
  ESG_ACLNN_BINARY(X, aclnnMinimumGetWorkspaceSize)                                                             \
  ESG_ACLNN_BINARY(X, aclnnGtTensorGetWorkspaceSize)                                                            \
  ESG_ACLNN_BINARY(X, aclnnGeTensorGetWorkspaceSize)                                                            \
  ESG_ACLNN_BINARY(X, aclnnLtTensorGetWorkspaceSize)                                                            \
  ESG_ACLNN_BINARY(X, aclnnLeTensorGetWorkspaceSize)                                                            \
  ESG_ACLNN_BINARY(X, aclnnEqTensorGetWorkspaceSize)                                                            \
  ESG_ACLNN_BINARY(X, aclnnNeTensorGetWorkspaceSize)                                                            \
  ESG_ACLNN_UNARY(X, aclnnNegGetWorkspaceSize)                                                                  \
  ESG_ACLNN_UNARY(X, aclnnAbsGetWorkspaceSize)                                                                  \
  X(aclnnSWhereGetWorkspaceSize, Status,                                                                        \
    (const Tensor* condition, const Tensor* self, const Tensor* other, Tensor* out, uint64_t* workspace_size,   \
     Executor** executor))                                                                                      \
  X(aclnnCastGetWorkspaceSize, Status,                                                                          \
    (const Tensor* self, DataType dtype, Tensor* out, uint64_t* workspace_size, Executor** executor))          \
  X(aclnnExpandGetWorkspaceSize, Status,                                                                        \
    (const Tensor* self, const IntArray* size, Tensor* out, uint64_t* workspace_size, Executor** executor))    \
  X(aclnnIndexSelectGetWorkspaceSize, Status,                                                                   \
    (const Tensor* self, int64_t dim, const Tensor* index, Tensor* out, uint64_t* workspace_size,               \
     Executor** executor))                                                                                      \
  X(aclnnMaxPoolGetWorkspaceSize, Status,                                                                       \
    (const Tensor* self, const IntArray* kernel_shape, const IntArray* strides, int64_t auto_pad,               \
     const IntArray* pads, const IntArray* dilations, int64_t ceil_mode, Tensor* out, uint64_t* workspace_size, \
     Executor** executor))                                                                                      \
  X(aclnnAvgPool2dGetWorkspaceSize, Status,                                                                     \
    (const Tensor* self, const IntArray* kernel_size, const IntArray* strides, const IntArray* paddings,        \
     bool ceil_mode, bool count_include_pad, int64_t divisor_override, int8_t cube_math_type, Tensor* out,      \
     uint64_t* workspace_size, Executor** executor))                                                            \
  X(aclnnInplaceCopyGetWorkspaceSize, Status,                                                                   \
    (Tensor* self_ref, const Tensor* src, uint64_t* workspace_size, Executor** executor))                        \
  X(aclnnPermuteGetWorkspaceSize, Status,                                                                       \
    (const Tensor* self, const IntArray* dims, Tensor* out, uint64_t* workspace_size, Executor** executor))   \
  X(aclnnCatGetWorkspaceSize, Status,                                                                           \
    (const TensorList* tensors, int64_t dim, Tensor* out, uint64_t* workspace_size, Executor** executor))       \
  X(aclnnConstantPadNdGetWorkspaceSize, Status,                                                                 \
    (const Tensor* self, const IntArray* pad, const Scalar* value, Tensor* out, uint64_t* workspace_size,       \
     Executor** executor))                                                                                      \
  ESG_ACLNN_BORDER_PAD(X, aclnnReflectionPad2dGetWorkspaceSize)                                              \
  ESG_ACLNN_BORDER_PAD(X, aclnnReplicationPad2dGetWorkspaceSize)                                             \
  X(aclnnInplaceFillScalarGetWorkspaceSize, Status,                                                           \
    (Tensor* self_ref, const Scalar* value, uint64_t* workspace_size, Executor** executor))                    \
  X(aclnnArangeGetWorkspaceSize, Status,                                                                       \
    (const Scalar* start, const Scalar* end, const Scalar* step, Tensor* out, uint64_t* workspace_size,        \
     Executor** executor))                                                                                     \
  /* reduce: 0 replaces, 1 adds, 2 multiplies */                                                              \
  X(aclnnScatterGetWorkspaceSize, Status,                                                                      \
    (const Tensor* self, int64_t dim, const Tensor* index, const Tensor* src, int64_t reduce, Tensor* out,    \
     uint64_t* workspace_size, Executor** executor))                                                           \
  X(aclnnScatterNdGetWorkspaceSize, Status,                                                                    \
    (const Tensor* data, const Tensor* indices, const Tensor* updates, Tensor* out, uint64_t* workspace_size,  \
     Executor** executor))                                                                                     \
  X(aclnnConvolutionGetWorkspaceSize, Status,                                                                   \
    (const Tensor* input, const Tensor* weight, const Tensor* bias, const IntArray* stride, const IntArray* padding, \
     const IntArray* dilation, bool transposed, const IntArray* output_padding, int64_t groups, Tensor* output,  \
     int8_t cube_math_type, uint64_t* workspace_size, Executor** executor))                                     \
  X(aclnnQuantConvolutionGetWorkspaceSize, Status,                                                              \
    (const Tensor* input, const Tensor* weight, const Tensor* bias, const Tensor* scale, const Tensor* offset,   \
     const IntArray* stride, const IntArray* padding, const IntArray* dilation, bool transposed,                \
     const IntArray* output_padding, int64_t groups, int32_t offset_x, const char* round_mode, Tensor* output,    \
     uint64_t* workspace_size, Executor** executor))                                                            \
  X(aclnnWeightQuantBatchMatmulV2GetWorkspaceSize, Status,                                                      \
    (const Tensor* x, const Tensor* weight, const Tensor* antiquant_scale, const Tensor* antiquant_offset,       \
     const Tensor* quant_scale, const Tensor* quant_offset, const Tensor* bias, int antiquant_group_size,         \
     const Tensor* y, uint64_t* workspace_size, Executor** executor))                                           \
  /* group_size: groupSizeK | groupSizeN << 16 | groupSizeM << 32, 0 for per-tensor and per-channel scales */ \
  X(aclnnQuantMatmulV5GetWorkspaceSize, Status,                                                                 \
    (const Tensor* x1, const Tensor* x2, const Tensor* x1_scale, const Tensor* x2_scale, const Tensor* y_scale,  \
     const Tensor* x1_offset, const Tensor* x2_offset, const Tensor* y_offset, const Tensor* bias,               \
     bool transpose_x1, bool transpose_x2, int64_t group_size, Tensor* out, uint64_t* workspace_size,           \
     Executor** executor))

#define ESG_ACLNN_RUN_FUNCTIONS(X) \
  X(aclnnMatmul) X(aclnnSoftmax) X(aclnnReduceSum) X(aclnnMean) X(aclnnAmax) X(aclnnAmin) X(aclnnProdDim) X(aclnnProd) \
  X(aclnnArgMax) X(aclnnArgMin) X(aclnnTopk) X(aclnnAdd) X(aclnnSub) X(aclnnMul) X(aclnnMaximum) X(aclnnMinimum) X(aclnnGtTensor) \
  X(aclnnGeTensor) X(aclnnLtTensor) X(aclnnLeTensor) X(aclnnEqTensor) X(aclnnNeTensor) X(aclnnNeg) X(aclnnAbs) X(aclnnSWhere) \
  X(aclnnCast) X(aclnnExpand) X(aclnnIndexSelect) \
  X(aclnnMaxPool) X(aclnnAvgPool2d) X(aclnnInplaceCopy) X(aclnnPermute) X(aclnnCat) X(aclnnConstantPadNd) X(aclnnConvolution) \
  X(aclnnReflectionPad2d) X(aclnnReplicationPad2d) X(aclnnScatter) X(aclnnScatterNd) X(aclnnInplaceFillScalar) X(aclnnArange) \
  X(aclnnQuantMatmulV5) X(aclnnQuantConvolution) X(aclnnWeightQuantBatchMatmulV2)
using RunFn = Status (*)(void* workspace, uint64_t workspace_size, Executor* executor, acl::Stream stream);

struct Functions {
#define ESG_ACLNN_POINTER(name, ret, params) ret(*name) params = nullptr;
  ESG_ACLNN_BASE_FUNCTIONS(ESG_ACLNN_POINTER)
  ESG_ACLNN_EXECUTOR_FUNCTIONS(ESG_ACLNN_POINTER)
  ESG_ACLNN_PLAN_FUNCTIONS(ESG_ACLNN_POINTER)
#undef ESG_ACLNN_POINTER
#define ESG_ACLNN_RUN_POINTER(name) RunFn name = nullptr;
  ESG_ACLNN_RUN_FUNCTIONS(ESG_ACLNN_RUN_POINTER)
#undef ESG_ACLNN_RUN_POINTER
};

}  // namespace esg::ascend::aclnn
