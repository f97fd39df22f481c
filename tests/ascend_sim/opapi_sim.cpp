// A stand-in libopapi.so: the aclnn ops the Ascend backend calls, planned and run like CANN's
// (GetWorkspaceSize returns a one-shot executor; the run queues it on a stream), computed by
// esgraph's CPU backend on the simulated device's memory. Matmul asks for a workspace, so that
// the backend's workspace handling is exercised; the run checks it is live device memory.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <type_traits>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>

#include <esgraph/esgraph.hpp>

#include "aclnn_sim.hpp"

using namespace esg::ascend::aclnn;

namespace esg::ascend::aclnn {
struct Executor {
  std::string op;
  uint64_t workspace = 0;
  std::vector<const Tensor*> inputs;  // absent optional inputs dropped
  std::vector<const Tensor*> outs;
  std::unique_ptr<esg::Model> model;
  // What the real op would refuse in the data itself (checked when it runs), or empty.
  std::function<void(const std::vector<esg::HostTensor>&)> check_data;
};
}  // namespace esg::ascend::aclnn

namespace {

constexpr Status kParamNull = 161001, kParamInvalid = 161002;
constexpr uint64_t kMatmulWorkspace = 1024;

std::mutex live_mu;
std::set<Executor*> live;  // planned and not yet run

// A planning call's refusal of what CANN documents it refuses: the reason, and its status.
Status refused(const char* name, const char* why) {
  aclsim_fail(name, why);
  return kParamInvalid;
}

// Element offsets of a view, in row-major order of its dims.
std::vector<int64_t> offsets(const Tensor& t) {
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  std::vector<int64_t> idx(t.dims.size(), 0);
  for (size_t e = 0; e < out.size(); ++e) {
    int64_t at = t.offset;
    for (size_t d = 0; d < idx.size(); ++d) at += idx[d] * t.strides[d];
    out[e] = at;
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < t.dims[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// The element types the simulated library takes: f32, f16, bf16 and bool data, i32/i64 indices,
// and the integers of quantized values: 8 bits, and INT4 (read only, two a byte, the first in the
// low half; an element size of 0 below, its bytes counted apart).
size_t element_size(DataType t) {
  return t == kInt64 ? 8 : t == kFloat16 || t == kBf16 ? 2 : t == kBool || t == kInt8 || t == kUint8 ? 1 : t == kInt4 ? 0 : 4;
}
bool simulated_type(DataType t) {
  return t == kFloat || t == kFloat16 || t == kBf16 || t == kBool || t == kInt32 || t == kInt64 || t == kInt8 || t == kUint8 ||
         t == kInt4;
}
esg::DType esg_type(DataType t) {
  switch (t) {
    case kBool: return esg::boolean;
    case kInt4:  // widened to int8
    case kInt8: return esg::i8;
    case kUint8: return esg::u8;
    case kFloat16: return esg::f16;
    case kBf16: return esg::bf16;
    case kInt32: return esg::i32;
    case kInt64: return esg::i64;
    default: return esg::f32;
  }
}

void check_view(const Tensor& t, const std::vector<int64_t>& at, const char* what) {
  if (at.empty()) return;
  int64_t lo = at[0], hi = at[0];
  for (int64_t o : at) lo = std::min(lo, o), hi = std::max(hi, o);
  if (t.dtype == kInt4) {
    aclsim_check_device(static_cast<const char*>(t.data) + lo / 2, static_cast<size_t>(hi / 2 - lo / 2 + 1), what);
    return;
  }
  const size_t size = element_size(t.dtype);
  aclsim_check_device(static_cast<const char*>(t.data) + lo * static_cast<int64_t>(size), static_cast<size_t>(hi - lo + 1) * size, what);
}

esg::HostTensor gather(const Tensor& t) {
  const std::vector<int64_t> at = offsets(t);
  check_view(t, at, "aclnn input");
  if (t.dtype == kInt4) {  // each nibble sign-extended into a byte
    esg::HostTensor h(esg::i8, t.dims);
    int8_t* out = reinterpret_cast<int8_t*>(h.raw_bytes());
    for (size_t e = 0; e < at.size(); ++e) {
      const uint8_t byte = static_cast<const uint8_t*>(t.data)[at[e] / 2];
      const int nibble = at[e] % 2 ? byte >> 4 : byte & 0xF;
      out[e] = static_cast<int8_t>(nibble >= 8 ? nibble - 16 : nibble);
    }
    return h;
  }
  const size_t size = element_size(t.dtype);
  std::vector<uint8_t> bytes(at.size() * size);
  for (size_t e = 0; e < at.size(); ++e) std::memcpy(&bytes[e * size], static_cast<const char*>(t.data) + at[e] * static_cast<int64_t>(size), size);
  esg::HostTensor h(esg_type(t.dtype), t.dims);
  std::memcpy(h.raw_bytes(), bytes.data(), bytes.size());
  return h;
}

void scatter(const Tensor& t, const esg::HostTensor& h) {
  const std::vector<int64_t> at = offsets(t);
  check_view(t, at, "aclnn output");
  if (static_cast<size_t>(h.count()) != at.size())
    throw std::runtime_error("aclnn output: the result has " + std::to_string(h.count()) + " elements, the view " + std::to_string(at.size()));
  if (h.dtype() != esg_type(t.dtype)) throw std::runtime_error("aclnn output: the result's element type differs from the view's");
  const size_t size = element_size(t.dtype);
  const uint8_t* bytes = h.raw_bytes();
  for (size_t e = 0; e < at.size(); ++e) std::memcpy(static_cast<char*>(t.data) + at[e] * static_cast<int64_t>(size), bytes + e * size, size);
}

// Plans op `name`: `build` makes the esgraph graph of its inputs (as graph inputs, in order),
// returning its result or, for an op of several outputs, the list of them; an op without
// inputs (a generator) gets the builder instead.
template <class Build>
Status plan(const char* name, std::vector<const Tensor*> inputs, std::vector<const Tensor*> outs, uint64_t workspace,
            uint64_t* workspace_size, Executor** executor, Build build,
            std::function<void(const std::vector<esg::HostTensor>&)> check_data = {}) {
  if (std::find(outs.begin(), outs.end(), nullptr) != outs.end() || !workspace_size || !executor) {
    aclsim_fail(name, "a required argument is null");
    return kParamNull;
  }
  // CANN documents ND for every op's tensors but the images of convolution and average pooling:
  // NCL, NCHW, NCDHW by rank, ND refused (a bias, of rank 1, stays ND).
  const bool images = std::strcmp(name, "aclnnConvolution") == 0 || std::strcmp(name, "aclnnAvgPool2d") == 0 ||
                      std::strcmp(name, "aclnnQuantConvolution") == 0;
  for (const std::vector<const Tensor*>* list : {&inputs, &outs})
    for (const Tensor* t : *list) {
      if (!t) continue;
      const uint64_t rank = t->dims.size();
      const Format want = images ? image_format(rank) : kFormatNd;
      if (t->format != want) {
        const std::string message = std::to_string(rank) + "-D tensor of aclFormat " + std::to_string(t->format) + " where CANN documents " +
                                    (want == kFormatNd ? std::string("ND") : "NCL, NCHW or NCDHW by rank (" + std::to_string(want) + ")");
        aclsim_fail(name, message.c_str());
        return kParamInvalid;
      }
    }
  for (const Tensor* t : inputs)
    if (!t || !simulated_type(t->dtype)) {
      aclsim_fail(name, t ? "the simulated operator library computes float32 (indices int32, int64; int8, uint8, int4) only" : "a required tensor is null");
      return t ? kParamInvalid : kParamNull;
    }
  for (const Tensor* out : outs)
    if (!simulated_type(out->dtype) || out->dtype == kInt4) {  // INT4 is read, never written
      aclsim_fail(name, "the simulated operator library gives float32, float16, bfloat16, bool, int32, int64, int8 and uint8 only");
      return kParamInvalid;
    }
  try {
    esg::GraphBuilder b;
    std::vector<esg::Tensor> xs;
    for (size_t i = 0; i < inputs.size(); ++i) xs.push_back(b.input("x" + std::to_string(i), esg_type(inputs[i]->dtype), inputs[i]->dims));
    std::vector<esg::Tensor> ys;
    if constexpr (std::is_invocable_v<Build, esg::GraphBuilder&>) ys = {build(b)};
    else if constexpr (std::is_same_v<decltype(build(xs)), esg::Tensor>) ys = {build(xs)};
    else ys = build(xs);
    if (ys.size() != outs.size()) throw std::runtime_error("the op has " + std::to_string(ys.size()) + " results");
    for (size_t k = 0; k < ys.size(); ++k)
      if (ys[k].shape() != outs[k]->dims) throw std::runtime_error("an output view's dims differ from the op's result");
    auto e = std::make_unique<Executor>();
    e->op = name;
    e->workspace = workspace;
    e->inputs = inputs;
    e->outs = outs;
    e->model = std::make_unique<esg::Model>(esg::compile(b.build(ys)));
    e->check_data = std::move(check_data);
    *workspace_size = workspace;
    *executor = e.release();
    std::lock_guard<std::mutex> lock(live_mu);
    live.insert(*executor);
  } catch (const std::exception& ex) {
    aclsim_fail(name, ex.what());
    return kParamInvalid;
  }
  aclsim_log((std::string(name) + "GetWorkspaceSize workspace=" + std::to_string(workspace)).c_str());
  return 0;
}

Status run(const char* name, void* workspace, uint64_t workspace_size, Executor* e, void* stream) {
  {
    std::lock_guard<std::mutex> lock(live_mu);
    if (!live.erase(e)) {
      aclsim_fail(name, "not a planned executor (each runs once)");
      return kParamInvalid;
    }
  }
  std::unique_ptr<Executor> owned(e);
  if (owned->op != name) {
    aclsim_fail(name, ("the executor was planned for " + owned->op).c_str());
    return kParamInvalid;
  }
  if (workspace_size < owned->workspace || (owned->workspace && !workspace)) {
    aclsim_fail(name, "the workspace is smaller than planned");
    return kParamInvalid;
  }
  aclsim_log((std::string(name) + " workspace=" + std::to_string(workspace_size)).c_str());
  std::shared_ptr<Executor> shared(owned.release());
  std::function<void()> task = [shared, workspace, workspace_size] {
    if (workspace_size) {  // the op scribbles over its workspace, as real ones do
      aclsim_check_device(workspace, workspace_size, "aclnn workspace");
      std::memset(workspace, 0x5A, workspace_size);
    }
    std::vector<esg::HostTensor> in;
    for (const Tensor* t : shared->inputs) in.push_back(gather(*t));
    if (shared->check_data) shared->check_data(in);
    const std::vector<esg::HostTensor> results = shared->model->run(in);
    for (size_t k = 0; k < shared->outs.size(); ++k) scatter(*shared->outs[k], results.at(k));
  };
  return aclsim_enqueue(stream, name, &task) == 0 ? 0 : kParamInvalid;
}

// aclDestroyAclOpExecutor's half: an executor planned and never run; one that ran, or was
// destroyed already, is refused (opbase would free it twice).
Status destroy(Executor* e) {
  {
    std::lock_guard<std::mutex> lock(live_mu);
    if (!live.erase(e)) {
      aclsim_fail("aclDestroyAclOpExecutor", "not a planned executor (run or destroyed already)");
      return kParamInvalid;
    }
  }
  aclsim_log(("aclDestroyAclOpExecutor " + e->op).c_str());
  delete e;
  return 0;
}

[[gnu::constructor]] void install_destroyer() { aclsim_set_executor_destroyer(&destroy); }

}  // namespace

#define ACLSIM_EXPORT extern "C" __attribute__((visibility("default")))
#define ACLSIM_RUN(name)                                                                                  \
  ACLSIM_EXPORT Status name(void* workspace, uint64_t workspace_size, Executor* executor, void* stream) { \
    return run(#name, workspace, workspace_size, executor, stream);                                       \
  }

ACLSIM_EXPORT Status aclnnMatmulGetWorkspaceSize(const Tensor* self, const Tensor* mat2, Tensor* out, int8_t cube_math_type,
                                                 uint64_t* workspace_size, Executor** executor) {
  if (cube_math_type < 0 || cube_math_type > 3) {
    aclsim_fail("aclnnMatmul", "cubeMathType out of range");
    return kParamInvalid;
  }
  // 310P computes f32 products in FLOAT16 only: its rule refuses KEEP_DTYPE (0) and USE_HF32 (3)
  // for FLOAT (ops-nn v8.5.0, matmul_util.cpp Ascend310AMatMulRule).
  const char* soc = std::getenv("ACLSIM_SOC");
  if (soc && std::strncmp(soc, "Ascend310P", 10) == 0 && self && self->dtype == kFloat && (cube_math_type == 0 || cube_math_type == 3)) {
    aclsim_fail("aclnnMatmul", ("cubeMathType " + std::to_string(cube_math_type) + " with FLOAT is not supported on " + soc).c_str());
    return kParamInvalid;
  }
  return plan("aclnnMatmul", {self, mat2}, {out}, kMatmulWorkspace, workspace_size, executor,
              [](const std::vector<esg::Tensor>& x) { return esg::matmul(x[0], x[1]); });
}
ACLSIM_RUN(aclnnMatmul)

// What Atlas A2 takes (ops-nn's aclnnQuantMatmulV5.md, its per-tensor and per-channel table): x1
// and x2 INT8 (x1 never UINT8), ND of 2 to 6 dims, non-empty; no x1Offset and no yScale; an
// x2Scale, FLOAT32 or BFLOAT16, of (1,) or (n,); a result never FLOAT32. The simulator computes the
// INT32 result, x1 @ x2 (+ an INT32 bias of (n,)), where the scales take no part.
ACLSIM_EXPORT Status aclnnQuantMatmulV5GetWorkspaceSize(const Tensor* x1, const Tensor* x2, const Tensor* x1_scale, const Tensor* x2_scale,
                                                        const Tensor* y_scale, const Tensor* x1_offset, const Tensor* x2_offset,
                                                        const Tensor* y_offset, const Tensor* bias, bool transpose_x1, bool transpose_x2,
                                                        int64_t group_size, Tensor* out, uint64_t* workspace_size, Executor** executor) {
  const char* name = "aclnnQuantMatmulV5";
  if (!x1 || !x2 || !x2_scale || !out) {
    aclsim_fail(name, "x1, x2, x2Scale and out are required");
    return kParamNull;
  }
  if (x1->dtype != kInt8 || x2->dtype != kInt8) return refused(name, "x1 and x2 must be INT8 (Atlas A2 has no UINT8 x1)");
  if (x1_offset) return refused(name, "x1Offset must be null on Atlas A2");
  if (y_scale) return refused(name, "yScale is not supported in this version: pass nullptr");
  if (out->dtype == kFloat) return refused(name, "out is FLOAT16, BFLOAT16, INT8 or INT32 on Atlas A2, never FLOAT32");
  if (x1->dims.size() < 2 || x1->dims.size() > 6 || x2->dims.size() < 2 || x2->dims.size() > 6)
    return refused(name, "x1 and x2 have 2 to 6 dims");
  if (x1->numel() == 0 || x2->numel() == 0) return refused(name, "x1 and x2 must not be empty");
  const int64_t n = x2->dims.back();
  if (x2_scale->dims.size() != 1 || (x2_scale->dims[0] != 1 && x2_scale->dims[0] != n) ||
      (x2_scale->dtype != kFloat && x2_scale->dtype != kBf16))
    return refused(name, "x2Scale must be FLOAT32 or BFLOAT16 of shape (1,) or (n,)");
  if (out->dtype != kInt32 || x1_scale || x2_offset || y_offset || transpose_x1 || transpose_x2 || group_size != 0)
    return refused(name, "the simulator computes the per-tensor INT32 result only: no x1Scale, offsets, transposes or groups");
  if (bias && (bias->dtype != kInt32 || bias->dims != std::vector<int64_t>{n})) return refused(name, "an INT32 result's bias is INT32 of (n,)");
  std::vector<const Tensor*> inputs = {x1, x2};
  if (bias) inputs.push_back(bias);
  return plan(name, inputs, {out}, 0, workspace_size, executor, [](const std::vector<esg::Tensor>& x) {
    const esg::Tensor sums = esg::matmul_integer(x[0], x[1], x[0].scalar(0), x[1].scalar(0));
    return x.size() > 2 ? esg::add(sums, x[2]) : sums;
  });
}
ACLSIM_RUN(aclnnQuantMatmulV5)

// What Atlas A2 takes (ops-nn's aclnnQuantConvolution.md, its constraints for A2 and A3): a
// forward 3-D convolution, NCDHW, of INT8 input and weight; a FLOAT scale of (Cout); a bias of
// (Cout), FLOAT, FLOAT16 or BFLOAT16 (not INT32); no offset, offsetx 0, no roundMode; groups 1;
// strides, padding and dilations of 3 values, H and W strides in [1, 63], padding in [0, 255],
// dilations in [1, 255]; a FLOAT16 or BFLOAT16 result: sum · scale + bias. The simulator
// computes depth-1 convolutions only (what the backend makes of 2-D ones).
ACLSIM_EXPORT Status aclnnQuantConvolutionGetWorkspaceSize(const Tensor* input, const Tensor* weight, const Tensor* bias,
                                                           const Tensor* scale, const Tensor* offset, const IntArray* stride,
                                                           const IntArray* padding, const IntArray* dilation, bool transposed,
                                                           const IntArray* output_padding, int64_t groups, int32_t offset_x,
                                                           const char* round_mode, Tensor* output, uint64_t* workspace_size,
                                                           Executor** executor) {
  const char* name = "aclnnQuantConvolution";
  if (!input || !weight || !scale || !stride || !padding || !dilation || !output) {
    aclsim_fail(name, "input, weight, scale, stride, padding, dilation and output are required");
    return kParamNull;
  }
  if (input->dtype != kInt8 || weight->dtype != kInt8) return refused(name, "input and weight must be INT8");
  if (input->dims.size() != 5 || weight->dims.size() != 5 || output->dims.size() != 5)
    return refused(name, "Atlas A2 runs 3-D convolutions only: NCDHW input, weight and output");
  if (output->dtype != kFloat16 && output->dtype != kBf16) return refused(name, "output is FLOAT16 or BFLOAT16 on Atlas A2");
  const int64_t channels = weight->dims[0];
  if (scale->dtype != kFloat || scale->dims != std::vector<int64_t>{channels}) return refused(name, "scale is FLOAT of (Cout) on Atlas A2");
  if (bias && ((bias->dtype != kFloat && bias->dtype != kFloat16 && bias->dtype != kBf16) || bias->dims != std::vector<int64_t>{channels}))
    return refused(name, "bias is FLOAT, FLOAT16 or BFLOAT16 of (Cout) on Atlas A2 (not INT32)");
  if (offset || offset_x != 0 || round_mode || transposed || output_padding)
    return refused(name, "offset, offsetx, roundMode, transposed and outputPadding are not supported: null, 0, null, false, null");
  if (groups != 1) return refused(name, "groups must be 1 on Atlas A2");
  const std::vector<int64_t>& s = stride->values, &p = padding->values, &d = dilation->values;
  if (s.size() != 3 || p.size() != 3 || d.size() != 3) return refused(name, "stride, padding and dilation have 3 values");
  for (size_t i = 1; i < 3; ++i)
    if (s[i] < 1 || s[i] > 63 || p[i] < 0 || p[i] > 255 || d[i] < 1 || d[i] > 255)
      return refused(name, "H and W strides in [1, 63], padding in [0, 255], dilation in [1, 255]");
  if (input->dims[2] != 1 || weight->dims[2] != 1 || s[0] != 1 || p[0] != 0 || d[0] != 1)
    return refused(name, "the simulator computes convolutions of depth 1 only");
  std::vector<const Tensor*> inputs = {input, weight, scale};
  if (bias) inputs.push_back(bias);
  const std::vector<int64_t> out_dims = output->dims;
  return plan(name, inputs, {output}, 0, workspace_size, executor, [=](const std::vector<esg::Tensor>& x) {
    auto flat = [](const esg::Tensor& t) {  // depth 1 dropped
      std::vector<int64_t> dims = t.shape();
      dims.erase(dims.begin() + 2);
      return esg::reshape(t, dims);
    };
    const esg::Tensor one = x[2].scalar(1), zero = x[0].scalar(0);
    esg::Tensor y = esg::quantized_conv2d(flat(x[0]), one, zero, flat(x[1]), x[2], x[1].scalar(0), one, x[2].scalar(0),
                                          esg::QuantizedConv2dOptions().strides({s[1], s[2]}).pads({p[1], p[2], p[1], p[2]}).dilations({d[1], d[2]}));
    if (x.size() > 3) y = y + esg::reshape(esg::cast(x[3], esg::f32), {channels, 1, 1});
    return esg::reshape(esg::cast(y, output->dtype == kFloat16 ? esg::f16 : esg::bf16), out_dims);
  });
}
ACLSIM_RUN(aclnnQuantConvolution)

// What Atlas A2 takes (ops-nn's aclnnWeightQuantBatchMatmulV2.md, its constraints for A2 and A3):
// x FLOAT16 or BFLOAT16 of (m, k); weight INT8 or INT4 of (k, n), ND, contiguous or its transposed
// view, an INT4 one's stored last dim even; k and n in [1, 65535]; antiquantScale of x's dtype,
// (1,), (n,), (1, n) or (ceil(k / group), n) with the group a multiple of 32 in [32, k - 1] (0
// otherwise); antiquantOffset of the scale's shape and dtype, or null; y of x's dtype and (m, n):
// y = x @ ((weight + antiquantOffset) · antiquantScale). The simulator takes no quantScale,
// quantOffset or bias.
ACLSIM_EXPORT Status aclnnWeightQuantBatchMatmulV2GetWorkspaceSize(const Tensor* x, const Tensor* weight, const Tensor* scale,
                                                                   const Tensor* offset, const Tensor* quant_scale, const Tensor* quant_offset,
                                                                   const Tensor* bias, int group_size, const Tensor* y,
                                                                   uint64_t* workspace_size, Executor** executor) {
  const char* name = "aclnnWeightQuantBatchMatmulV2";
  if (!x || !weight || !scale || !y) {
    aclsim_fail(name, "x, weight, antiquantScale and y are required");
    return kParamNull;
  }
  if (x->dtype != kFloat16 && x->dtype != kBf16) return refused(name, "x is FLOAT16 or BFLOAT16");
  if (weight->dtype != kInt8 && weight->dtype != kInt4) return refused(name, "weight is INT8 or INT4");
  if (x->dims.size() != 2 || weight->dims.size() != 2 || y->dims.size() != 2) return refused(name, "x, weight and y have 2 dims");
  const int64_t m = x->dims[0], k = x->dims[1], n = weight->dims[1];
  if (weight->dims[0] != k || y->dims != std::vector<int64_t>{m, n} || y->dtype != x->dtype) return refused(name, "y is x's dtype, of (m, n)");
  if (k < 1 || k > 65535 || n < 1 || n > 65535) return refused(name, "k and n are in [1, 65535]");
  if (weight->dtype == kInt4 && weight->storage.back() % 2) return refused(name, "an INT4 weight's last dim is even");
  const std::vector<int64_t> contiguous = {n, 1}, transposed = {1, k};
  if (weight->strides != contiguous && weight->strides != transposed) return refused(name, "weight is contiguous or the transposed view of (n, k)");
  const int64_t groups = group_size ? (k + group_size - 1) / group_size : 1;
  if (group_size && (group_size % 32 || group_size < 32 || group_size > k - 1)) return refused(name, "antiquantGroupSize is 0, or a multiple of 32 in [32, k - 1]");
  const bool per_group = scale->dims == std::vector<int64_t>{groups, n};
  const bool per_column = scale->dims == std::vector<int64_t>{n} || scale->dims == std::vector<int64_t>{1, n};
  const bool per_tensor = scale->dims == std::vector<int64_t>{1} || scale->dims == std::vector<int64_t>{1, 1};
  if (scale->dtype != x->dtype || (group_size ? !per_group : !(per_column || per_tensor)))
    return refused(name, "antiquantScale is x's dtype, of (1,), (n,), (1, n), or (ceil(k / group), n) with a group size");
  if (offset && (offset->dtype != scale->dtype || offset->dims != scale->dims)) return refused(name, "antiquantOffset is antiquantScale's dtype and shape");
  if (quant_scale || quant_offset || bias) return refused(name, "the simulator computes y of x's dtype without quantScale, quantOffset or bias");
  std::vector<const Tensor*> inputs = {x, weight, scale};
  if (offset) inputs.push_back(offset);
  const esg::DType out = esg_type(y->dtype);
  const int64_t width = per_tensor ? 1 : n;
  return plan(name, inputs, {y}, 0, workspace_size, executor, [=](const std::vector<esg::Tensor>& v) {
    esg::Tensor w = esg::cast(v[1], esg::f32);
    std::vector<int64_t> along = {width};  // the parameters' shape against w's
    if (group_size) {
      w = esg::reshape(w, {groups, group_size, n});
      along = {groups, 1, width};
    }
    if (v.size() > 3) w = w + esg::reshape(esg::cast(v[3], esg::f32), along);
    w = esg::reshape(w * esg::reshape(esg::cast(v[2], esg::f32), along), {k, n});
    return esg::cast(esg::matmul(esg::cast(v[0], esg::f32), w), out);
  });
}
ACLSIM_RUN(aclnnWeightQuantBatchMatmulV2)

ACLSIM_EXPORT Status aclnnSoftmaxGetWorkspaceSize(const Tensor* self, int64_t dim, Tensor* out, uint64_t* workspace_size,
                                                  Executor** executor) {
  return plan("aclnnSoftmax", {self}, {out}, 0, workspace_size, executor,
              [dim](const std::vector<esg::Tensor>& x) { return esg::softmax(x[0], esg::SoftmaxOptions().axis(dim)); });
}
ACLSIM_RUN(aclnnSoftmax)

namespace {
// The reductions over `dim` (keeping it or not) as esgraph's reduce op `Options` builds it; those
// with a dtype argument take the result's own.
template <class Options, class Reduce>
Status plan_reduction(const char* name, const Tensor* self, const IntArray* dim, bool keep_dim, const DataType* dtype, Tensor* out,
                      uint64_t* workspace_size, Executor** executor, Reduce reduce) {
  if (!dim || !out || (dtype && *dtype != out->dtype)) {
    aclsim_fail(name, "dim missing, or a dtype other than the result's");
    return kParamInvalid;
  }
  const std::vector<int64_t> axes = dim->values;
  return plan(name, {self}, {out}, 0, workspace_size, executor,
              [=](const std::vector<esg::Tensor>& x) { return reduce(x[0], Options().axes(axes).keepdims(keep_dim)); });
}
}  // namespace

ACLSIM_EXPORT Status aclnnReduceSumGetWorkspaceSize(const Tensor* self, const IntArray* dims, bool keep_dims, DataType dtype, Tensor* out,
                                                    uint64_t* workspace_size, Executor** executor) {
  return plan_reduction<esg::ReduceSumOptions>("aclnnReduceSum", self, dims, keep_dims, &dtype, out, workspace_size, executor,
                                               [](const esg::Tensor& x, const esg::ReduceSumOptions& o) { return esg::reduce_sum(x, o); });
}
ACLSIM_RUN(aclnnReduceSum)

ACLSIM_EXPORT Status aclnnMeanGetWorkspaceSize(const Tensor* self, const IntArray* dim, bool keep_dim, DataType dtype, Tensor* out,
                                               uint64_t* workspace_size, Executor** executor) {
  return plan_reduction<esg::ReduceMeanOptions>("aclnnMean", self, dim, keep_dim, &dtype, out, workspace_size, executor,
                                                [](const esg::Tensor& x, const esg::ReduceMeanOptions& o) { return esg::reduce_mean(x, o); });
}
ACLSIM_RUN(aclnnMean)

ACLSIM_EXPORT Status aclnnAmaxGetWorkspaceSize(const Tensor* self, const IntArray* dim, bool keep_dim, Tensor* out, uint64_t* workspace_size,
                                               Executor** executor) {
  return plan_reduction<esg::ReduceMaxOptions>("aclnnAmax", self, dim, keep_dim, nullptr, out, workspace_size, executor,
                                               [](const esg::Tensor& x, const esg::ReduceMaxOptions& o) { return esg::reduce_max(x, o); });
}
ACLSIM_RUN(aclnnAmax)

ACLSIM_EXPORT Status aclnnAminGetWorkspaceSize(const Tensor* self, const IntArray* dim, bool keep_dim, Tensor* out, uint64_t* workspace_size,
                                               Executor** executor) {
  return plan_reduction<esg::ReduceMinOptions>("aclnnAmin", self, dim, keep_dim, nullptr, out, workspace_size, executor,
                                               [](const esg::Tensor& x, const esg::ReduceMinOptions& o) { return esg::reduce_min(x, o); });
}
ACLSIM_RUN(aclnnAmin)

ACLSIM_EXPORT Status aclnnProdDimGetWorkspaceSize(const Tensor* self, int64_t dim, bool keep_dim, DataType dtype, Tensor* out,
                                                  uint64_t* workspace_size, Executor** executor) {
  const int64_t dims[] = {dim};
  const IntArray axis{std::vector<int64_t>(dims, dims + 1)};
  return plan_reduction<esg::ReduceProdOptions>("aclnnProdDim", self, &axis, keep_dim, &dtype, out, workspace_size, executor,
                        [](const esg::Tensor& x, const esg::ReduceProdOptions& o) { return esg::reduce_prod(x, o); });
}
ACLSIM_RUN(aclnnProdDim)

// Every element's product, as one element (a 0-D result).
ACLSIM_EXPORT Status aclnnProdGetWorkspaceSize(const Tensor* self, DataType dtype, Tensor* out, uint64_t* workspace_size, Executor** executor) {
  if (!self || !out || out->dtype != dtype) {
    aclsim_fail("aclnnProd", "needs a tensor and a result of the given dtype");
    return kParamInvalid;
  }
  return plan("aclnnProd", {self}, {out}, 0, workspace_size, executor,
              [](const std::vector<esg::Tensor>& x) { return esg::reduce_prod(x[0]); });
}
ACLSIM_RUN(aclnnProd)

ACLSIM_EXPORT Status aclnnArgMaxGetWorkspaceSize(const Tensor* self, int64_t dim, bool keep_dim, Tensor* out, uint64_t* workspace_size,
                                                 Executor** executor) {
  return plan("aclnnArgMax", {self}, {out}, 0, workspace_size, executor, [=](const std::vector<esg::Tensor>& x) {
    return esg::argmax(x[0], esg::ArgmaxOptions().axis(dim).keepdims(keep_dim));
  });
}
ACLSIM_RUN(aclnnArgMax)

ACLSIM_EXPORT Status aclnnArgMinGetWorkspaceSize(const Tensor* self, int64_t dim, bool keep_dim, Tensor* out, uint64_t* workspace_size,
                                                 Executor** executor) {
  return plan("aclnnArgMin", {self}, {out}, 0, workspace_size, executor, [=](const std::vector<esg::Tensor>& x) {
    return esg::argmin(x[0], esg::ArgminOptions().axis(dim).keepdims(keep_dim));
  });
}
ACLSIM_RUN(aclnnArgMin)

#ifndef ACLSIM_WITHOUT_TOPK
// Sorted results only (the simulator's top-k is esgraph's, which gives them in order).
ACLSIM_EXPORT Status aclnnTopkGetWorkspaceSize(const Tensor* self, int64_t k, int64_t dim, bool largest, bool sorted, Tensor* values_out,
                                               Tensor* indices_out, uint64_t* workspace_size, Executor** executor) {
  if (!sorted || !indices_out || indices_out->dtype != kInt64) {
    aclsim_fail("aclnnTopk", "the simulator gives sorted values and int64 indices");
    return kParamInvalid;
  }
  return plan("aclnnTopk", {self}, {values_out, indices_out}, 0, workspace_size, executor, [=](const std::vector<esg::Tensor>& x) {
    return esg::top_k(x[0], k, esg::TopKOptions().axis(dim).largest(largest));
  });
}
ACLSIM_RUN(aclnnTopk)
#endif

// out = self + alpha · other; the backend's alpha is 1, which is all the simulator takes.
Status plan_add_sub(const char* name, const Tensor* self, const Tensor* other, const Scalar* alpha, Tensor* out, uint64_t* workspace_size,
                    Executor** executor, bool subtract) {
  if (!alpha || alpha->value != 1) {
    aclsim_fail(name, "the simulator adds and subtracts with alpha 1");
    return kParamInvalid;
  }
  return plan(name, {self, other}, {out}, 0, workspace_size, executor, [=](const std::vector<esg::Tensor>& x) {
    return subtract ? esg::sub(x[0], x[1]) : esg::add(x[0], x[1]);
  });
}
ACLSIM_EXPORT Status aclnnAddGetWorkspaceSize(const Tensor* self, const Tensor* other, const Scalar* alpha, Tensor* out, uint64_t* workspace_size,
                                              Executor** executor) {
  return plan_add_sub("aclnnAdd", self, other, alpha, out, workspace_size, executor, false);
}
ACLSIM_RUN(aclnnAdd)
ACLSIM_EXPORT Status aclnnSubGetWorkspaceSize(const Tensor* self, const Tensor* other, const Scalar* alpha, Tensor* out, uint64_t* workspace_size,
                                              Executor** executor) {
  return plan_add_sub("aclnnSub", self, other, alpha, out, workspace_size, executor, true);
}
ACLSIM_RUN(aclnnSub)

// The elementwise ops of two tensors (broadcast as numpy does) and of one, as esgraph's ops.
#define ACLSIM_BINARY(name, fn)                                                                                          \
  ACLSIM_EXPORT Status name##GetWorkspaceSize(const Tensor* self, const Tensor* other, Tensor* out, uint64_t* workspace_size, \
                                              Executor** executor) {                                                     \
    return plan(#name, {self, other}, {out}, 0, workspace_size, executor,                                                \
                [](const std::vector<esg::Tensor>& x) { return fn(x[0], x[1]); });                                      \
  }                                                                                                                      \
  ACLSIM_RUN(name)
ACLSIM_BINARY(aclnnMul, esg::mul)
ACLSIM_BINARY(aclnnMaximum, esg::maximum)
ACLSIM_BINARY(aclnnMinimum, esg::minimum)
ACLSIM_BINARY(aclnnGtTensor, esg::greater)
ACLSIM_BINARY(aclnnGeTensor, esg::greater_equal)
ACLSIM_BINARY(aclnnLtTensor, esg::less)
ACLSIM_BINARY(aclnnLeTensor, esg::less_equal)
ACLSIM_BINARY(aclnnEqTensor, esg::equal)
ACLSIM_BINARY(aclnnNeTensor, esg::not_equal)
#define ACLSIM_UNARY(name, fn)                                                                                                     \
  ACLSIM_EXPORT Status name##GetWorkspaceSize(const Tensor* self, Tensor* out, uint64_t* workspace_size, Executor** executor) { \
    return plan(#name, {self}, {out}, 0, workspace_size, executor, [](const std::vector<esg::Tensor>& x) { return fn(x[0]); }); \
  }                                                                                                                                \
  ACLSIM_RUN(name)
ACLSIM_UNARY(aclnnNeg, esg::neg)
ACLSIM_UNARY(aclnnAbs, esg::abs)

ACLSIM_EXPORT Status aclnnSWhereGetWorkspaceSize(const Tensor* condition, const Tensor* self, const Tensor* other, Tensor* out,
                                                 uint64_t* workspace_size, Executor** executor) {
  if (!condition || condition->dtype != kBool) {
    aclsim_fail("aclnnSWhere", "the condition must be a bool tensor");
    return kParamInvalid;
  }
  return plan("aclnnSWhere", {condition, self, other}, {out}, 0, workspace_size, executor,
              [](const std::vector<esg::Tensor>& x) { return esg::where(x[0], x[1], x[2]); });
}
ACLSIM_RUN(aclnnSWhere)

ACLSIM_EXPORT Status aclnnCastGetWorkspaceSize(const Tensor* self, DataType dtype, Tensor* out, uint64_t* workspace_size, Executor** executor) {
  if (!out || out->dtype != dtype || !simulated_type(dtype)) {
    aclsim_fail("aclnnCast", "the result must be of the given dtype, one the simulator takes");
    return kParamInvalid;
  }
  return plan("aclnnCast", {self}, {out}, 0, workspace_size, executor,
              [dtype](const std::vector<esg::Tensor>& x) { return esg::cast(x[0], esg_type(dtype)); });
}
ACLSIM_RUN(aclnnCast)

ACLSIM_EXPORT Status aclnnExpandGetWorkspaceSize(const Tensor* self, const IntArray* size, Tensor* out, uint64_t* workspace_size,
                                                 Executor** executor) {
  if (!size) return kParamNull;
  const std::vector<int64_t> shape = size->values;
  return plan("aclnnExpand", {self}, {out}, 0, workspace_size, executor,
              [=](const std::vector<esg::Tensor>& x) { return esg::expand(x[0], shape); });
}
ACLSIM_RUN(aclnnExpand)

// Indices within [0, size of the axis): the simulator takes no negative ones, as CANN documents
// none for IndexSelect.
ACLSIM_EXPORT Status aclnnIndexSelectGetWorkspaceSize(const Tensor* self, int64_t dim, const Tensor* index, Tensor* out,
                                                      uint64_t* workspace_size, Executor** executor) {
  if (!self || !index || index->dims.size() != 1 || dim < 0 || dim >= static_cast<int64_t>(self->dims.size())) {
    aclsim_fail("aclnnIndexSelect", "needs a tensor, an axis of it and a 1-D index tensor");
    return kParamInvalid;
  }
  const int64_t size = self->dims[static_cast<size_t>(dim)];
  return plan(
      "aclnnIndexSelect", {self, index}, {out}, 0, workspace_size, executor,
      [dim](const std::vector<esg::Tensor>& x) { return esg::gather(x[0], x[1], esg::GatherOptions().axis(dim)); },
      [size](const std::vector<esg::HostTensor>& in) {
        const esg::HostTensor& i = in[1];
        for (size_t k = 0; k < static_cast<size_t>(i.count()); ++k) {
          const int64_t v = i.dtype() == esg::i32 ? i.values<int32_t>()[k] : i.values<int64_t>()[k];
          if (v < 0 || v >= size)
            throw std::runtime_error("index " + std::to_string(v) + " outside [0, " + std::to_string(size) + ")");
        }
      });
}
ACLSIM_RUN(aclnnIndexSelect)

ACLSIM_EXPORT Status aclnnMaxPoolGetWorkspaceSize(const Tensor* self, const IntArray* kernel_shape, const IntArray* strides, int64_t auto_pad,
                                                  const IntArray* pads, const IntArray* dilations, int64_t ceil_mode, Tensor* out,
                                                  uint64_t* workspace_size, Executor** executor) {
  const bool ok = kernel_shape && strides && pads && dilations && kernel_shape->values.size() == 2 && strides->values.size() == 2 &&
                  pads->values.size() == 4 && auto_pad == 0 && dilations->values == std::vector<int64_t>{1, 1};
  if (!ok) {
    aclsim_fail("aclnnMaxPool", "the simulator pools 2-D windows with four pads, autoPad 0 and no dilation");
    return kParamInvalid;
  }
  const std::vector<int64_t> k = kernel_shape->values, st = strides->values, p = pads->values;
  return plan("aclnnMaxPool", {self}, {out}, 0, workspace_size, executor, [=](const std::vector<esg::Tensor>& x) {
    return esg::max_pool2d(x[0], k, esg::MaxPool2dOptions().strides(st).pads(p).ceil_mode(ceil_mode != 0));
  });
}
ACLSIM_RUN(aclnnMaxPool)

// The mean over the window's elements inside the input (countIncludePad false, no divisor).
ACLSIM_EXPORT Status aclnnAvgPool2dGetWorkspaceSize(const Tensor* self, const IntArray* kernel_size, const IntArray* strides,
                                                    const IntArray* paddings, bool ceil_mode, bool count_include_pad, int64_t divisor_override,
                                                    int8_t cube_math_type, Tensor* out, uint64_t* workspace_size, Executor** executor) {
  const bool ok = kernel_size && strides && paddings && kernel_size->values.size() == 2 && strides->values.size() == 2 &&
                  paddings->values.size() == 2 && !count_include_pad && divisor_override == 0 && cube_math_type >= 0 && cube_math_type <= 3;
  if (!ok) {
    aclsim_fail("aclnnAvgPool2d", "the simulator averages 2-D windows over the input's elements only, without a divisor");
    return kParamInvalid;
  }
  // As CANN documents it: pads of at most half the window (the formats are plan's to check).
  if (!self || !out || 2 * paddings->values[0] > kernel_size->values[0] || 2 * paddings->values[1] > kernel_size->values[1]) {
    aclsim_fail("aclnnAvgPool2d", "needs pads of at most half the window");
    return kParamInvalid;
  }
  const std::vector<int64_t> k = kernel_size->values, st = strides->values;
  const std::vector<int64_t> p{paddings->values[0], paddings->values[1], paddings->values[0], paddings->values[1]};
  return plan("aclnnAvgPool2d", {self}, {out}, 0, workspace_size, executor, [=](const std::vector<esg::Tensor>& x) {
    return esg::avg_pool2d(x[0], k, esg::AvgPool2dOptions().strides(st).pads(p).ceil_mode(ceil_mode));
  });
}
ACLSIM_RUN(aclnnAvgPool2d)

// selfRef = src, element by element in row-major order of their views (same dims here).
ACLSIM_EXPORT Status aclnnInplaceCopyGetWorkspaceSize(Tensor* self_ref, const Tensor* src, uint64_t* workspace_size, Executor** executor) {
  if (!self_ref || !src || self_ref->dims != src->dims) {
    aclsim_fail("aclnnInplaceCopy", "the simulator copies between views of the same dims");
    return kParamInvalid;
  }
  return plan("aclnnInplaceCopy", {src}, {self_ref}, 0, workspace_size, executor,
              [](const std::vector<esg::Tensor>& x) { return x[0] * 1.0f; });
}
ACLSIM_RUN(aclnnInplaceCopy)

ACLSIM_EXPORT Status aclnnPermuteGetWorkspaceSize(const Tensor* self, const IntArray* dims, Tensor* out, uint64_t* workspace_size,
                                                  Executor** executor) {
  if (!dims) return kParamNull;
  const std::vector<int64_t> perm = dims->values;
  return plan("aclnnPermute", {self}, {out}, 0, workspace_size, executor,
              [=](const std::vector<esg::Tensor>& x) { return esg::transpose(x[0], esg::TransposeOptions().perm(perm)); });
}
ACLSIM_RUN(aclnnPermute)

ACLSIM_EXPORT Status aclnnCatGetWorkspaceSize(const TensorList* tensors, int64_t dim, Tensor* out, uint64_t* workspace_size,
                                              Executor** executor) {
  if (!tensors) return kParamNull;
  return plan("aclnnCat", tensors->tensors, {out}, 0, workspace_size, executor,
              [dim](const std::vector<esg::Tensor>& x) { return esg::concat(x, dim); });
}
ACLSIM_RUN(aclnnCat)

// pad: (before, after) pairs from the last axis on, at most two per axis; the others unpadded.
ACLSIM_EXPORT Status aclnnConstantPadNdGetWorkspaceSize(const Tensor* self, const IntArray* pad, const Scalar* value, Tensor* out,
                                                        uint64_t* workspace_size, Executor** executor) {
  if (!self || !pad || !value || pad->values.size() % 2 || pad->values.size() > 2 * self->dims.size()) {
    aclsim_fail("aclnnConstantPadNd", "needs a tensor, an even number of pads (at most two per axis) and a value");
    return kParamInvalid;
  }
  const size_t rank = self->dims.size();
  std::vector<int64_t> pads(2 * rank, 0);
  for (size_t k = 0; k < pad->values.size() / 2; ++k) {
    const size_t d = rank - 1 - k;
    pads[d] = pad->values[2 * k], pads[rank + d] = pad->values[2 * k + 1];
  }
  const double fill = value->value;
  return plan("aclnnConstantPadNd", {self}, {out}, 0, workspace_size, executor,
              [=](const std::vector<esg::Tensor>& x) { return esg::pad(x[0], pads, esg::PadOptions().value(fill)); });
}
ACLSIM_RUN(aclnnConstantPadNd)

// Reflection and replication pads of the last two dims of a 3-D or 4-D tensor: padding is
// left, right, top, bottom, each less than its dim (CANN's constraint for both).
Status plan_border_pad(const char* name, esg::PadMode mode, const Tensor* self, const IntArray* padding, Tensor* out, uint64_t* workspace_size,
                       Executor** executor) {
  if (!self || !padding || padding->values.size() != 4 || self->dims.size() < 3 || self->dims.size() > 4) {
    aclsim_fail(name, "needs a 3-D or 4-D tensor and four pads (left, right, top, bottom)");
    return kParamInvalid;
  }
  const size_t rank = self->dims.size();
  const std::vector<int64_t>& p = padding->values;
  for (size_t k = 0; k < 4; ++k)
    if (p[k] < 0 || p[k] >= self->dims[k < 2 ? rank - 1 : rank - 2]) {
      aclsim_fail(name, "a pad of at least its dim");
      return kParamInvalid;
    }
  std::vector<int64_t> pads(2 * rank, 0);
  pads[rank - 1] = p[0], pads[2 * rank - 1] = p[1], pads[rank - 2] = p[2], pads[2 * rank - 2] = p[3];
  return plan(name, {self}, {out}, 0, workspace_size, executor,
              [=](const std::vector<esg::Tensor>& x) { return esg::pad(x[0], pads, esg::PadOptions().mode(mode)); });
}
ACLSIM_EXPORT Status aclnnReflectionPad2dGetWorkspaceSize(const Tensor* self, const IntArray* padding, Tensor* out, uint64_t* workspace_size,
                                                          Executor** executor) {
  return plan_border_pad("aclnnReflectionPad2d", esg::PadMode::Reflect, self, padding, out, workspace_size, executor);
}
ACLSIM_RUN(aclnnReflectionPad2d)
ACLSIM_EXPORT Status aclnnReplicationPad2dGetWorkspaceSize(const Tensor* self, const IntArray* padding, Tensor* out, uint64_t* workspace_size,
                                                           Executor** executor) {
  return plan_border_pad("aclnnReplicationPad2d", esg::PadMode::Edge, self, padding, out, workspace_size, executor);
}
ACLSIM_RUN(aclnnReplicationPad2d)

ACLSIM_EXPORT Status aclnnInplaceFillScalarGetWorkspaceSize(Tensor* self_ref, const Scalar* value, uint64_t* workspace_size, Executor** executor) {
  if (!self_ref || !value) {
    aclsim_fail("aclnnInplaceFillScalar", "needs a tensor and a value");
    return kParamNull;
  }
  const std::vector<int64_t> shape = self_ref->dims;
  const esg::DType dtype = esg_type(self_ref->dtype);
  const double v = value->value;
  return plan("aclnnInplaceFillScalar", {}, {self_ref}, 0, workspace_size, executor,
              [=](esg::GraphBuilder& b) { return esg::fill(b, shape, esg::FillOptions().value(v).dtype(dtype)); });
}
ACLSIM_RUN(aclnnInplaceFillScalar)

// [start, end) by step into a 1-D out of exactly that many elements; start before end in the
// step's direction, as CANN requires.
ACLSIM_EXPORT Status aclnnArangeGetWorkspaceSize(const Scalar* start, const Scalar* end, const Scalar* step, Tensor* out, uint64_t* workspace_size,
                                                 Executor** executor) {
  if (!start || !end || !step || !out || out->dims.size() != 1 || step->value == 0 ||
      (step->value > 0 ? start->value >= end->value : start->value <= end->value)) {
    aclsim_fail("aclnnArange", "needs start before end in the direction of a nonzero step, and a 1-D out");
    return kParamInvalid;
  }
  const double from = start->value, to = end->value, by = step->value;
  const esg::DType dtype = esg_type(out->dtype);
  return plan("aclnnArange", {}, {out}, 0, workspace_size, executor,
              [=](esg::GraphBuilder& b) { return esg::range(b, to, esg::RangeOptions().start(from).step(by).dtype(dtype)); });
}
ACLSIM_RUN(aclnnArange)

// Indices in [0, size) only, as CANN documents them for both scatters (checked when the op
// runs); what several updates of one element give is the CPU's (the last, in row-major order).
void check_indices(const esg::HostTensor& i, const std::vector<int64_t>& bounds) {
  for (size_t k = 0; k < static_cast<size_t>(i.count()); ++k) {
    const int64_t v = i.dtype() == esg::i32 ? i.values<int32_t>()[k] : i.values<int64_t>()[k];
    const int64_t size = bounds[k % bounds.size()];
    if (v < 0 || v >= size) throw std::runtime_error("index " + std::to_string(v) + " outside [0, " + std::to_string(size) + ")");
  }
}

ACLSIM_EXPORT Status aclnnScatterGetWorkspaceSize(const Tensor* self, int64_t dim, const Tensor* index, const Tensor* src, int64_t reduce,
                                                  Tensor* out, uint64_t* workspace_size, Executor** executor) {
  if (!self || !index || !src || dim < 0 || dim >= static_cast<int64_t>(self->dims.size()) || reduce < 0 || reduce > 2 ||
      index->dims.size() != self->dims.size() || src->dims.size() != self->dims.size()) {
    aclsim_fail("aclnnScatter", "needs self, index and src of one rank, an axis of self and reduce 0, 1 or 2");
    return kParamInvalid;
  }
  const int64_t size = self->dims[static_cast<size_t>(dim)];
  return plan(
      "aclnnScatter", {self, index, src}, {out}, 0, workspace_size, executor,
      [=](const std::vector<esg::Tensor>& x) {
        return esg::scatter_elements(x[0], x[1], x[2],
                                     esg::ScatterElementsOptions().axis(dim).reduction(static_cast<esg::ScatterElementsReduction>(reduce)));
      },
      [size](const std::vector<esg::HostTensor>& in) { check_indices(in[1], {size}); });
}
ACLSIM_RUN(aclnnScatter)

ACLSIM_EXPORT Status aclnnScatterNdGetWorkspaceSize(const Tensor* data, const Tensor* indices, const Tensor* updates, Tensor* out,
                                                    uint64_t* workspace_size, Executor** executor) {
  if (!data || !indices || !updates || indices->dims.empty() || indices->dims.back() > static_cast<int64_t>(data->dims.size())) {
    aclsim_fail("aclnnScatterNd", "needs data, index tuples of at most its rank, and updates");
    return kParamInvalid;
  }
  const std::vector<int64_t> bounds(data->dims.begin(), data->dims.begin() + indices->dims.back());
  return plan(
      "aclnnScatterNd", {data, indices, updates}, {out}, 0, workspace_size, executor,
      [](const std::vector<esg::Tensor>& x) { return esg::scatter_nd(x[0], x[1], x[2]); },
      [bounds](const std::vector<esg::HostTensor>& in) {
        if (!bounds.empty()) check_indices(in[1], bounds);
      });
}
ACLSIM_RUN(aclnnScatterNd)

ACLSIM_EXPORT Status aclnnConvolutionGetWorkspaceSize(const Tensor* input, const Tensor* weight, const Tensor* bias, const IntArray* stride,
                                                      const IntArray* padding, const IntArray* dilation, bool transposed,
                                                      const IntArray* output_padding, int64_t groups, Tensor* output,
                                                      int8_t cube_math_type, uint64_t* workspace_size, Executor** executor) {
  const bool two_d = stride && padding && dilation && output_padding && stride->values.size() == 2 && padding->values.size() == 2 &&
                     dilation->values.size() == 2;
  if (!two_d || transposed || (output_padding && output_padding->values != std::vector<int64_t>{0, 0}) || cube_math_type < 0 ||
      cube_math_type > 3) {
    aclsim_fail("aclnnConvolution", "the simulator convolves in 2-D, not transposed, without output padding");
    return kParamInvalid;
  }
  if (cube_math_type == 0 && input && input->dtype == kFloat) {  // ops-nn's aclnnConvolution.md, for every product it lists
    aclsim_fail("aclnnConvolution", "cubeMathType 0 (KEEP_DTYPE) with FLOAT input is not supported");
    return kParamInvalid;
  }
  std::vector<const Tensor*> inputs{input, weight};
  if (bias) inputs.push_back(bias);
  const std::vector<int64_t> s = stride->values, d = dilation->values;
  const std::vector<int64_t> p{padding->values[0], padding->values[1], padding->values[0], padding->values[1]};
  return plan("aclnnConvolution", inputs, {output}, 0, workspace_size, executor, [=](const std::vector<esg::Tensor>& x) {
    esg::Conv2dOptions o;
    o.strides(s).pads(p).dilations(d).groups(groups);
    if (bias) o.bias(x[2]);
    return esg::conv2d(x[0], x[1], o);
  });
}
ACLSIM_RUN(aclnnConvolution)
