// A two-layer MLP split over the ranks of an MPI job, in C++: the first layer keeps this
// rank's columns, the second its rows, and one esg::all_reduce sums the parts. Started by
// mpirun, esgraph finds the world itself (no MPI in this program). Each rank prints the largest
// difference from the whole MLP on this rank.
//
//   mpirun -np 2 build/default/samples/tensor_parallel_cpp
#include <cmath>
#include <cstdio>
#include <vector>

#include "esgraph/esgraph.hpp"

namespace {

constexpr int64_t kRows = 4, kIn = 16, kHidden = 32, kOut = 8;

// The same weights on every rank, from the same formula: a [rows, cols] matrix, or its columns
// [first, first + count).
std::vector<float> matrix(int64_t rows, int64_t cols, int salt) {
  std::vector<float> m(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) m[static_cast<size_t>(i * cols + j)] = static_cast<float>(std::sin(0.37 * i + 0.11 * j + salt) * 0.2);
  return m;
}
std::vector<float> columns(const std::vector<float>& m, int64_t rows, int64_t cols, int64_t first, int64_t count) {
  std::vector<float> part;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = first; j < first + count; ++j) part.push_back(m[static_cast<size_t>(i * cols + j)]);
  return part;
}

}  // namespace

int main() {
  const esg::World world = esg::world();
  if (kHidden % world.size) {
    std::fprintf(stderr, "%lld hidden units do not split over %d ranks\n", static_cast<long long>(kHidden), world.size);
    return 1;
  }
  const int64_t part = kHidden / world.size, first = world.rank * part;
  const std::vector<float> x = matrix(kRows, kIn, 0), w1 = matrix(kIn, kHidden, 1), w2 = matrix(kHidden, kOut, 2);
  const std::vector<float> w1_part = columns(w1, kIn, kHidden, first, part);
  const std::vector<float> w2_part(w2.begin() + first * kOut, w2.begin() + (first + part) * kOut);  // its rows

  auto run = [&](bool split) {
    esg::GraphBuilder b(split ? "tensor_parallel_mlp" : "mlp");
    esg::Tensor in = b.input("x", esg::DType::F32, {kRows, kIn});
    esg::Tensor y;
    if (split) {
      esg::Tensor h = esg::relu(esg::matmul(in, b.constant(w1_part, {kIn, part})));
      y = esg::all_reduce(esg::matmul(h, b.constant(w2_part, {part, kOut})));
    } else {
      esg::Tensor h = esg::relu(esg::matmul(in, b.constant(w1, {kIn, kHidden})));
      y = esg::matmul(h, b.constant(w2, {kHidden, kOut}));
    }
    const esg::Model m = esg::compile(b.build({y}));
    return m.run({esg::HostTensor::from(esg::DType::F32, x, {kRows, kIn})}).at(0).values<float>();
  };
  const std::vector<float> got = run(true), want = run(false);
  double diff = 0;
  for (size_t i = 0; i < got.size(); ++i) diff = std::max(diff, static_cast<double>(std::fabs(got[i] - want[i])));
  std::printf("rank %d of %d: largest difference from the whole MLP %.2e\n", world.rank, world.size, diff);
  return diff > 1e-4;
}
