// An MLP as C++ expressions: two hidden layers with ReLU, softmax on top.
#include <cstdio>

#include <esgraph/esgraph.hpp>

int main() {
  esg::GraphBuilder b("mlp");
  const esg::Tensor x = b.input("x", esg::f32, {b.symbol("batch"), 784});
  auto dense = [&](const esg::Tensor& in, int64_t n, const char* name) {
    const int64_t k = in.dim(in.rank() - 1);
    auto scope = b.name_scope(name);
    const esg::Tensor w = b.input(std::string(name) + ".w", esg::f32, {k, n});
    const esg::Tensor bias = b.input(std::string(name) + ".b", esg::f32, {n});
    return esg::matmul(in, w) + bias;
  };
  const esg::Tensor h1 = esg::relu(dense(x, 256, "fc1"));
  const esg::Tensor h2 = esg::relu(dense(h1, 128, "fc2"));
  const esg::Tensor y = esg::softmax(dense(h2, 10, "fc3"));
  std::printf("y: [%s, %s]\n", y.dim_name(0).c_str(), y.dim_name(1).c_str());
  std::printf("%s", b.build({y}).to_text().c_str());
  return 0;
}
