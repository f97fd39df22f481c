// Graph-building throughput: nodes per second with shape inference on, through the C ABI and
// the C++ DSL. Each iteration builds a fresh graph of `n` nodes and destroys it.
#include <benchmark/benchmark.h>

#include <esgraph/esgraph.hpp>

namespace {

// A chain of small elementwise and broadcasting ops on [batch, 64] — the common case.
void BM_BuildChainC(benchmark::State& state) {
  const int64_t n = state.range(0);
  for (auto _ : state) {
    esg_builder* b = esg_builder_create("chain");
    const int64_t dims[2] = {esg_symbol(b, "batch"), 64};
    const int64_t bias_dims[1] = {64};
    esg_tensor x = esg_input(b, "x", ESG_F32, dims, 2);
    const esg_tensor bias = esg_input(b, "bias", ESG_F32, bias_dims, 1);
    for (int64_t i = 0; i < n; i += 4) {
      x = esg_add(x, bias, nullptr);
      x = esg_mul(x, bias, nullptr);
      x = esg_relu(x, nullptr);
      x = esg_sigmoid(x, nullptr);
    }
    esg_graph* g = esg_builder_build(b, &x, 1);
    benchmark::DoNotOptimize(g);
    esg_graph_destroy(g);
    esg_builder_destroy(b);
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["nodes/s"] = benchmark::Counter(static_cast<double>(state.iterations() * n), benchmark::Counter::kIsRate);
}

void BM_BuildChainCpp(benchmark::State& state) {
  const int64_t n = state.range(0);
  for (auto _ : state) {
    esg::GraphBuilder b("chain");
    esg::Tensor x = b.input("x", esg::f32, {b.symbol("batch"), 64});
    const esg::Tensor bias = b.input("bias", esg::f32, {64});
    for (int64_t i = 0; i < n; i += 4) x = esg::sigmoid(esg::relu((x + bias) * bias));
    esg::Graph g = b.build({x});
    benchmark::DoNotOptimize(g.handle());
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["nodes/s"] = benchmark::Counter(static_cast<double>(state.iterations() * n), benchmark::Counter::kIsRate);
}

// Transformer encoder blocks (weights as inputs): matmul, reshape, transpose, softmax,
// layer_norm, gelu — the heavier inference rules.
void BM_BuildEncoderCpp(benchmark::State& state) {
  const int64_t layers = state.range(0);
  int64_t nodes = 0;
  for (auto _ : state) {
    esg::GraphBuilder b("encoder");
    const int64_t d = 512, h = 8;
    esg::Tensor x = b.input("x", esg::f32, {b.symbol("batch"), 128, d});
    const esg::Tensor w = b.input("w", esg::f32, {d, d});
    const esg::Tensor w1 = b.input("w1", esg::f32, {d, 4 * d});
    const esg::Tensor w2 = b.input("w2", esg::f32, {4 * d, d});
    const esg::TransposeOptions perm = esg::TransposeOptions().perm({0, 2, 1, 3});
    for (int64_t l = 0; l < layers; ++l) {
      auto heads = [&](const esg::Tensor& t) { return esg::transpose(esg::reshape(t, {0, 0, h, d / h}), perm); };
      const esg::Tensor q = heads(esg::matmul(x, w)), k = heads(esg::matmul(x, w)), v = heads(esg::matmul(x, w));
      const esg::Tensor p = esg::softmax(esg::matmul(q, k, esg::MatmulOptions().transpose_b(true)) * 0.125);
      const esg::Tensor a = esg::matmul(esg::reshape(esg::transpose(esg::matmul(p, v), perm), {0, 0, d}), w);
      x = esg::layer_norm(x + a);
      x = esg::layer_norm(x + esg::matmul(esg::gelu(esg::matmul(x, w1)), w2));
    }
    esg::Graph g = b.build({x});
    nodes = static_cast<int64_t>(g.node_count());
  }
  state.counters["nodes/s"] = benchmark::Counter(static_cast<double>(state.iterations() * nodes), benchmark::Counter::kIsRate);
}

// Compile time (specialize, passes, fusion, order, streams, memory plan, launch list) of a chain
// with a softmax every 64 ops, so fusion has groups to find and break.
void BM_CompileChain(benchmark::State& state) {
  const int64_t n = state.range(0);
  esg::GraphBuilder b("chain");
  esg::Tensor x = b.input("x", esg::f32, {4, 64});
  const esg::Tensor bias = b.input("bias", esg::f32, {64});
  for (int64_t i = 0; i < n; i += 4) {
    x = esg::sigmoid(esg::relu((x + bias) * bias));
    if (i % 64 == 0) x = esg::softmax(x);
  }
  const esg::Graph g = b.build({x});
  for (auto _ : state) {
    esg::Model m = esg::compile(g);
    benchmark::DoNotOptimize(m.handle());
  }
  state.counters["nodes"] = static_cast<double>(g.node_count());
  state.counters["nodes/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * static_cast<double>(g.node_count()),
                                                 benchmark::Counter::kIsRate);
}

}  // namespace

BENCHMARK(BM_CompileChain)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BuildChainC)->Arg(1000)->Arg(10000)->Arg(100000);
BENCHMARK(BM_BuildChainCpp)->Arg(1000)->Arg(10000)->Arg(100000);
BENCHMARK(BM_BuildEncoderCpp)->Arg(12)->Arg(96);
BENCHMARK_MAIN();
