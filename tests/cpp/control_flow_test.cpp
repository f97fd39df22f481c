// if_ and while_ with C++ lambdas as bodies, capturing tensors of the enclosing graph.
#include <doctest/doctest.h>

#include <optional>

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
