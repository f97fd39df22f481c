// Runs a oneDNN primitive on the calling thread with its arguments at given addresses. oneDNN
// takes its arguments as memory objects and runs on a stream; making those for each launch costs
// a few heap allocations and about 1.5 us (a sixth of a small 1x1 convolution), so a runner makes
// them once and points them at each launch's buffers. Launches under way at once (a model's
// concurrent runs, the pieces of a split kernel) take a set each from a small pool.
#pragma once
#include <memory>
#include <utility>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

namespace esg::cpu {

class PrimitiveRunner {
 public:
  PrimitiveRunner();
  // `primitive` with its arguments' oneDNN ids and descriptions, in the order execute takes them.
  PrimitiveRunner(dnnl::primitive primitive, std::vector<std::pair<int, dnnl::memory::desc>> args);
  PrimitiveRunner(PrimitiveRunner&&) noexcept;
  PrimitiveRunner& operator=(PrimitiveRunner&&) noexcept;
  ~PrimitiveRunner();

  explicit operator bool() const { return impl_ != nullptr; }
  // One execution on one OpenMP thread, the arguments at `addresses` (one per argument, in the
  // constructor's order), waited for.
  void execute(std::initializer_list<const void*> addresses) const;

 private:
  struct Binding;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace esg::cpu
