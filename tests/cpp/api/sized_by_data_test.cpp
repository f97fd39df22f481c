// Ops whose output sizes the data decides (nonzero, unique, non_max_suppression), through the C++
// API: outputs at the sizes a run comes to, the stages a model runs in, what is refused.
#include <doctest/doctest.h>

#include <thread>

#include <esgraph/esgraph.hpp>

using esg::HostTensor;
using esg::Tensor;
using Dims = std::vector<int64_t>;

namespace {

// The positions of x's positive elements, each doubled, and how many there are: ops before the
// nonzero (a comparison), after it (a gather of x, a product), and a constant on both sides.
esg::Graph positives() {
  esg::GraphBuilder b("positives");
  const Tensor x = b.input("x", esg::f32, {b.symbol("n")});
  const Tensor two = b.constant({2.0f}, {});
  const Tensor where = esg::nonzero(esg::greater(x * two, b.constant({0.0f}, {})));
  const Tensor picked = esg::gather(x, esg::squeeze(where, esg::SqueezeOptions().axes({0}))) * two;
  return b.build({picked, esg::reduce_sum(esg::cast(where, esg::f32))});
}

}  // namespace

TEST_CASE("a model whose output sizes the data decides runs in stages and allocates its outputs") {
  const esg::Model m = esg::compile(positives());
  const std::vector<HostTensor> out = m.run({HostTensor::from(esg::f32, std::vector<float>{-1, 3, 0, 4, -2, 5}, {6})});
  REQUIRE(out.size() == 2);
  CHECK(out[0].shape() == Dims{3});
  CHECK(out[0].values<float>() == std::vector<float>{6, 8, 10});
  CHECK(out[1].values<float>() == std::vector<float>{1 + 3 + 5});
  const esg_model_stats s = m.stats();
  CHECK(s.stages == 2);
  CHECK(s.sized_ops == 1);
  const std::vector<esg::Facts> stages = m.facts().rows("stage_list");
  REQUIRE(stages.size() == 2);
  REQUIRE(stages[0].rows("then_run").size() == 1);
  CHECK(stages[0].rows("then_run")[0].text("op") == "nonzero");
  // The output's shape is not known before a run: allocate_outputs says so.
  CHECK_THROWS_AS(m.allocate_outputs({HostTensor(esg::f32, {6})}), esg::InvalidArgumentError);
  // No element passes: the count is 0 and what follows runs on empty tensors.
  const std::vector<HostTensor> none = m.run({HostTensor::from(esg::f32, std::vector<float>{-1, -2}, {2})});
  CHECK(none[0].shape() == Dims{0});
  CHECK(none[1].values<float>() == std::vector<float>{0});
}

TEST_CASE("the stage after a sized op binds one symbolic plan per size class of its count") {
  const esg::Model m = esg::compile(positives());
  for (int64_t n = 1; n <= 64; ++n) {
    std::vector<float> x(64, -1.0f);
    for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i * 64 / n)] = 1.0f;
    CHECK(m.run({HostTensor::from(esg::f32, x, {64})})[0].shape() == Dims{n});
  }
  // Counts 1..64 fall in 7 power-of-two classes; each new count binds a class's plan.
  const esg_model_stats s = m.stats();
  CHECK(s.plans <= 8);
  CHECK(s.bindings >= 56);
}

TEST_CASE("runs of a staged model from several threads each get their own sizes") {
  const esg::Model m = esg::compile(positives());
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < 25; ++r) {
        const int64_t n = 1 + (t * 25 + r) % 17;
        std::vector<float> x(static_cast<size_t>(n), 1.0f);
        const std::vector<HostTensor> out = m.run({HostTensor::from(esg::f32, x, {n})});
        if (out[0].shape() != Dims{n} || out[1].values<float>()[0] != static_cast<float>(n * (n - 1) / 2)) ++wrong[static_cast<size_t>(t)];
      }
    });
  for (std::thread& th : threads) th.join();
  CHECK(wrong == std::vector<int>(4, 0));
}

TEST_CASE("unique and non_max_suppression give every output at its size") {
  esg::GraphBuilder b;
  const Tensor x = b.input("x", esg::i32, {6});
  const std::vector<Tensor> u = esg::unique(x, esg::UniqueOptions().sorted(false));
  const Tensor boxes = b.input("boxes", esg::f32, {1, 3, 4});
  const Tensor scores = b.input("scores", esg::f32, {1, 1, 3});
  const Tensor kept = esg::non_max_suppression(boxes, scores, 3, esg::NonMaxSuppressionOptions().iou_threshold(0.5));
  std::vector<Tensor> outs = u;
  outs.push_back(kept);
  const esg::Model m = esg::compile(b.build(outs));
  const std::vector<HostTensor> r =
      m.run({HostTensor::from(esg::i32, std::vector<int32_t>{5, 1, 5, 2, 1, 5}, {6}),
             HostTensor::from(esg::f32, std::vector<float>{0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 10, 1, 11}, {1, 3, 4}),
             HostTensor::from(esg::f32, std::vector<float>{0.9f, 0.95f, 0.3f}, {1, 1, 3})});
  CHECK(r[0].values<int32_t>() == std::vector<int32_t>{5, 1, 2});
  CHECK(r[1].values<int64_t>() == std::vector<int64_t>{0, 1, 3});
  CHECK(r[2].values<int64_t>() == std::vector<int64_t>{0, 1, 0, 2, 1, 0});
  CHECK(r[3].values<int64_t>() == std::vector<int64_t>{3, 2, 1});
  CHECK(r[4].shape() == Dims{2, 3});
  CHECK(r[4].values<int64_t>() == std::vector<int64_t>{0, 0, 1, 0, 0, 2});
}

TEST_CASE("sized ops: what is refused") {
  {  // unique of a scalar, non_max_suppression of mismatched boxes: at the call
    esg::GraphBuilder b;
    CHECK_THROWS_AS(esg::unique(b.input("s", esg::f32, {})), esg::ShapeError);
    CHECK_THROWS_AS(esg::non_max_suppression(b.input("b", esg::f32, {1, 3, 4}), b.input("s1", esg::f32, {1, 1, 4}), 1), esg::ShapeError);
    CHECK_THROWS_AS(esg::non_max_suppression(b.input("b2", esg::f32, {1, 3, 5}), b.input("s2", esg::f32, {1, 1, 3}), 1), esg::ShapeError);
    CHECK_THROWS_AS(esg::non_max_suppression(b.input("b3", esg::f32, {1, 3, 4}), b.input("s3", esg::f32, {1, 1, 3}), 1,
                                             esg::NonMaxSuppressionOptions().iou_threshold(1.5)),
                    esg::AttributeError);
  }
  {  // a nonzero inside a loop's body: a body runs with its sizes fixed before it starts
    esg::GraphBuilder b;
    const Tensor x = b.input("x", esg::f32, {4});
    const Tensor i0 = b.input("i", esg::i64, {});
    const auto outs = esg::while_({i0}, [&](const std::vector<Tensor>& v) { return v[0] < 3; },
                                  [&](const std::vector<Tensor>& v) { return std::vector<Tensor>{v[0] + esg::reduce_sum(esg::nonzero(x))}; });
    CHECK_THROWS_AS(esg::compile(b.build(outs)), esg::UnsupportedError);
  }
}

TEST_CASE("a staged run's loops count against one cap") {
  // A loop of n iterations before the nonzero and another after it: 2n in all.
  esg::GraphBuilder b;
  const Tensor x = b.input("x", esg::f32, {4});
  const Tensor n = b.input("n", esg::i64, {});
  auto count_from = [&](const Tensor& start) {
    return esg::while_({start}, [&](const std::vector<Tensor>& v) { return v[0] < n; },
                       [&](const std::vector<Tensor>& v) { return std::vector<Tensor>{v[0] + 1}; })[0];
  };
  const Tensor found = esg::reduce_sum(esg::nonzero(x));
  const esg::Graph g = b.build({count_from(n - n), count_from(found - found)});
  const std::vector<HostTensor> in = {HostTensor::from(esg::f32, std::vector<float>{1, 0, 1, 0}, {4}),
                                      HostTensor::from(esg::i64, std::vector<int64_t>{600}, {})};
  CHECK(esg::compile(g, esg::CompileOptions().max_loop_iterations(1300)).run(in)[1].values<int64_t>() == std::vector<int64_t>{600});
  CHECK_THROWS_AS(esg::compile(g, esg::CompileOptions().max_loop_iterations(1000)).run(in), esg::LimitError);
}

TEST_CASE("reshape_to takes its shape as a tensor, read and checked as the run goes") {
  esg::GraphBuilder b;
  const Tensor x = b.input("x", esg::f32, {6});
  const Tensor rows = b.input("rows", esg::i64, {});
  // [rows, -1], computed from an input.
  const int64_t minus_one = -1;
  const Tensor shape = esg::concat({esg::reshape(rows, {1}), b.constant(esg::i64, {1}, &minus_one, sizeof minus_one)}, 0);
  const esg::Model m = esg::compile(b.build({esg::reshape_to(x, shape)}));
  const HostTensor xs = HostTensor::from(esg::f32, std::vector<float>{1, 2, 3, 4, 5, 6}, {6});
  CHECK(m.run({xs, HostTensor::from(esg::i64, std::vector<int64_t>{3}, {})})[0].shape() == Dims{3, 2});
  CHECK(m.run({xs, HostTensor::from(esg::i64, std::vector<int64_t>{6}, {})})[0].shape() == Dims{6, 1});
  CHECK_THROWS_AS(m.run({xs, HostTensor::from(esg::i64, std::vector<int64_t>{4}, {})}), esg::ShapeError);  // 6 elements in rows of 4
  CHECK(m.run({xs, HostTensor::from(esg::i64, std::vector<int64_t>{2}, {})})[0].values<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("max_memory_bytes caps a shape read from data, and a stage's plan, at run time") {
  esg::GraphBuilder b;
  const Tensor shape = b.input("shape", esg::i64, {2});
  const Tensor x = b.input("x", esg::f32, {4});
  // fill_to's size is the data's; the stage after nonzero is planned for the count it finds.
  const esg::Model m = esg::compile(b.build({esg::fill_to(shape), esg::expand_to(esg::reshape(esg::nonzero(x), {-1, 1}), shape)}),
                                    esg::CompileOptions().max_memory_bytes(1 << 20));
  const HostTensor ones = HostTensor::from(esg::f32, std::vector<float>{1, 0, 1, 1}, {4});
  CHECK_THROWS_WITH_AS(m.run({HostTensor::from(esg::i64, std::vector<int64_t>{1 << 20, 1 << 10}, {2}), ones}),
                       doctest::Contains("`fill_to` would allocate 4294967296 bytes"), esg::LimitError);
  const std::vector<HostTensor> out = m.run({HostTensor::from(esg::i64, std::vector<int64_t>{3, 2}, {2}), ones});
  CHECK(out[0].shape() == Dims{3, 2});
  CHECK(out[1].values<int64_t>() == std::vector<int64_t>{0, 0, 2, 2, 3, 3});
  esg::GraphBuilder b2;
  const esg::Graph fill = b2.build({esg::fill_to(b2.input("shape", esg::i64, {2}))});
  CHECK_THROWS_AS(esg::compile(fill, esg::CompileOptions().max_memory_bytes(-1)), esg::InvalidArgumentError);
}

TEST_CASE("slice_to and top_k_to read their operands as the run goes, checked as slice and top_k check them") {
  esg::GraphBuilder b;
  const Tensor x = b.input("x", esg::f32, {2, 4});
  const Tensor from = b.input("from", esg::i64, {1});
  // x[:, from:4:2] and the top k of x's rows, k = from + 1.
  const int64_t four = 4, two = 2, axis = 1;
  const Tensor four_t = b.constant(esg::i64, {1}, &four, sizeof four), two_t = b.constant(esg::i64, {1}, &two, sizeof two);
  const Tensor axis_t = b.constant(esg::i64, {1}, &axis, sizeof axis);
  const Tensor sliced = esg::slice_to(x, from, four_t, esg::SliceToOptions().axes(axis_t).steps(two_t));
  const std::vector<Tensor> top = esg::top_k_to(x, from + 1, esg::TopKToOptions().largest(false));
  const esg::Model m = esg::compile(b.build({sliced, top[0], top[1]}));
  const HostTensor xs = HostTensor::from(esg::f32, std::vector<float>{5, 1, 7, 3, 2, 8, 0, 6}, {2, 4});
  const std::vector<HostTensor> out = m.run({xs, HostTensor::from(esg::i64, std::vector<int64_t>{1}, {1})});
  CHECK(out[0].shape() == Dims{2, 2});
  CHECK(out[0].values<float>() == std::vector<float>{1, 3, 8, 6});
  CHECK(out[1].values<float>() == std::vector<float>{1, 3, 0, 2});
  CHECK(out[2].values<int64_t>() == std::vector<int64_t>{1, 3, 2, 0});
  // k = 5 of 4 elements: top_k's own refusal, and the model runs on.
  CHECK_THROWS_AS(m.run({xs, HostTensor::from(esg::i64, std::vector<int64_t>{4}, {1})}), esg::AttributeError);
  CHECK(m.run({xs, HostTensor::from(esg::i64, std::vector<int64_t>{3}, {1})})[1].shape() == Dims{2, 4});
}
