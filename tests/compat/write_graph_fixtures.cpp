// Writes the graph files a release keeps as fixtures (tests/compat/api-<N>/graphs): each graph
// as <name>.esg and its text dump as <name>.txt. Later versions must load every one of them.
#include <cstdio>
#include <fstream>
#include <string>

#include <esgraph/esgraph.hpp>

using esg::Tensor;

namespace {

void write(const esg::Graph& g, const std::string& dir, const std::string& name) {
  g.save(dir + "/" + name + ".esg");
  std::ofstream(dir + "/" + name + ".txt") << g.to_text();
  std::printf("wrote %s/%s.esg (%zu nodes)\n", dir.c_str(), name.c_str(), g.node_count());
}

esg::Graph mlp() {
  esg::GraphBuilder b("mlp");
  const Tensor x = b.input("x", esg::f32, {b.symbol("batch"), 16});
  std::vector<float> w(16 * 8), bias(8, 0.5f);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 7) * 0.1f - 0.3f;
  const Tensor h = esg::relu(esg::matmul(x, b.constant(w, {16, 8})) + b.constant(bias, {8}));
  return b.build({esg::softmax(h)});
}

esg::Graph attention() {
  esg::GraphBuilder b("attention");
  const Tensor x = b.input("x", esg::f32, {2, 8, 32});
  const Tensor w = b.input("w", esg::f32, {32, 32});
  auto scope = b.name_scope("attn");
  auto heads = [&](const Tensor& t) {
    return esg::transpose(esg::reshape(t, {0, 0, 4, 8}), esg::TransposeOptions().perm({0, 2, 1, 3}));
  };
  const Tensor q = heads(esg::matmul(x, w)), k = heads(esg::matmul(x, w));
  const Tensor p = esg::softmax(esg::matmul(q, k, esg::MatmulOptions().transpose_b(true)) * 0.35);
  const Tensor y = esg::layer_norm(x + esg::reshape(esg::transpose(esg::matmul(p, heads(x)),
                                                                   esg::TransposeOptions().perm({0, 2, 1, 3})),
                                                    {0, 0, 32}));
  return b.build({esg::gelu(y, esg::GeluOptions().approximate(esg::GeluApproximate::Tanh))});
}

esg::Graph control_flow() {
  esg::GraphBuilder b("control_flow");
  const Tensor x = b.input("x", esg::f32, {4});
  const Tensor flag = b.input("flag", esg::boolean, {});
  const Tensor n = b.input("n", esg::i64, {});
  const auto branch = esg::if_(flag, [&] { return esg::exp(x); }, [&] { return -x; });
  const auto loop = esg::while_(
      {n, branch[0]}, [&](const std::vector<Tensor>& v) { return v[0] > 0; },
      [&](const std::vector<Tensor>& v) { return std::vector<Tensor>{v[0] - 1, v[1] * 0.5}; });
  return b.build(loop);
}

esg::Graph shapes() {
  esg::GraphBuilder b("shapes");
  const Tensor x = b.input("x", esg::f32, {1, 3, 16, 16});
  const Tensor w = b.input("w", esg::f32, {8, 3, 3, 3});
  auto note = b.annotate("stream", "1");
  const Tensor c = esg::conv2d(x, w, esg::Conv2dOptions().pads({1, 1, 1, 1}).strides({2, 2}));
  const Tensor p = esg::max_pool2d(c, {2, 2}, esg::MaxPool2dOptions().strides({2, 2}));
  const auto parts = esg::split(esg::reshape(p, {1, -1}), {64, 64}, esg::SplitOptions().axis(1));
  const Tensor idx = esg::argmax(esg::concat({parts[1], parts[0]}, 1), esg::ArgmaxOptions().axis(1));
  return b.build({idx, esg::pad(parts[0], {0, 2, 0, 2}, esg::PadOptions().mode(esg::PadMode::Edge))});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <output folder>\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  write(mlp(), dir, "mlp");
  write(attention(), dir, "attention");
  write(control_flow(), dir, "control_flow");
  write(shapes(), dir, "shapes");
  return 0;
}
