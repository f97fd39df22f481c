// GEMM candidates for the CPU backend, side by side on the shapes our models use: OpenBLAS and
// BLIS (their cblas_sgemm, each dlopen'ed so both can live in one process), oneDNN (dnnl_sgemm)
// and XNNPACK (a fully-connected operator, which is GEMM with a pre-packed weight). Single- and
// multi-threaded runs; GFLOP/s per shape. See bench/RESULTS.md for the figures and the choice.
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>
#include <xnnpack.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

// cblas_sgemm(order, transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)
using Sgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
constexpr int kRowMajor = 101, kNoTrans = 111;

Sgemm load_cblas(const char* lib) {
  void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) return nullptr;
  return reinterpret_cast<Sgemm>(dlsym(h, "cblas_sgemm"));
}

struct Problem {
  std::vector<float> a, b, c;
  int m, n, k;
  Problem(int m_, int n_, int k_) : a(static_cast<size_t>(m_) * k_), b(static_cast<size_t>(k_) * n_), c(static_cast<size_t>(m_) * n_), m(m_), n(n_), k(k_) {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> d(-1, 1);
    for (float& x : a) x = d(rng);
    for (float& x : b) x = d(rng);
  }
};

void report(benchmark::State& s, const Problem& p) {
  s.counters["GFLOP/s"] = benchmark::Counter(2.0 * p.m * p.n * p.k * static_cast<double>(s.iterations()), benchmark::Counter::kIsRate,
                                             benchmark::Counter::kIs1000);
}

void BM_Cblas(benchmark::State& s, const char* lib, int m, int n, int k) {
  const Sgemm gemm = load_cblas(lib);
  if (!gemm) {
    s.SkipWithError("library not found");
    return;
  }
  Problem p(m, n, k);
  for (auto _ : s) gemm(kRowMajor, kNoTrans, kNoTrans, m, n, k, 1.0f, p.a.data(), k, p.b.data(), n, 0.0f, p.c.data(), n);
  report(s, p);
}

void BM_Dnnl(benchmark::State& s, int m, int n, int k) {
  Problem p(m, n, k);
  for (auto _ : s) dnnl_sgemm('N', 'N', m, n, k, 1.0f, p.a.data(), k, p.b.data(), n, 0.0f, p.c.data(), n);
  report(s, p);
}

void BM_Xnnpack(benchmark::State& s, int m, int n, int k) {
  static const bool ready = xnn_initialize(nullptr) == xnn_status_success;
  Problem p(m, n, k);
  // XNNPACK's fully connected layer takes the weight as [n, k] (output channels first).
  std::vector<float> w(static_cast<size_t>(n) * k);
  for (int i = 0; i < k; ++i)
    for (int j = 0; j < n; ++j) w[static_cast<size_t>(j) * k + i] = p.b[static_cast<size_t>(i) * n + j];
  xnn_operator_t op = nullptr;
  if (!ready || xnn_create_fully_connected_nc_f32(k, n, k, n, w.data(), nullptr, -INFINITY, INFINITY, 0, &op) != xnn_status_success ||
      xnn_setup_fully_connected_nc_f32(op, m, p.a.data(), p.c.data(), nullptr) != xnn_status_success) {
    s.SkipWithError("XNNPACK setup failed");
    return;
  }
  for (auto _ : s) xnn_run_operator(op, nullptr);
  xnn_delete_operator(op);
  report(s, p);
}

// Transformer layer (batch 8 x seq 128, width 512, ffn 2048), one attention head's scores
// (128x64 by 64x128), and an MLP layer (batch 8, 784 -> 256).
const int kShapes[][3] = {{1024, 512, 512}, {1024, 2048, 512}, {1024, 512, 2048}, {128, 128, 64}, {8, 256, 784}};

void register_all() {
  for (const auto& sh : kShapes) {
    const std::string tag = "/" + std::to_string(sh[0]) + "x" + std::to_string(sh[1]) + "x" + std::to_string(sh[2]);
    benchmark::RegisterBenchmark(("openblas" + tag).c_str(), BM_Cblas, "libopenblas.so.0", sh[0], sh[1], sh[2]);
    benchmark::RegisterBenchmark(("blis" + tag).c_str(), BM_Cblas, "libblis.so.4", sh[0], sh[1], sh[2]);
    benchmark::RegisterBenchmark(("onednn" + tag).c_str(), BM_Dnnl, sh[0], sh[1], sh[2]);
    benchmark::RegisterBenchmark(("xnnpack" + tag).c_str(), BM_Xnnpack, sh[0], sh[1], sh[2]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
