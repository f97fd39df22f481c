// How much heap compiling takes per node, counted by replacing the global operator new: a
// deterministic bound (bytes, not seconds) that holds whatever the machine, and a check that it
// grows linearly with the graph. Figures for larger graphs: bench/graph_scaling.py.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <malloc.h>

#include <atomic>
#include <functional>
#include <cstdlib>
#include <new>

#include <esgraph/esgraph.hpp>

namespace {
std::atomic<size_t> g_live{0}, g_peak{0};

void* counted(void* p) {
  if (!p) throw std::bad_alloc();
  const size_t live = g_live.fetch_add(malloc_usable_size(p)) + malloc_usable_size(p);
  for (size_t peak = g_peak.load(); live > peak && !g_peak.compare_exchange_weak(peak, live);) {
  }
  return p;
}
void uncounted(void* p) {
  if (!p) return;
  g_live.fetch_sub(malloc_usable_size(p));
  std::free(p);
}
}  // namespace

void* operator new(size_t n) { return counted(std::malloc(n ? n : 1)); }
void* operator new[](size_t n) { return counted(std::malloc(n ? n : 1)); }
void* operator new(size_t n, std::align_val_t a) {
  return counted(std::aligned_alloc(static_cast<size_t>(a), (n + static_cast<size_t>(a) - 1) / static_cast<size_t>(a) * static_cast<size_t>(a)));
}
void* operator new[](size_t n, std::align_val_t a) { return operator new(n, a); }
void operator delete(void* p) noexcept { uncounted(p); }
void operator delete[](void* p) noexcept { uncounted(p); }
void operator delete(void* p, size_t) noexcept { uncounted(p); }
void operator delete[](void* p, size_t) noexcept { uncounted(p); }
void operator delete(void* p, std::align_val_t) noexcept { uncounted(p); }
void operator delete[](void* p, std::align_val_t) noexcept { uncounted(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { uncounted(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { uncounted(p); }

namespace {
// A chain of `nodes` ops, tanh and softmax by turns: fused, the tanhs join their neighbours'
// kernels; unfused, each op is a launch.
esg::Graph chain(int nodes) {
  esg::GraphBuilder b("chain");
  esg::Tensor y = b.input("x", esg::f32, {4, 8});
  for (int i = 0; i < nodes; ++i) y = i % 2 ? esg::softmax(y) : esg::tanh(y);
  return b.build({y});
}

// `copies` chains of ifs nested to the limit (64 deep), each branch an op: control flow's
// regions, captures and per-body plans.
esg::Graph nested(int copies) {
  esg::GraphBuilder b("nested");
  const esg::Tensor x = b.input("x", esg::f32, {4});
  const esg::Tensor flag = b.input("flag", esg::boolean, {});
  std::function<esg::Tensor(int)> nest = [&](int depth) -> esg::Tensor {
    if (depth == 0) return esg::exp(x);
    return esg::if_(flag, [&] { return nest(depth - 1); }, [&] { return -x; })[0];
  };
  std::vector<esg::Tensor> outs;
  for (int i = 0; i < copies; ++i) outs.push_back(nest(64));
  return b.build(outs);
}

// The heap compiling takes at its peak, beyond what was live before.
size_t compile_peak(const esg::Graph& g, bool fusion) {
  const size_t before = g_live.load();
  g_peak.store(before);
  const esg::Model m = esg::compile(g, esg::CompileOptions().threads(1).fusion(fusion));
  return g_peak.load() - before;
}
}  // namespace

TEST_CASE("compiling takes at most 1 KiB of heap per node at its peak, growing linearly") {
  for (bool fusion : {true, false}) {
    CAPTURE(fusion);
    const esg::Graph small = chain(20000), large = chain(40000);
    const size_t a = compile_peak(small, fusion), b = compile_peak(large, fusion);
    MESSAGE("fusion=" << fusion << ": " << a / 20000 << " bytes/node at 20k nodes, " << b / 40000 << " at 40k");
    CHECK(a <= 20000 * 1024);
    CHECK(b <= 40000 * 1024);
    CHECK(b <= a * 22 / 10);  // twice the nodes, at most 2.2x the memory
  }
}

TEST_CASE("control flow nested to the limit takes at most 2 KiB of heap per node, growing linearly") {
  const esg::Graph small = nested(100), large = nested(200);
  const size_t a = compile_peak(small, true), b = compile_peak(large, true);
  const size_t nodes = static_cast<size_t>(small.node_count());
  MESSAGE((a / nodes) << " bytes/node at " << nodes << " nodes, " << (b / (2 * nodes)) << " at " << (2 * nodes));
  CHECK(a <= nodes * 2048);
  CHECK(b <= a * 22 / 10);
}
