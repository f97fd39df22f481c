// relu(x·2 - 1) on [-1, 0, 1, 2], compiled and run through the installed C++ API.
#include <cstdio>
#include <vector>

#include <esgraph/esgraph.hpp>

int main() {
  esg::GraphBuilder b("consumer");
  const esg::Tensor x = b.input("x", esg::f32, {4});
  const esg::Model model = esg::compile(b.build({esg::relu(x * 2.0f - 1.0f)}));
  const std::vector<float> got = model.run({esg::HostTensor::from(esg::f32, std::vector<float>{-1, 0, 1, 2}, {4})})[0].values<float>();
  if (got != std::vector<float>{0, 0, 1, 3}) {
    std::fprintf(stderr, "consumer (C++): wrong values\n");
    return 1;
  }
  std::printf("consumer (C++, find_package): ok\n");
  return 0;
}
