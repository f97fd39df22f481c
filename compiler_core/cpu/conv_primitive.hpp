// A convolution as a oneDNN primitive (an f32 conv2d, or a quantized_conv2d on oneDNN's int8
// kernels, requantized by them), made once when the plan is lowered: oneDNN picks
// its kernel for this CPU and these shapes (direct JIT convolutions on blocked channels,
// Winograd, depthwise), constant filters are reordered into the layout it wants right then,
// and each run only executes it. A large convolution is split into pieces, one primitive each
// on one thread, run on the model's pool as any other kernel's pieces are: its images when there
// are several, else its output channels in whole blocks. The pool's pieces go to whichever thread
// asks first, the caller included, so a pool thread the OS has not scheduled holds up at most a
// piece it already took, where an OpenMP team (oneDNN's own threading) waits for every member.
// Its images and result lie in the launch's memory formats
// (row-major NCHW, or nChw8c / nChw16c: schedule/format.hpp's layouts are oneDNN's; row-major images
// with a blocked result for a first layer), and it may apply a group's epilogue as post-ops
// (conv_epilogue.hpp). A quantized one reads and writes row-major NCHW 8-bit tensors, reordered
// to and from the channels-last layout oneDNN's int8 kernels take, in its working memory.
#pragma once
#include <memory>
#include <string>

#include "cpu/packed_weights.hpp"
#include "cpu/conv_epilogue.hpp"
#include "ir/graph.hpp"
#include "schedule/format.hpp"
#include "runtime/plan.hpp"

namespace esg::cpu {

// Whether oneDNN multiplies bfloat16 on this CPU (AVX512-BF16 or AMX-BF16), the condition for
// precision bf16.
bool cpu_multiplies_bf16();

// The threads a convolution or reorder of a model compiled with `options` may use: the model's,
// shared among its streams, which may run at once.
int library_threads(const runtime::CompileOptions& options);

class ConvPrimitive {
 public:
  // A primitive for conv2d node `n` of `g` reading its images in format `src`, writing its
  // result in `dst`, applying `post_ops`, in at most `threads` pieces (fewer for a small one,
  // or for one image with fewer blocks of output channels); nullptr, with the reason in
  // `why_not`, when oneDNN has no optimized kernel for it (its reference kernels are slower
  // than the im2col path) or the node is neither an f32 conv2d nor a quantized_conv2d whose
  // scales and zero points are constants (the filters' zero point 0).
  // With `bf16`, its images and filters are rounded to bfloat16 (the products summed in f32)
  // where oneDNN has such a kernel for it, else it stays f32. `like`: the same convolution's
  // primitive at other sizes (another binding of a symbolic plan), whose reordered constant
  // filters a piece of the same output channels and layout shares. Constant filters are
  // reordered through `pack`, one call per piece.
  static std::unique_ptr<ConvPrimitive> make(const ir::Graph& g, const ir::Node& n, schedule::Format src, schedule::Format dst,
                                             const std::vector<PostOp>& post_ops, int threads, bool bf16, const PackWeights& pack,
                                             std::string& why_not, const ConvPrimitive* like = nullptr);
  // The kernel make would choose without post-ops for the whole convolution, or "" when it
  // would fail (cheaper: nothing is compiled or reordered). A quantized one's layouts are its
  // kernel's own, whatever `src` and `dst` say.
  static std::string kernel_for(const ir::Graph& g, const ir::Node& n, schedule::Format src, schedule::Format dst);
  ~ConvPrimitive();
  ConvPrimitive(const ConvPrimitive&) = delete;
  ConvPrimitive& operator=(const ConvPrimitive&) = delete;

  // One run, its pieces over `parallel` (null: one after the other on the calling thread).
  // `filters` and `bias` are read only when they were
  // not constants at make (else the reordered copy is used); `bias` may be null when the node
  // has none. With a sum post-op, `dst` already holds the value it adds. `working`: 64-byte
  // aligned, working_bytes() of them, this run's own (oneDNN's scratchpad, bf16 images,
  // filters reordered at run time).
  void run(const void* images, const void* filters, const void* bias, void* dst, uint8_t* working,
           const eval::Parallel* parallel) const;
  size_t working_bytes() const;
  // oneDNN's name for the kernel it chose ("jit:avx512_core", "brgconv:avx512_core", ...).
  const std::string& implementation() const;
  // "f32", "bf16" (its operands rounded to bfloat16), "int8", or "int8, filters in halves"
  // (on a CPU without VNNI, see conv_primitive.cpp).
  std::string precision() const;
  int pieces() const;  // the primitives it is split into

 private:
  struct Impl;
  explicit ConvPrimitive(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace esg::cpu
