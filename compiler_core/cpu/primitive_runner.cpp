#include "cpu/primitive_runner.hpp"

#include <mutex>
#include <unordered_map>

#include "cpu/omp_threads.hpp"
#include "cpu/onednn.hpp"
#include "ir/error.hpp"

namespace esg::cpu {

// One launch's stream and memory objects.
struct PrimitiveRunner::Binding {
  dnnl::stream stream;
  std::vector<dnnl::memory> memories;  // in the arguments' order
  std::unordered_map<int, dnnl::memory> args;
};

struct PrimitiveRunner::Impl {
  dnnl::primitive primitive;
  std::vector<std::pair<int, dnnl::memory::desc>> args;
  std::mutex mutex;
  std::vector<std::unique_ptr<Binding>> free;

  std::unique_ptr<Binding> take() {
    {
      const std::lock_guard<std::mutex> lock(mutex);
      if (!free.empty()) {
        std::unique_ptr<Binding> b = std::move(free.back());
        free.pop_back();
        return b;
      }
    }
    auto b = std::make_unique<Binding>();
    b->stream = dnnl::stream(cpu_engine());
    for (const auto& [id, desc] : args) {
      b->memories.emplace_back(desc, cpu_engine(), nullptr);
      b->args.emplace(id, b->memories.back());
    }
    return b;
  }

  void give_back(std::unique_ptr<Binding> b) {
    const std::lock_guard<std::mutex> lock(mutex);
    free.push_back(std::move(b));
  }
};

PrimitiveRunner::PrimitiveRunner(dnnl::primitive primitive, std::vector<std::pair<int, dnnl::memory::desc>> args)
    : impl_(std::make_unique<Impl>()) {
  impl_->primitive = std::move(primitive);
  impl_->args = std::move(args);
}

PrimitiveRunner::PrimitiveRunner() = default;
PrimitiveRunner::PrimitiveRunner(PrimitiveRunner&&) noexcept = default;
PrimitiveRunner& PrimitiveRunner::operator=(PrimitiveRunner&&) noexcept = default;
PrimitiveRunner::~PrimitiveRunner() = default;

void PrimitiveRunner::execute(std::initializer_list<const void*> addresses) const {
  Impl& p = *impl_;
  if (addresses.size() != p.args.size())
    throw ir::Error(ir::ErrorCode::Internal, "cpu: a oneDNN primitive given " + std::to_string(addresses.size()) + " arguments of " +
                                                 std::to_string(p.args.size()));
  // The binding goes back to the pool however the execution ends.
  struct Lease {
    Impl& impl;
    std::unique_ptr<Binding> binding;
    ~Lease() { impl.give_back(std::move(binding)); }
  } lease{p, p.take()};
  Binding& b = *lease.binding;
  // oneDNN zeros a blocked memory's padding whenever its address is set (its own parallel loop,
  // hence one thread first): only addresses that changed, so that constant weights, and the
  // arena's values at the same place run after run, are not written again (by a run while
  // another reads them).
  const OmpThreads scoped(1);
  size_t i = 0;
  for (const void* address : addresses) {
    dnnl::memory& m = b.memories[i++];
    if (m.get_data_handle() != address) m.set_data_handle(const_cast<void*>(address));
  }
  p.primitive.execute(b.stream, b.args);
  b.stream.wait();
}

}  // namespace esg::cpu
