// Bad input through the C++ API: each mistake throws the right exception, with a message that
// names the op, the rule and the inputs, and leaves the builder usable.
#include <doctest/doctest.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <esgraph/esgraph.hpp>

using esg::Tensor;

namespace {
template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  FAIL("no exception of the expected type");
  return {};
}
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("adding [2,3] to [4] fails where it is written") {
  esg::GraphBuilder b;
  const Tensor a = b.input("a", esg::f32, {2, 3});
  const Tensor c = b.input("c", esg::f32, {4});
  const std::string m = message_of<esg::ShapeError>([&] { (void)(a + c); });
  CHECK(contains(m, "add:"));
  CHECK(contains(m, "cannot broadcast [2,3] with [4]"));
  CHECK(contains(m, "rule `broadcast`"));
  CHECK(contains(m, "a: f32[2,3], b: f32[4]"));
  // The exception was the whole report: the builder goes on as if the call had not been made.
  CHECK(b.build({esg::exp(a)}).node_count() == 1);
}

TEST_CASE("an axis out of range names the attribute and the valid range") {
  esg::GraphBuilder b;
  const Tensor x = b.input("x", esg::f32, {2, 3});
  const std::string m = message_of<esg::AttributeError>([&] { esg::softmax(x, esg::SoftmaxOptions().axis(-3)); });
  CHECK(contains(m, "`axis` = -3 is out of range for rank 2 (valid: -2 .. 1)"));
  CHECK_THROWS_AS(esg::reduce_sum(x, esg::ReduceSumOptions().axes({0, -2})), esg::AttributeError);
}

TEST_CASE("dtypes are checked against the op's type variables") {
  esg::GraphBuilder b;
  const Tensor f = b.input("f", esg::f32, {2});
  const Tensor i = b.input("i", esg::i32, {2});
  CHECK(contains(message_of<esg::DTypeError>([&] { esg::add(f, i); }), "must share one dtype, got f32 and i32"));
  CHECK(contains(message_of<esg::DTypeError>([&] { esg::exp(i); }), "T accepts only f32, f16, bf16, f64"));
  CHECK(contains(message_of<esg::DTypeError>([&] { esg::logical_not(f); }), "must be bool, got f32"));
}

TEST_CASE("attribute values outside their range are refused") {
  esg::GraphBuilder b;
  const Tensor x = b.input("x", esg::f32, {1, 1, 4, 4});
  const Tensor w = b.input("w", esg::f32, {1, 1, 3, 3});
  CHECK(contains(message_of<esg::AttributeError>([&] { esg::conv2d(x, w, esg::Conv2dOptions().groups(0)); }),
                 "attribute `groups` is 0, outside [1, inf]"));
  CHECK_THROWS_AS(esg::leaky_relu(x, esg::LeakyReluOptions().alpha(-1)), esg::AttributeError);
  CHECK_THROWS_AS(esg::conv2d(x, w, esg::Conv2dOptions().strides({1})), esg::AttributeError);
}

TEST_CASE("tensors of two builders cannot be mixed") {
  esg::GraphBuilder b1, b2;
  const Tensor x = b1.input("x", esg::f32, {2});
  const Tensor y = b2.input("y", esg::f32, {2});
  CHECK(contains(message_of<esg::LifetimeError>([&] { (void)(x + y); }), "belongs to another builder"));
  esg::LayerNormOptions o;
  o.scale(y);
  CHECK_THROWS_AS(esg::layer_norm(x, o), esg::LifetimeError);
}

TEST_CASE("tensors of a built graph can no longer be used") {
  esg::GraphBuilder b;
  const Tensor x = b.input("x", esg::f32, {2});
  const Tensor y = esg::exp(x);
  esg::Graph g = b.build({y});
  CHECK_FALSE(y.valid());
  CHECK(contains(message_of<esg::LifetimeError>([&] { esg::log(y); }), "can no longer be used"));
  CHECK_THROWS_AS(y.shape(), esg::LifetimeError);
  // The builder itself starts a fresh graph.
  const Tensor z = b.input("z", esg::f32, {3});
  CHECK(esg::exp(z).shape() == std::vector<int64_t>{3});
}

TEST_CASE("a name or path holding a NUL is refused, not cut short where the C string ends") {
  esg::GraphBuilder b;
  const std::string name("a\0b", 3);
  CHECK(contains(message_of<esg::InvalidArgumentError>([&] { b.input(name, esg::f32, {2}); }), "the input name 'a\\0b' holds a NUL"));
  Tensor x = b.input("x", esg::f32, {2});  // the builder goes on
  CHECK(contains(message_of<esg::InvalidArgumentError>([&] { x.set_name(name); }), "holds a NUL"));
  CHECK(contains(message_of<esg::InvalidArgumentError>([&] { b.build({x}).save(std::string("g\0.esg", 6)); }), "the path"));
}

TEST_CASE("a missing required input is an invalid argument") {
  esg::GraphBuilder b;
  const Tensor x = b.input("x", esg::f32, {2});
  CHECK(contains(message_of<esg::InvalidArgumentError>([&] { esg::add(x, Tensor()); }), "input `b` is not a valid tensor"));
  CHECK_THROWS_AS(esg::concat({}, 0), esg::InvalidArgumentError);
}

TEST_CASE("shape rules reject what numpy would reject") {
  esg::GraphBuilder b;
  const Tensor m = b.input("m", esg::f32, {3, 4});
  const Tensor n = b.input("n", esg::f32, {5, 6});
  CHECK(contains(message_of<esg::ShapeError>([&] { esg::matmul(m, n); }), "contracted dimensions differ: 4 (a) vs 5 (b)"));
  CHECK_THROWS_AS(esg::reshape(m, {5, -1}), esg::ShapeError);
  CHECK_THROWS_AS(esg::reshape(m, {-1, -1}), esg::AttributeError);
  CHECK_THROWS_AS(esg::split(m, {1, 1}), esg::ShapeError);
  CHECK_THROWS_AS(esg::transpose(m, esg::TransposeOptions().perm({0, 0})), esg::AttributeError);
  CHECK_THROWS_AS(esg::squeeze(m, esg::SqueezeOptions().axes({0})), esg::ShapeError);
  CHECK_THROWS_AS(esg::expand(m, {2, 3}), esg::ShapeError);
  CHECK_THROWS_AS(esg::pad(m, {1, 1}), esg::AttributeError);
  CHECK_THROWS_AS(esg::pad(m, {3, 0, 0, 0}, esg::PadOptions().mode(esg::PadMode::Reflect)), esg::ShapeError);
  CHECK_THROWS_AS(esg::concat({m, n}, 0), esg::ShapeError);
  CHECK_THROWS_AS(esg::layer_norm(m, esg::LayerNormOptions().scale(n)), esg::ShapeError);
  CHECK_THROWS_AS(esg::range(b, 1, esg::RangeOptions().step(0)), esg::AttributeError);
}

TEST_CASE("a failed call leaves the graph unchanged") {
  esg::GraphBuilder b;
  const Tensor x = b.input("x", esg::f32, {2, 3});
  const Tensor y = esg::exp(x);
  CHECK_THROWS(esg::reduce_sum(x, esg::ReduceSumOptions().axes({7})));
  CHECK_THROWS(esg::split(x, {1, 5}));
  const Tensor z = esg::log(y);
  CHECK(z.name() == "log_1");  // the failed nodes took no ids
}

TEST_CASE("sizes beyond 2^48 elements are shape errors, wherever they come from, and nothing overflows") {
  esg::GraphBuilder b;
  const int64_t big = int64_t{1} << 40, huge = INT64_MAX;
  CHECK_THROWS_WITH_AS(b.input("x", esg::f32, {big, big}), doctest::Contains("has more than 2^48 elements"), esg::ShapeError);
  CHECK_THROWS_WITH_AS(esg::fill(b, {big, big}), doctest::Contains("fill: output 0: [1099511627776,1099511627776] has more than 2^48"),
                       esg::ShapeError);
  const Tensor x = b.input("x", esg::f32, {big});
  CHECK_THROWS_WITH_AS(esg::reshape(x, {big, big, -1}), doctest::Contains("more than 2^48 elements"), esg::AttributeError);
  CHECK_THROWS_WITH_AS(esg::reshape(x, {huge, huge}), doctest::Contains("more than 2^48 elements"), esg::AttributeError);
  CHECK_THROWS_AS(esg::pad(x, {huge, huge}), esg::AttributeError);
  CHECK_THROWS_AS(esg::concat(std::vector<Tensor>(257, x), 0), esg::ShapeError);  // 257 · 2^40 > 2^48
  const Tensor img = b.input("img", esg::f32, {1, 1, 8, 8}), w = b.input("w", esg::f32, {1, 1, 3, 3});
  CHECK_THROWS_AS(esg::conv2d(img, w, esg::Conv2dOptions().dilations({huge, 1})), esg::AttributeError);
  CHECK_THROWS_AS(esg::conv2d(img, w, esg::Conv2dOptions().pads({huge, 0, huge, 0})), esg::AttributeError);
  CHECK_THROWS_AS(esg::conv2d(img, w, esg::Conv2dOptions().groups(huge)), esg::ShapeError);
  CHECK_THROWS_AS(esg::split(x, {huge, huge}), esg::AttributeError);
  CHECK(esg::slice(x, {0}, {big}, esg::SliceOptions().steps({huge})).shape() == std::vector<int64_t>{1});
  CHECK(esg::slice(x, {-1}, {-huge}, esg::SliceOptions().steps({-huge})).shape() == std::vector<int64_t>{1});
  CHECK(esg::max_pool2d(img, {2, 2}, esg::MaxPool2dOptions().strides({huge, huge}).ceil_mode(true)).shape() ==
        std::vector<int64_t>{1, 1, 1, 1});
  CHECK(b.build({x}).node_count() == 3);  // the two slices and the pool; the refused calls left nothing
}

TEST_CASE("a tensor that outlives its builder is a lifetime error, not a crash") {
  std::optional<Tensor> orphan;
  {
    esg::GraphBuilder b;
    orphan = b.input("x", esg::f32, {2});
  }
  esg::GraphBuilder other;  // may take the old builder's address
  (void)other.input("y", esg::f32, {2});
  // Refused as a destroyed builder's, or as stale when the new builder took the old one's address.
  CHECK_THROWS_WITH_AS(esg::exp(*orphan), doctest::Contains("can no longer be used"), esg::LifetimeError);
  CHECK_THROWS_AS(orphan->shape(), esg::LifetimeError);
}

TEST_CASE("builders on several threads at once stay apart, made and destroyed by turns") {
  // The registry of live builders is shared and each thread caches what it found alive: a
  // builder destroyed on one thread must read as destroyed on the others (the tsan preset runs
  // this under ThreadSanitizer).
  std::atomic<int> wrong{0};
  std::mutex mu;
  std::vector<Tensor> orphans;  // tensors of builders another thread destroyed
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) {
        std::optional<Tensor> stale;
        {
          std::lock_guard<std::mutex> lock(mu);
          if (!orphans.empty()) stale = orphans.back(), orphans.pop_back();
        }
        std::optional<Tensor> kept;
        {
          esg::GraphBuilder b;
          const Tensor x = b.input("x", esg::f32, {2, 3});
          const Tensor y = esg::relu(x * 2.0f + 1.0f);
          if (y.shape() != std::vector<int64_t>{2, 3}) ++wrong;
          kept = x;
        }  // b is destroyed here, before another thread can see x
        if (stale) {
          try {
            (void)esg::exp(*stale);
            ++wrong;
          } catch (const esg::LifetimeError&) {
          }
        }
        std::lock_guard<std::mutex> lock(mu);
        orphans.push_back(*kept);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(wrong == 0);
}

TEST_CASE("sequence_at refuses elements of two shapes when built, and a position outside the sequence when run") {
  {
    esg::GraphBuilder b;
    const Tensor a = b.input("a", esg::f32, {2}), wide = b.input("wide", esg::f32, {3});
    CHECK(contains(message_of<esg::ShapeError>([&] { esg::sequence_at({a, wide}, b.input("p", esg::i32, {})); }),
                   "elements[1] [3] differs from elements[0] [2]: a position read at run time picks among elements of one shape"));
    CHECK(contains(message_of<esg::ShapeError>([&] { esg::sequence_at({a, a}, b.input("q", esg::i32, {1})); }),
                   "`position` [1] must be a scalar"));
  }
  esg::GraphBuilder b;
  const Tensor a = b.input("a", esg::f32, {2}), c = b.input("c", esg::f32, {2}), p = b.input("p", esg::i32, {});
  const esg::Model m = esg::compile(b.build({esg::sequence_at({a, c}, p)}));
  const auto run = [&](int32_t at) {
    return m.run({esg::HostTensor::from(esg::f32, std::vector<float>{1, 2}, {2}), esg::HostTensor::from(esg::f32, std::vector<float>{3, 4}, {2}),
                  esg::HostTensor::from(esg::i32, std::vector<int32_t>{at}, {})})[0]
        .values<float>();
  };
  CHECK(run(-1) == std::vector<float>{3, 4});
  CHECK(run(0) == std::vector<float>{1, 2});
  CHECK(contains(message_of<esg::InvalidArgumentError>([&] { run(-3); }), "sequence_at: position -3 is outside a sequence of 2 element(s)"));
  CHECK(run(1) == std::vector<float>{3, 4});  // the model runs on
}
