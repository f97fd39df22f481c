// Per-kernel overhead of a compiled model: a chain of `n` tiny elementwise ops on [4] floats,
// compiled with fusion off so every op is its own launch. The work per kernel is a few
// nanoseconds, so run time / n is what the runtime itself costs per launch. The fused variant
// of the same graph is the floor: one launch for the whole chain.
#include <benchmark/benchmark.h>

#include <esgraph/esgraph.hpp>

namespace {

esg::Graph tiny_chain(int64_t n) {
  esg::GraphBuilder b("tiny_chain");
  esg::Tensor x = b.input("x", esg::f32, {4});
  const esg::Tensor bias = b.input("bias", esg::f32, {4});
  for (int64_t i = 0; i < n; i += 4) x = esg::sigmoid(esg::relu((x + bias) * bias));
  return b.build({x});
}

void run_chain(benchmark::State& state, bool fusion) {
  const int64_t n = state.range(0);
  const esg::Model model = esg::compile(tiny_chain(n), esg::CompileOptions().fusion(fusion));
  const std::vector<esg::HostTensor> inputs = {
      esg::HostTensor::from(esg::f32, std::vector<float>{0.1f, -0.2f, 0.3f, -0.4f}, {4}),
      esg::HostTensor::from(esg::f32, std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f}, {4})};
  std::vector<esg::HostTensor> outputs = model.allocate_outputs(inputs);
  model.run(inputs, outputs);  // the first run sets up the arena
  for (auto _ : state) model.run(inputs, outputs);
  state.counters["time_per_op"] = benchmark::Counter(static_cast<double>(state.iterations() * n),
                                               benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_TinyChainUnfused(benchmark::State& state) { run_chain(state, false); }
void BM_TinyChainFused(benchmark::State& state) { run_chain(state, true); }

}  // namespace

BENCHMARK(BM_TinyChainUnfused)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TinyChainFused)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
