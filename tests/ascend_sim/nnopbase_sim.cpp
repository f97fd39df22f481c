// A stand-in libnnopbase.so: the descriptors of CANN's operator library, as plain host objects.
#include <cstring>

#include "aclnn_sim.hpp"

using namespace esg::ascend::aclnn;

#define ACLSIM_EXPORT extern "C" __attribute__((visibility("default")))

ACLSIM_EXPORT Tensor* aclCreateTensor(const int64_t* view_dims, uint64_t view_rank, DataType dtype, const int64_t* strides,
                                      int64_t offset, Format format, const int64_t* storage_dims, uint64_t storage_rank, void* data) {
  // ND, or the image format of the view's rank (NCL, NCHW, NCDHW): the formats the backend uses.
  if ((view_rank && (!view_dims || !strides)) || (storage_rank && !storage_dims) ||
      (format != kFormatNd && format != image_format(view_rank)))
    return nullptr;
  auto* t = new Tensor();
  t->dims.assign(view_dims, view_dims + view_rank);
  t->strides.assign(strides, strides + view_rank);
  t->storage.assign(storage_dims, storage_dims + storage_rank);
  t->offset = offset;
  t->dtype = dtype;
  t->format = format;
  t->data = data;
  return t;
}
ACLSIM_EXPORT Status aclDestroyTensor(const Tensor* tensor) {
  delete tensor;
  return 0;
}
ACLSIM_EXPORT IntArray* aclCreateIntArray(const int64_t* values, uint64_t size) {
  if (size && !values) return nullptr;
  return new IntArray{std::vector<int64_t>(values, values + size)};
}
ACLSIM_EXPORT Status aclDestroyIntArray(const IntArray* array) {
  delete array;
  return 0;
}
ACLSIM_EXPORT TensorList* aclCreateTensorList(const Tensor* const* values, uint64_t size) {
  if (size && !values) return nullptr;
  return new TensorList{std::vector<const Tensor*>(values, values + size)};
}
// The list owns its tensors.
ACLSIM_EXPORT Status aclDestroyTensorList(const TensorList* list) {
  if (list)
    for (const Tensor* t : list->tensors) delete t;
  delete list;
  return 0;
}
ACLSIM_EXPORT Scalar* aclCreateScalar(void* value, DataType dtype) {
  if (!value) return nullptr;
  switch (dtype) {
    case kFloat: return new Scalar{dtype, *static_cast<const float*>(value)};
    case kDouble: return new Scalar{dtype, *static_cast<const double*>(value)};
    case kInt32: return new Scalar{dtype, static_cast<double>(*static_cast<const int32_t*>(value))};
    case kInt64: return new Scalar{dtype, static_cast<double>(*static_cast<const int64_t*>(value))};
    default: return nullptr;  // the simulator's scalars: float, double, int32 and int64
  }
}
ACLSIM_EXPORT Status aclDestroyScalar(const Scalar* scalar) {
  delete scalar;
  return 0;
}

namespace {
Status (*destroy_executor)(Executor*) = nullptr;
}
ACLSIM_EXPORT void aclsim_set_executor_destroyer(Status (*destroy)(Executor*)) { destroy_executor = destroy; }
// Frees an executor that was planned and not run, as opbase's does (a run frees its own).
ACLSIM_EXPORT Status aclDestroyAclOpExecutor(Executor* executor) {
  return destroy_executor ? destroy_executor(executor) : 161002;  // no operator library, so no executor
}
