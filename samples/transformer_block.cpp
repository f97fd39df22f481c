// A transformer encoder block (multi-head self-attention, residuals, layer norm, GELU
// feed-forward) written as C++ expressions. Every tensor knows its shape as it is written;
// the batch size stays symbolic. Prints a summary of the graph, saves it, then compiles it for
// a batch of 2 and runs it on the host CPU.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>

#include <esgraph/esgraph.hpp>

using esg::Tensor;

namespace {

struct Dims {
  int64_t seq = 128, model = 512, heads = 8, ff = 2048;
};

// Weights as constants with small random values (a real model would load them).
Tensor weight(esg::GraphBuilder& b, std::mt19937& rng, std::vector<int64_t> shape, const char* name) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> values(n);
  for (float& v : values) v = dist(rng);
  return b.constant(values, shape).set_name(name);
}

Tensor split_heads(const Tensor& t, const Dims& d) {
  // [B, S, D] -> [B, H, S, D/H]
  return esg::transpose(esg::reshape(t, {0, 0, d.heads, d.model / d.heads}),
                        esg::TransposeOptions().perm({0, 2, 1, 3}));
}

Tensor attention(esg::GraphBuilder& b, std::mt19937& rng, const Tensor& x, const Dims& d) {
  auto scope = b.name_scope("attention");
  const Tensor q = split_heads(esg::matmul(x, weight(b, rng, {d.model, d.model}, "wq")), d);
  const Tensor k = split_heads(esg::matmul(x, weight(b, rng, {d.model, d.model}, "wk")), d);
  const Tensor v = split_heads(esg::matmul(x, weight(b, rng, {d.model, d.model}, "wv")), d);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d.model / d.heads));
  const Tensor probs = esg::softmax(esg::matmul(q, k, esg::MatmulOptions().transpose_b(true)) * scale);
  const Tensor ctx = esg::transpose(esg::matmul(probs, v), esg::TransposeOptions().perm({0, 2, 1, 3}));
  return esg::matmul(esg::reshape(ctx, {0, 0, d.model}), weight(b, rng, {d.model, d.model}, "wo"));
}

Tensor feed_forward(esg::GraphBuilder& b, std::mt19937& rng, const Tensor& x, const Dims& d) {
  auto scope = b.name_scope("ffn");
  const Tensor h = esg::gelu(esg::matmul(x, weight(b, rng, {d.model, d.ff}, "w1")) + weight(b, rng, {d.ff}, "b1"));
  return esg::matmul(h, weight(b, rng, {d.ff, d.model}, "w2")) + weight(b, rng, {d.model}, "b2");
}

Tensor layer_norm(esg::GraphBuilder& b, std::mt19937& rng, const Tensor& x, const Dims& d, const char* name) {
  auto scope = b.name_scope(name);
  std::vector<float> ones(static_cast<size_t>(d.model), 1.0f);
  return esg::layer_norm(x, esg::LayerNormOptions()
                                .scale(b.constant(ones, {d.model}))
                                .bias(weight(b, rng, {d.model}, "beta")));
}

}  // namespace

int main(int argc, char** argv) {
  const Dims d;
  std::mt19937 rng(0);
  esg::GraphBuilder b("encoder_block");
  const Tensor x = b.input("x", esg::f32, {b.symbol("batch"), d.seq, d.model});
  const Tensor h = layer_norm(b, rng, x + attention(b, rng, x, d), d, "norm1");
  const Tensor y = layer_norm(b, rng, h + feed_forward(b, rng, h, d), d, "norm2").set_name("y");
  std::printf("output %s: %s[%s,%s,%s]\n", y.name().c_str(), esg::dtype_name(y.dtype()), y.dim_name(0).c_str(),
              y.dim_name(1).c_str(), y.dim_name(2).c_str());

  const esg::Graph g = b.build({y});
  g.verify();
  const std::string text = g.to_text();
  // Summary: node count and how often each op occurs.
  std::map<std::string, int> ops;
  for (size_t at = text.find(" = "); at != std::string::npos; at = text.find(" = ", at + 3)) {
    const size_t end = text.find('(', at);
    ops[text.substr(at + 3, end - at - 3)]++;
  }
  std::printf("graph %s: %zu nodes\n", "encoder_block", g.node_count());
  for (const auto& [op, n] : ops) std::printf("  %-12s %d\n", op.c_str(), n);
  const std::string path = argc > 1 ? argv[1] : "encoder_block.esg";
  g.save(path);
  std::printf("saved to %s (%zu bytes); `esg::Graph::load` reads it back\n", path.c_str(), g.serialize().size());
  // Compile for a batch of 2 and run it on the host CPU.
  const auto t0 = std::chrono::steady_clock::now();
  const esg::Model model = esg::compile(g, esg::CompileOptions().symbol("batch", 2));
  const auto t1 = std::chrono::steady_clock::now();
  std::vector<float> xs(2 * static_cast<size_t>(d.seq * d.model));
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(std::sin(0.01 * static_cast<double>(i)));
  const std::vector<esg::HostTensor> inputs{esg::HostTensor::from(esg::f32, xs, {2, d.seq, d.model})};
  model.run(inputs);  // the first run sets up the arena
  const auto t2 = std::chrono::steady_clock::now();
  const std::vector<float> ys = model.run(inputs)[0].values<float>();
  const auto t3 = std::chrono::steady_clock::now();
  double mean = 0, sq = 0;
  for (float v : ys) mean += v, sq += static_cast<double>(v) * v;
  mean /= static_cast<double>(ys.size());
  std::printf("\ncompiled for batch 2 in %.1f ms, ran in %.1f ms; y: mean %.4f, std %.4f (layer norm's output)\n",
              std::chrono::duration<double, std::milli>(t1 - t0).count(), std::chrono::duration<double, std::milli>(t3 - t2).count(),
              mean, std::sqrt(sq / static_cast<double>(ys.size()) - mean * mean));
  const esg::Facts facts = model.facts();
  std::printf("%lld launches (%lld fused groups of %lld ops), arena %lld bytes (lower bound %lld)\n",
              static_cast<long long>(facts.number("launches")), static_cast<long long>(facts.number("fused_groups")),
              static_cast<long long>(facts.number("fused_ops")), static_cast<long long>(facts.number("arena_bytes")),
              static_cast<long long>(facts.number("lower_bound_bytes")));
  std::printf("\nfirst lines of the graph:\n");
  size_t line_end = 0;
  for (int i = 0; i < 12 && line_end != std::string::npos; ++i) {
    const size_t next = text.find('\n', line_end);
    std::printf("%s\n", text.substr(line_end, next - line_end).c_str());
    line_end = next == std::string::npos ? next : next + 1;
  }
  return 0;
}
