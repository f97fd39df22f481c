// Prepared runs (Model::prepare) through the C++ API: the same results as Model::run on the
// same buffers, whatever the plan cache drops meanwhile; bad buffers refused when prepared.
#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include <esgraph/esgraph.hpp>

using esg::HostTensor;
using esg::Tensor;

namespace {

// y = relu(x @ w + b) with small integers, so the expected values are exact.
esg::Graph mlp() {
  esg::GraphBuilder b("mlp");
  const Tensor x = b.input("x", esg::f32, {b.symbol("batch"), 3});
  const Tensor w = b.constant({1, 0, 0, 1, 1, -1}, {3, 2});
  const Tensor bias = b.constant({0.5f, -10.0f}, {2});
  return b.build({esg::relu(esg::matmul(x, w) + bias)});
}

}  // namespace

TEST_CASE("a prepared run computes what the math says, reading its buffers' bytes at each run") {
  const esg::Model m = esg::compile(mlp());
  std::vector<HostTensor> in{HostTensor::from(esg::f32, std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3})};
  std::vector<HostTensor> out{HostTensor(esg::f32, {2, 2})};
  esg::PreparedRun p = m.prepare(in, out);
  p.run();
  // x@w = [[4,-1],[10,-1]]; + b = [[4.5,-11],[10.5,-11]]; relu.
  CHECK(out[0].values<float>() == std::vector<float>{4.5f, 0, 10.5f, 0});
  in[0].data<float>()[0] = 21;  // [21,2,3]@w = [24,-1]
  p.run();
  CHECK(out[0].values<float>() == std::vector<float>{24.5f, 0, 10.5f, 0});
}

TEST_CASE("a prepared run keeps its plan when the cache drops it, and runs beside plain runs of other sizes") {
  const esg::Model m = esg::compile(mlp(), esg::CompileOptions().max_plans(1));
  std::vector<HostTensor> in{HostTensor::from(esg::f32, std::vector<float>{1, 1, 1}, {1, 3})};
  std::vector<HostTensor> out{HostTensor(esg::f32, {1, 2})};
  esg::PreparedRun p = m.prepare(in, out);
  for (int64_t batch = 2; batch < 40; batch += 5) {  // each size its own binding: batch 1's is dropped
    const std::vector<float> ones(static_cast<size_t>(batch) * 3, 1.0f);
    CHECK(m.run({HostTensor::from(esg::f32, ones, {batch, 3})})[0].values<float>()[0] == 2.5f);
    p.run();
    CHECK(out[0].values<float>() == std::vector<float>{2.5f, 0});
  }
  CHECK(m.facts().number("plans_kept") == 1);  // batch 1's binding long dropped
  CHECK(m.facts().number("max_plans") == 1);
}

TEST_CASE("prepare refuses what run refuses, naming the call") {
  const esg::Model m = esg::compile(mlp());
  std::vector<HostTensor> in{HostTensor(esg::f32, {2, 3})}, wrong_in{HostTensor(esg::f32, {2, 4})};
  std::vector<HostTensor> out{HostTensor(esg::f32, {2, 2})}, wrong_out{HostTensor(esg::f32, {3, 2})}, typed_out{HostTensor(esg::i32, {2, 2})};
  std::vector<HostTensor> none;
  CHECK_THROWS_WITH_AS(m.prepare(wrong_in, out), doctest::Contains("prepare: input 0"), esg::ShapeError);
  CHECK_THROWS_WITH_AS(m.prepare(in, wrong_out), doctest::Contains("prepare: output 0"), esg::ShapeError);
  CHECK_THROWS_WITH_AS(m.prepare(in, typed_out), doctest::Contains("prepare: output 0"), esg::DTypeError);
  CHECK_THROWS_WITH_AS(m.prepare(in, none), doctest::Contains("prepare: the model gives 1 output(s), got 0"), esg::InvalidArgumentError);
}

TEST_CASE("a model whose output sizes the data decides prepares too; a run that outgrows its buffer fails") {
  esg::GraphBuilder b("positives");
  const Tensor x = b.input("x", esg::f32, {4});
  const esg::Model m = esg::compile(b.build({esg::nonzero(esg::greater(x, b.constant({0.0f}, {})))}));
  std::vector<HostTensor> in{HostTensor::from(esg::f32, std::vector<float>{-1, 3, 0, 4}, {4})};
  std::vector<HostTensor> out{HostTensor(esg::i64, {1, 2})};
  esg::PreparedRun p = m.prepare(in, out);
  p.run();
  CHECK(out[0].values<int64_t>() == std::vector<int64_t>{1, 3});
  in[0].data<float>()[0] = 7;  // three positives now: the buffer holds two
  CHECK_THROWS_WITH_AS(p.run(), doctest::Contains("came to [1,3] but its buffer is [1,2]"), esg::ShapeError);
}

TEST_CASE("Model::cancel stops a prepared run under way") {
  esg::GraphBuilder b("count");
  const Tensor n = b.input("n", esg::i64, {});
  const int64_t zero = 0;
  const auto outs = esg::while_({b.constant(esg::i64, {}, &zero, sizeof zero)}, [&](const std::vector<Tensor>& v) { return v[0] < n; },
                                [&](const std::vector<Tensor>& v) { return v[0] + 1; });
  const esg::Model m = esg::compile(b.build(outs), esg::CompileOptions().max_loop_iterations(0));
  std::vector<HostTensor> in{HostTensor::from(esg::i64, std::vector<int64_t>{int64_t{1} << 62}, {})};
  std::vector<HostTensor> out{HostTensor(esg::i64, {})};
  esg::PreparedRun p = m.prepare(in, out);
  std::atomic<bool> done{false};
  bool cancelled = false;
  std::string other;  // any other failure, reported below rather than ending the process
  std::thread run([&] {
    try {
      p.run();
    } catch (const esg::CancelledError&) {
      cancelled = true;
    } catch (const std::exception& e) {
      other = e.what();
    }
    done = true;
  });
  while (!done) {  // a cancel before the run began would miss it: repeat until it ends
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    m.cancel();
  }
  run.join();
  CHECK(other == "");
  CHECK(cancelled);
  in[0].data<int64_t>()[0] = 3;
  p.run();
  CHECK(out[0].values<int64_t>() == std::vector<int64_t>{3});
}

TEST_CASE("an output that is also an input is refused by run and prepare, not computed wrong") {
  esg::GraphBuilder b("square");
  const Tensor x = b.input("x", esg::f32, {2, 2});
  const esg::Model m = esg::compile(b.build({esg::matmul(x, x)}));
  std::vector<HostTensor> in{HostTensor::from(esg::f32, std::vector<float>{1, 2, 3, 4}, {2, 2})};
  CHECK_THROWS_WITH_AS(m.run(in, in), doctest::Contains("output 0 shares memory with input 0"), esg::InvalidArgumentError);
  CHECK_THROWS_AS((void)m.prepare(in, in), esg::InvalidArgumentError);
  CHECK(in[0].values<float>() == std::vector<float>{1, 2, 3, 4});  // nothing ran
  std::vector<HostTensor> out{HostTensor(esg::f32, {2, 2})};
  m.run(in, out);
  CHECK(out[0].values<float>() == std::vector<float>{7, 10, 15, 22});
}
