// An f32 convolution as a oneDNN primitive, made once when the plan is lowered: oneDNN picks
// its kernel for this CPU and these shapes (direct JIT convolutions on blocked channels,
// Winograd, depthwise), constant filters are reordered into the layout it wants right then,
// and each run only executes it. Its images and result lie in the launch's memory formats
// (row-major NCHW, or nChw8c / nChw16c: plan/format.hpp's layouts are oneDNN's; row-major images
// with a blocked result for a first layer), and it may apply a group's epilogue as post-ops
// (conv_epilogue.hpp).
#pragma once
#include <memory>
#include <string>

#include "cpu/conv_epilogue.hpp"
#include "ir/graph.hpp"
#include "plan/format.hpp"
#include "runtime/plan.hpp"

namespace esg::cpu {

// Whether oneDNN multiplies bfloat16 on this CPU (AVX512-BF16 or AMX-BF16), the condition for
// precision bf16.
bool cpu_multiplies_bf16();

// oneDNN's threads for a convolution or reorder of a model compiled with `options`: the model's,
// shared among its streams, which may run at once. The layout decision and the primitives take
// the same count, so that oneDNN chooses the same kernels for both.
int library_threads(const runtime::CompileOptions& options);

class ConvPrimitive {
 public:
  // A primitive for conv2d node `n` of `g` reading its images in format `src`, writing its
  // result in `dst`, applying `post_ops`, on at most `threads` threads (fewer for a small one;
  // oneDNN splits the work for the count set when it is made); nullptr, with the reason in
  // `why_not`, when oneDNN has no optimized kernel for it (its reference kernels are slower
  // than the im2col path) or the node is not all f32.
  // With `bf16`, its images and filters are rounded to bfloat16 (the products summed in f32)
  // where oneDNN has such a kernel for it, else it stays f32.
  static std::unique_ptr<ConvPrimitive> make(const ir::Graph& g, const ir::Node& n, plan::Format src, plan::Format dst,
                                             const std::vector<PostOp>& post_ops, int threads, bool bf16, std::string& why_not);
  // The kernel make would choose without post-ops, or "" when it would fail (cheaper: nothing
  // is compiled or reordered).
  static std::string kernel_for(const ir::Graph& g, const ir::Node& n, plan::Format src, plan::Format dst, int threads);
  ~ConvPrimitive();
  ConvPrimitive(const ConvPrimitive&) = delete;
  ConvPrimitive& operator=(const ConvPrimitive&) = delete;

  // One run, on the threads it was made for. `filters` and `bias` are read only when they were
  // not constants at make (else the reordered copy is used); `bias` may be null when the node
  // has none. With a sum post-op, `dst` already holds the value it adds. `working`: 64-byte
  // aligned, working_bytes() of them, this run's own (oneDNN's scratchpad, bf16 images,
  // filters reordered at run time).
  void run(const float* images, const float* filters, const float* bias, float* dst, uint8_t* working) const;
  size_t working_bytes() const;
  // oneDNN's name for the kernel it chose ("jit:avx512_core", "brgconv:avx512_core", ...).
  const std::string& implementation() const;
  bool bf16() const;  // its operands rounded to bfloat16

 private:
  struct Impl;
  explicit ConvPrimitive(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace esg::cpu
