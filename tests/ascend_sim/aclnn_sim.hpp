// The simulated operator library's objects (libnnopbase.so) and the hooks the simulated
// AscendCL exports for it: queue work on a stream, check device memory, set the recent error.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ascend/aclnn_api.hpp"

namespace esg::ascend::aclnn {

struct Tensor {
  std::vector<int64_t> dims, strides, storage;
  int64_t offset = 0;
  DataType dtype = kFloat;
  Format format = kFormatNd;
  void* data = nullptr;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
};
struct IntArray {
  std::vector<int64_t> values;
};
struct TensorList {
  std::vector<const Tensor*> tensors;
};
struct Scalar {  // the value, read when the scalar is made (as CANN copies it)
  DataType dtype = kFloat;
  double value = 0;
};

}  // namespace esg::ascend::aclnn

extern "C" {
// Queues `task` on a simulated stream (nullptr: the default stream); 0 on success.
int aclsim_enqueue(void* stream, const char* what, std::function<void()>* task);
// Throws unless [p, p + bytes) lies in one live device allocation.
void aclsim_check_device(const void* p, size_t bytes, const char* what);
// Sets the calling thread's aclGetRecentErrMsg and logs the failure.
void aclsim_fail(const char* call, const char* message);
// Appends a line to the call log.
void aclsim_log(const char* line);
// libnnopbase's aclDestroyAclOpExecutor frees with this, which the operator library (libopapi.so,
// whose executors they are) installs when it is loaded.
void aclsim_set_executor_destroyer(esg::ascend::aclnn::Status (*destroy)(esg::ascend::aclnn::Executor*));
}
