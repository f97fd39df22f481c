// if_ and while_ with C++ lambdas as bodies, capturing tensors of the enclosing graph.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <thread>

#include <esgraph/esgraph.hpp>

using esg::Tensor;
using Dims = std::vector<int64_t>;

TEST_CASE("if_ builds both branches from lambdas and captures outer tensors") {
  esg::GraphBuilder b("branchy");
  const Tensor x = b.input("x", esg::f32, {4});
  const Tensor flag = b.input("flag", esg::boolean, {});
  const auto outs = esg::if_(flag, [&] { return esg::exp(x); }, [&] { return std::vector<Tensor>{-x}; });
  REQUIRE(outs.size() == 1);
  CHECK(outs[0].shape() == Dims{4});
  const std::string text = b.build({outs[0]}).to_text();
  CHECK(text.find("if(%flag) captures(%x)") != std::string::npos);
  CHECK(text.find("then_branch(") != std::string::npos);
}

TEST_CASE("branches that disagree in dtype fail; a differing size becomes symbolic") {
  esg::GraphBuilder b;
  const Tensor x = b.input("x", esg::f32, {4});
  const Tensor flag = b.input("flag", esg::boolean, {});
  CHECK_THROWS_AS(esg::if_(flag, [&] { return x; }, [&] { return esg::cast(x, esg::i32); }), esg::ShapeError);
  const auto outs = esg::if_(flag, [&] { return x; }, [&] { return esg::concat({x, x}, 0); });
  CHECK(outs[0].dim(0) < 0);
  CHECK(outs[0].dim_name(0) == "if(4|8)");
  // The refused if_ left no bodies behind: the graph builds, with the one if that succeeded.
  CHECK(b.build({outs[0]}).to_text().find("if(") != std::string::npos);
}

TEST_CASE("a branch that throws leaves the builder as it was, the other branch included") {
  esg::GraphBuilder b;
  const Tensor x = b.input("x", esg::f32, {4});
  const Tensor flag = b.input("flag", esg::boolean, {});
  struct Boom {};
  CHECK_THROWS_AS(esg::if_(flag, [&] { return esg::exp(x); }, [&]() -> Tensor { throw Boom{}; }), Boom);
  CHECK_THROWS_AS(esg::if_(flag, [&]() -> Tensor { throw Boom{}; }, [&] { return x; }), Boom);
  CHECK(b.build({esg::neg(x)}).node_count() == 1);
}

TEST_CASE("while_ carries values through a body and checks their types") {
  esg::GraphBuilder b;
  const Tensor i0 = b.input("i", esg::i64, {});
  const Tensor acc = b.input("acc", esg::f32, {3});
  const Tensor limit = b.input("limit", esg::i64, {});
  const auto outs = esg::while_(
      {i0, acc}, [&](const std::vector<Tensor>& v) { return v[0] < limit; },
      [&](const std::vector<Tensor>& v) { return std::vector<Tensor>{v[0] + 1, v[1] * 2}; });
  REQUIRE(outs.size() == 2);
  CHECK(outs[1].shape() == Dims{3});
  CHECK(outs[0].dtype() == esg::i64);
  esg::Graph g = b.build(outs);
  g.verify();
  CHECK_THROWS_AS(
      [&] {
        esg::GraphBuilder b2;
        const Tensor j = b2.input("j", esg::i64, {});
        esg::while_({j}, [&](const std::vector<Tensor>& v) { return v[0] < 3; },
                    [&](const std::vector<Tensor>& v) { return esg::cast(v[0], esg::f32); });
      }(),
      esg::ShapeError);
}

TEST_CASE("a body whose lambda throws is discarded and the builder stays usable") {
  esg::GraphBuilder b;
  const Tensor x = b.input("x", esg::f32, {2});
  const Tensor flag = b.input("flag", esg::boolean, {});
  const Tensor y = b.input("y", esg::f32, {3});
  CHECK_THROWS_AS(esg::if_(flag, [&] { return x + y; }, [&] { return x; }), esg::ShapeError);
  // The failure is the builder's first error; a fresh builder shows the path still works.
  esg::GraphBuilder fresh;
  const Tensor a = fresh.input("a", esg::f32, {2});
  const Tensor c = fresh.input("c", esg::boolean, {});
  const auto outs = esg::if_(c, [&] { return esg::exp(a); }, [&] { return a; });
  esg::Graph g = fresh.build(outs);
  g.verify();
  CHECK(g.node_count() == 2);
}

TEST_CASE("nested bodies capture through every level") {
  esg::GraphBuilder b;
  const Tensor x = b.input("x", esg::f32, {2});
  const Tensor c = b.input("c", esg::boolean, {});
  const auto outs = esg::if_(
      c,
      [&] { return esg::if_(c, [&] { return esg::exp(x); }, [&] { return x; }); },
      [&] { return x; });
  esg::Graph g = b.build(outs);
  g.verify();
  const esg::Graph back = esg::Graph::deserialize(g.serialize());
  CHECK(back.to_text() == g.to_text());
}

TEST_CASE("a throwing branch discards the other branch with the control flow nested in it") {
  esg::GraphBuilder b;
  const Tensor x = b.input("x", esg::f32, {4});
  const Tensor flag = b.input("flag", esg::boolean, {});
  struct Boom {};
  auto nested = [&] { return esg::if_(flag, [&] { return esg::exp(x); }, [&] { return -x; })[0]; };
  CHECK_THROWS_AS(esg::if_(flag, nested, [&]() -> Tensor { throw Boom{}; }), Boom);
  CHECK_THROWS_AS(esg::if_(flag, nested, [&] { return esg::cast(x, esg::i32); }), esg::ShapeError);  // the if itself refused
  CHECK(b.build({esg::neg(x)}).node_count() == 1);
}

TEST_CASE("control flow over a tensor of a destroyed builder is a lifetime error") {
  std::optional<Tensor> flag;
  {
    esg::GraphBuilder b;
    flag = b.input("flag", esg::boolean, {});
  }
  CHECK_THROWS_AS(esg::if_(*flag, [&] { return *flag; }, [&] { return *flag; }), esg::LifetimeError);
}

namespace {
// A model counting i up to its input n: n iterations of a loop body.
esg::Model counting_loop(const esg::CompileOptions& options) {
  esg::GraphBuilder b("count");
  const Tensor n = b.input("n", esg::i64, {});
  const int64_t zero = 0;
  const Tensor i0 = b.constant(esg::i64, {}, &zero, sizeof zero);
  const auto outs = esg::while_({i0}, [&](const std::vector<Tensor>& v) { return v[0] < n; },
                                [&](const std::vector<Tensor>& v) { return v[0] + 1; });
  return esg::compile(b.build(outs), options);
}
int64_t count_to(const esg::Model& m, int64_t n) {
  return m.run({esg::HostTensor::from(esg::i64, std::vector<int64_t>{n}, {})})[0].values<int64_t>()[0];
}
}  // namespace

TEST_CASE("a loop past max_loop_iterations fails the run with a LimitError; the model stays usable") {
  const esg::Model m = counting_loop(esg::CompileOptions().max_loop_iterations(50));
  CHECK(count_to(m, 50) == 50);
  CHECK_THROWS_WITH_AS(count_to(m, 51), doctest::Contains("max_loop_iterations (50 iterations in all)"), esg::LimitError);
  CHECK(count_to(m, 2) == 2);
}

TEST_CASE("Model::cancel stops a run under way on another thread, and no later run") {
  const esg::Model m = counting_loop(esg::CompileOptions().max_loop_iterations(0));
  std::atomic<bool> done{false};
  bool cancelled = false;
  std::thread run([&] {
    try {
      count_to(m, int64_t{1} << 62);
    } catch (const esg::CancelledError&) {
      cancelled = true;
    }
    done = true;
  });
  while (!done) {  // a cancel before the run began would miss it: repeat until it ends
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    m.cancel();
  }
  run.join();
  CHECK(cancelled);
  CHECK(count_to(m, 3) == 3);
}

TEST_CASE("bodies nest 64 deep at most; a graph over max_nodes is not compiled") {
  esg::GraphBuilder b;
  const Tensor x = b.input("x", esg::f32, {2});
  const Tensor flag = b.input("flag", esg::boolean, {});
  std::function<Tensor(int)> nest = [&](int depth) -> Tensor {
    if (depth == 0) return esg::exp(x);
    return esg::if_(flag, [&] { return nest(depth - 1); }, [&] { return -x; })[0];
  };
  const Tensor deepest = nest(64);
  CHECK_THROWS_WITH_AS(nest(65), doctest::Contains("bodies nest at most 64 deep; this one would be 65 deep"), esg::LimitError);
  const esg::Graph g = b.build({deepest});
  CHECK_THROWS_WITH_AS(esg::compile(g, esg::CompileOptions().max_nodes(100)), doctest::Contains("more than max_nodes (100)"),
                       esg::LimitError);
  CHECK(esg::compile(g).run({esg::HostTensor::from(esg::f32, std::vector<float>{0, 0}, {2}),
                             esg::HostTensor::from(esg::boolean, std::vector<bool>{true}, {})})[0].values<float>() ==
        std::vector<float>{1, 1});
}
