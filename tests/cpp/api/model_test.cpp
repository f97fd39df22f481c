// Compiling and running graphs through the C++ API.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <thread>

#include <esgraph/ascend_check.hpp>
#include <esgraph/esgraph.hpp>

using esg::HostTensor;
using esg::Tensor;

namespace {

// y = relu(x @ w + b) with small integers, so the expected values are exact.
esg::Graph mlp(bool symbolic) {
  esg::GraphBuilder b("mlp");
  const Tensor x = b.input("x", esg::f32, {symbolic ? b.symbol("batch") : 2, 3});
  const Tensor w = b.constant({1, 0, 0, 1, 1, -1}, {3, 2});
  const Tensor bias = b.constant({0.5f, -10.0f}, {2});
  return b.build({esg::relu(esg::matmul(x, w) + bias)});
}

std::vector<float> run_mlp(const esg::Model& m, std::vector<float> x, int64_t batch) {
  return m.run({HostTensor::from(esg::f32, x, {batch, 3})})[0].values<float>();
}

}  // namespace

TEST_CASE("a compiled MLP computes what the math says") {
  const esg::Model m = esg::compile(mlp(false));
  // x = [[1,2,3],[4,5,6]]: x@w = [[4,-1],[10,-1]]; + b = [[4.5,-11],[10.5,-11]]; relu.
  CHECK(run_mlp(m, {1, 2, 3, 4, 5, 6}, 2) == std::vector<float>{4.5f, 0, 10.5f, 0});
  const esg::Facts facts = m.facts();
  std::vector<std::string> steps;
  for (const esg::Facts& pass : facts.rows("passes")) steps.push_back(pass.text("step").substr(0, pass.text("step").find(" (")));
  CHECK(std::count(steps.begin(), steps.end(), "plan memory") == 1);
  CHECK(std::count(steps.begin(), steps.end(), "check the memory plan") == 1);  // ctest sets ESG_CHECK_PLANS=1
  CHECK(facts.number("lower_bound_bytes") <= facts.number("arena_bytes"));
  // The report renders the same record, an entry a line.
  CHECK(m.report().find("\narena_bytes: " + std::to_string(facts.number("arena_bytes")) + "\n") != std::string::npos);
  // matmul on oneDNN's matmul primitive (constant weights) with add+relu as its epilogue: one kernel.
  const esg_model_stats s = m.stats();
  CHECK(s.plans == 1);
  CHECK(s.launches == 1);
  CHECK(s.fused_groups == 1);
  CHECK(s.fused_ops == 3);
  CHECK(s.epilogue_groups == 1);
  CHECK(s.fast_kernels == 0);
  CHECK(s.reference_kernels == 0);
  CHECK(s.streams == 1);
  CHECK(s.events == 0);
  CHECK(s.device_kernels == 0);
  CHECK(s.library_calls == 1);
  // The one kernel writes the caller's output buffer: nothing lives in the arena.
  CHECK(s.arena_bytes == 0);
  CHECK(s.lower_bound_bytes == 0);
}

TEST_CASE("stats count what a plan launches and keeps") {
  esg::GraphBuilder b;
  const Tensor x = b.input("x", esg::f32, {64, 32});
  const Tensor w = b.input("w", esg::f32, {32, 16});
  const Tensor h = esg::relu(esg::matmul(x, w));        // a matmul with its epilogue
  const Tensor t = esg::concat({h, h}, 0);               // a reference kernel
  const Tensor y = esg::softmax(esg::transpose(t) * 2.0f + 1.0f);  // fast transpose, a fused group, the fast softmax
  const esg::Graph g = b.build({y});
  const esg_model_stats fused = esg::compile(g).stats();
  CHECK(fused.launches == fused.fused_groups + fused.fast_kernels + fused.reference_kernels);
  CHECK(fused.epilogue_groups == 1);
  CHECK(fused.reference_kernels == 1);
  CHECK(fused.fast_kernels == 2);
  const esg_model_stats unfused = esg::compile(g, esg::CompileOptions().fusion(false)).stats();
  CHECK(unfused.fused_groups == 0);
  CHECK(unfused.launches == 5);  // matmul, relu, concat, transpose, softmax (the · 2 and + 1 its scale and mask)
  CHECK(unfused.launches > fused.launches);
  CHECK(unfused.no_reuse_bytes > unfused.arena_bytes);  // reuse pays over a chain
  const esg_model_stats no_reuse = esg::compile(g, esg::CompileOptions().fusion(false).memory_reuse(false)).stats();
  CHECK(no_reuse.arena_bytes == no_reuse.no_reuse_bytes);
  CHECK(no_reuse.in_place_values == 0);
}

TEST_CASE("a symbolic batch compiles once per size class, bound or at run time") {
  const esg::Model lazy = esg::compile(mlp(true));
  CHECK(lazy.facts().text("plan").rfind("none yet", 0) == 0);
  CHECK(lazy.stats().plans == 0);
  CHECK(lazy.stats().launches == 0);
  CHECK(run_mlp(lazy, {1, 2, 3}, 1) == std::vector<float>{4.5f, 0});
  CHECK(run_mlp(lazy, std::vector<float>(12, 1.0f), 4).size() == 8);
  CHECK(run_mlp(lazy, std::vector<float>(9, 1.0f), 3) == std::vector<float>{2.5f, 0, 2.5f, 0, 2.5f, 0});
  CHECK(lazy.stats().plans == 2);  // the classes up to 1 and up to 4
  CHECK(lazy.stats().bindings == 3);
  const esg::Model bound = esg::compile(mlp(true), esg::CompileOptions().symbol("batch", 2));
  CHECK(bound.stats().plans == 1);
  CHECK(bound.facts().rows("inputs").at(0).text("type") == "f32[2,3]");
  CHECK_THROWS_AS(esg::compile(mlp(true), esg::CompileOptions().symbol("nope", 2)), esg::InvalidArgumentError);
  CHECK_THROWS_AS(run_mlp(bound, std::vector<float>(9, 1.0f), 3), esg::ShapeError);  // bound sizes are fixed
  // A range: sizes within run, one beyond is refused; plans kept at most max_plans.
  const esg::Model ranged = esg::compile(mlp(true), esg::CompileOptions().symbol_range("batch", 1, 3).max_plans(2));
  for (int64_t batch = 1; batch <= 3; ++batch) CHECK(run_mlp(ranged, std::vector<float>(3 * batch, 1.0f), batch).size() == 2 * batch);
  CHECK_THROWS_AS(run_mlp(ranged, std::vector<float>(12, 1.0f), 4), esg::ShapeError);
  CHECK(ranged.stats().plans == 1);  // one plan for the range, bound to each size
  CHECK(ranged.stats().bindings == 3);
  const esg::Facts kept = ranged.facts();
  CHECK(kept.number("plans_kept") == 2);
  CHECK(kept.number("max_plans") == 2);
  CHECK(kept.number("symbolic_plans_kept") == 1);
  REQUIRE(kept.rows("size_classes").size() == 1);
  CHECK(kept.rows("size_classes")[0].rows("inputs").at(0).text("type") == "f32[batch,3]");
  CHECK(kept.rows("inputs").at(0).text("type") == "f32[3,3]");  // the binding run last
  // The same range grown on demand: a plan per power-of-two class up to its end.
  const esg::Model grown = esg::compile(mlp(true), esg::CompileOptions().symbol_range("batch", 1, 3).grow_memory(true));
  for (int64_t batch = 1; batch <= 3; ++batch) CHECK(run_mlp(grown, std::vector<float>(3 * batch, 1.0f), batch).size() == 2 * batch);
  CHECK(grown.stats().plans == 3);  // classes 1, 2 and 3 (4 cut at the range's end)
  CHECK_THROWS_AS(run_mlp(grown, std::vector<float>(12, 1.0f), 4), esg::ShapeError);
}

namespace {

// A decoder step's cache: the new token's keys appended to the past ones, the scores of a query
// against all of them, softmax over the past and the new token together.
esg::Graph cache_step(esg::GraphBuilder& b) {
  const int64_t past = b.symbol("past");
  const Tensor q = b.input("q", esg::f32, {1, 4});
  const Tensor k_past = b.input("k_past", esg::f32, {past, 4});
  const Tensor k_new = b.input("k_new", esg::f32, {1, 4});
  const Tensor k = esg::concat({k_past, k_new}, 0);
  const Tensor scores = esg::softmax(esg::matmul(q, esg::transpose(k, esg::TransposeOptions().perm({1, 0}))) * 0.5f);
  return b.build({scores, k});
}

std::vector<float> seq(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(scale * static_cast<float>(i + 1));
  return v;
}

}  // namespace

TEST_CASE("one symbolic plan serves every size: the same results as a plan per size") {
  esg::GraphBuilder b("cache");
  const esg::Graph g = cache_step(b);
  const esg::Model any = esg::compile(g, esg::CompileOptions().symbol_range("past", 0, 40));
  for (int64_t past : {0, 1, 2, 7, 31, 40, 3}) {
    const std::vector<HostTensor> in{HostTensor::from(esg::f32, seq(4, 0.3f), {1, 4}),
                                     HostTensor::from(esg::f32, seq(4 * past, 0.7f), {past, 4}),
                                     HostTensor::from(esg::f32, seq(4, 1.1f), {1, 4})};
    const std::vector<HostTensor> got = any.run(in);
    const std::vector<HostTensor> want = esg::compile(g, esg::CompileOptions().symbol("past", past)).run(in);
    REQUIRE(got[0].shape() == std::vector<int64_t>{1, past + 1});
    CHECK(got[0].values<float>() == want[0].values<float>());
    CHECK(got[1].values<float>() == want[1].values<float>());
  }
  CHECK(any.stats().plans == 1);
  CHECK(any.stats().bindings == 7);
  // Beyond the range: refused before anything is bound.
  CHECK_THROWS_AS(any.run({HostTensor(esg::f32, {1, 4}), HostTensor(esg::f32, {41, 4}), HostTensor(esg::f32, {1, 4})}), esg::ShapeError);
  CHECK(any.stats().bindings == 7);
}

TEST_CASE("bindings share kernels with bindings long dropped, and stay right") {
  // A group over the symbolic size and one over static sizes: each binding's program shares the
  // static group's kernel with the binding before it, which the cache (2 kept) drops soon after.
  esg::GraphBuilder b("shared");
  const Tensor x = b.input("x", esg::f32, {b.symbol("n"), 4});
  const Tensor c = b.input("c", esg::f32, {4});
  const esg::Model m = esg::compile(b.build({esg::relu(x * 2.0f - 1.0f), esg::tanh(c * 3.0f + 1.0f) * 0.5f}),
                                    esg::CompileOptions().max_plans(2));
  const std::vector<float> cs = seq(4, 0.9f);
  for (int round = 0; round < 2; ++round)
    for (int64_t n = 1; n <= 9; ++n) {
      const std::vector<float> xs = seq(4 * n, 0.4f + static_cast<float>(n));
      const std::vector<HostTensor> out = m.run({HostTensor::from(esg::f32, xs, {n, 4}), HostTensor::from(esg::f32, cs, {4})});
      const std::vector<float> y = out[0].values<float>(), z = out[1].values<float>();
      for (size_t i = 0; i < xs.size(); ++i) CHECK(y[i] == doctest::Approx(std::max(0.0f, xs[i] * 2 - 1)));
      for (size_t i = 0; i < cs.size(); ++i) CHECK(z[i] == doctest::Approx(std::tanh(cs[i] * 3 + 1) * 0.5f));
    }
  CHECK(m.stats().plans == 10);  // n up to 1, 2, 4, 8 and 16, each compiled again in round 2 (2 kept)
  CHECK(m.stats().bindings == 18);
}

TEST_CASE("a size class whose largest sizes the graph cannot take is planned per set of shapes") {
  // [n, m] reshaped to [4, 3]: the class n, m <= 4 cannot be planned at n = m = 4.
  esg::GraphBuilder b("fixed");
  const Tensor x = b.input("x", esg::f32, {b.symbol("n"), b.symbol("m")});
  const esg::Model m = esg::compile(b.build({esg::relu(esg::reshape(x, {4, 3}))}));
  std::vector<float> twelve = seq(12, 0.5f);
  for (const std::vector<int64_t>& dims : {std::vector<int64_t>{3, 4}, std::vector<int64_t>{4, 3}, std::vector<int64_t>{2, 6}}) {
    const std::vector<float> got = m.run({HostTensor::from(esg::f32, twelve, dims)})[0].values<float>();
    for (size_t i = 0; i < twelve.size(); ++i) CHECK(got[i] == std::max(0.0f, twelve[i]));
  }
  CHECK(m.stats().bindings == 0);
  CHECK(m.stats().plans == 3);
  int refused = 0;
  for (const esg::Facts& c : m.facts().rows("size_classes"))
    refused += c.has("planned_per_shapes") && c.text("planned_per_shapes").rfind("reshape: cannot reshape [4,4]", 0) == 0;
  CHECK(refused == 1);
}

TEST_CASE("a symbolic plan checks a run's sizes as the builder would have") {
  // a[n] + b[m]: the builder trusts n and m to agree (or one to be 1); a run where they do not
  // fails naming the op, and the model runs on.
  esg::GraphBuilder b("sum");
  const Tensor x = b.input("a", esg::f32, {b.symbol("n")});
  const Tensor y = b.input("b", esg::f32, {b.symbol("m")});
  const esg::Model m = esg::compile(b.build({x + y}));
  const std::vector<float> three{1, 2, 3};
  CHECK(m.run({HostTensor::from(esg::f32, three, {3}), HostTensor::from(esg::f32, three, {3})})[0].values<float>() ==
        std::vector<float>{2, 4, 6});
  try {
    m.run({HostTensor::from(esg::f32, three, {3}), HostTensor(esg::f32, {2})});
    FAIL("sizes 3 and 2 were added");
  } catch (const esg::ShapeError& e) {
    CHECK(std::string(e.what()).find("add") != std::string::npos);
    CHECK(std::string(e.what()).find("[2]") != std::string::npos);
  }
  CHECK(m.run({HostTensor::from(esg::f32, three, {3}), HostTensor::from(esg::f32, std::vector<float>{10}, {1})})[0].values<float>() ==
        std::vector<float>{11, 12, 13});
}

TEST_CASE("options: streams, no reuse and verification give the same results") {
  const esg::Graph g = mlp(false);
  const std::vector<float> want = run_mlp(esg::compile(g), {1, 2, 3, 4, 5, 6}, 2);
  for (const esg::CompileOptions& o : {esg::CompileOptions().streams(2), esg::CompileOptions().memory_reuse(false),
                                       esg::CompileOptions().verify_each_pass(true).fusion(false)})
    CHECK(run_mlp(esg::compile(g, o), {1, 2, 3, 4, 5, 6}, 2) == want);
  CHECK_THROWS_AS(esg::compile(g, esg::CompileOptions().streams(0)), esg::InvalidArgumentError);
  CHECK_THROWS_AS(esg::compile(g, esg::CompileOptions().threads(-1)), esg::InvalidArgumentError);
}

TEST_CASE("wrong inputs and outputs at run time are clear errors") {
  const esg::Model m = esg::compile(mlp(false));
  CHECK_THROWS_AS(m.run({}), esg::InvalidArgumentError);
  CHECK_THROWS_AS(m.run({HostTensor(esg::f64, {2, 3})}), esg::DTypeError);
  CHECK_THROWS_AS(m.run({HostTensor(esg::f32, {3, 3})}), esg::ShapeError);
  std::vector<HostTensor> wrong_out{HostTensor(esg::f32, {2, 3})};
  CHECK_THROWS_AS(m.run({HostTensor(esg::f32, {2, 3})}, wrong_out), esg::ShapeError);
  // The model is intact after all that.
  CHECK(run_mlp(m, {1, 2, 3, 4, 5, 6}, 2)[0] == 4.5f);
}

TEST_CASE("one model runs from several threads at once") {
  esg::GraphBuilder b("wide");
  const Tensor x = b.input("x", esg::f32, {64, 64});
  Tensor y = x;
  for (int i = 0; i < 8; ++i) y = esg::tanh(esg::matmul(y, x) * 0.01f);
  const esg::Model m = esg::compile(b.build({y}));
  std::vector<float> xs(64 * 64);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(static_cast<float>(i));
  const std::vector<float> want = m.run({HostTensor::from(esg::f32, xs, {64, 64})})[0].values<float>();
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < 5; ++r) ok[static_cast<size_t>(t)] += m.run({HostTensor::from(esg::f32, xs, {64, 64})})[0].values<float>() == want;
    });
  for (auto& t : threads) t.join();
  CHECK(ok == std::vector<int>{5, 5, 5, 5});
}

TEST_CASE("runs of many sizes from several threads bind and drop plans and stay right") {
  // Bindings are made outside the model's lock, sharing the kernels of a donor another thread
  // may drop meanwhile (2 kept).
  esg::GraphBuilder b("sizes");
  const Tensor x = b.input("x", esg::f32, {b.symbol("n"), 8});
  const Tensor w = b.constant(seq(8 * 8, 0.3f), {8, 8});
  const esg::Model m = esg::compile(b.build({esg::relu(esg::matmul(x, w) + 0.5f)}), esg::CompileOptions().max_plans(2));
  auto want = [](const std::vector<float>& xs, int64_t n) {
    const std::vector<float> ws = seq(8 * 8, 0.3f);
    std::vector<float> y(static_cast<size_t>(n * 8));
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < 8; ++c) {
        float sum = 0.5f;
        for (int64_t k = 0; k < 8; ++k) sum += xs[static_cast<size_t>(r * 8 + k)] * ws[static_cast<size_t>(k * 8 + c)];
        y[static_cast<size_t>(r * 8 + c)] = std::max(0.0f, sum);
      }
    return y;
  };
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 24; ++i) {
        const int64_t n = 1 + (t * 5 + i * 7) % 11;
        const std::vector<float> xs = seq(8 * n, 0.1f * static_cast<float>(n));
        const std::vector<float> got = m.run({HostTensor::from(esg::f32, xs, {n, 8})})[0].values<float>();
        const std::vector<float> expected = want(xs, n);
        for (size_t k = 0; k < got.size(); ++k) wrong[static_cast<size_t>(t)] += std::abs(got[k] - expected[k]) > 1e-4f;
      }
    });
  for (auto& t : threads) t.join();
  CHECK(wrong == std::vector<int>{0, 0, 0, 0});
  CHECK(m.stats().bindings >= 11);
}

TEST_CASE("runs of many sizes from several threads on the simulated Ascend share the class's device") {
  // One size class (a range): its bindings share one device and, with only generated kernels,
  // one captured model, each writing its tilings before it runs; 2 kept, so bindings and the
  // device (with its last binding) go and come while other threads run. n = 1 lowers otherwise
  // (a device of its own).
  esg::GraphBuilder b("sizes");
  const Tensor x = b.input("x", esg::f32, {b.symbol("n"), 8});
  const esg::Graph g = b.build({esg::softmax(esg::exp(x) * 0.5f + esg::tanh(x))});
  const esg::Model sim = esg::compile(g, esg::CompileOptions().backend("ascend-sim").symbol_range("n", 1, 16).max_plans(2));
  const esg::Model cpu = esg::compile(g);
  std::vector<std::thread> threads;
  std::vector<int> wrong(3, 0);
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 16; ++i) {
        const int64_t n = 1 + (t * 5 + i * 7) % 16;
        const std::vector<HostTensor> in = {HostTensor::from(esg::f32, seq(8 * n, 0.05f * static_cast<float>(n)), {n, 8})};
        const std::vector<float> got = sim.run(in)[0].values<float>(), expected = cpu.run(in)[0].values<float>();
        for (size_t k = 0; k < got.size(); ++k) wrong[static_cast<size_t>(t)] += std::abs(got[k] - expected[k]) > 1e-5f;
      }
    });
  for (auto& t : threads) t.join();
  CHECK(wrong == std::vector<int>{0, 0, 0});
  CHECK(sim.stats().captured == 1);
}

TEST_CASE("outputs that are inputs, constants or repeated are filled too") {
  esg::GraphBuilder b("passthrough");
  const Tensor x = b.input("x", esg::f32, {2});
  const Tensor c = b.constant({7, 8}, {2});
  const Tensor y = esg::exp(x);
  const esg::Model m = esg::compile(b.build({x, c, y, y}));
  const auto outs = m.run({HostTensor::from(esg::f32, std::vector<float>{0, 1}, {2})});
  CHECK(outs[0].values<float>() == std::vector<float>{0, 1});
  CHECK(outs[1].values<float>() == std::vector<float>{7, 8});
  CHECK(outs[2].values<float>()[0] == 1.0f);
  CHECK(outs[3].values<float>() == outs[2].values<float>());
}

TEST_CASE("control flow runs inside a compiled model") {
  esg::GraphBuilder b("loop");
  const Tensor n = b.input("n", esg::i64, {});
  const Tensor v = b.input("v", esg::f32, {2});
  const auto outs = esg::while_({n, v}, [&](const std::vector<Tensor>& s) { return s[0] > 0; },
                                [&](const std::vector<Tensor>& s) { return std::vector<Tensor>{s[0] - 1, s[1] * 2}; });
  const esg::Model m = esg::compile(b.build({outs[1]}));
  const auto r = m.run({HostTensor::from(esg::i64, std::vector<int64_t>{3}, {}), HostTensor::from(esg::f32, std::vector<float>{1, 2}, {2})});
  CHECK(r[0].values<float>() == std::vector<float>{8, 16});
}

namespace {
int64_t kernels(const esg::Graph& g, const esg::CompileOptions& o = {}) { return esg::compile(g, o).stats().launches; }
}  // namespace

TEST_CASE("u64 arithmetic stays exact above int64's range, fused or not") {
  esg::GraphBuilder b;
  const Tensor x = b.input("x", esg::u64, {3});
  const esg::Graph g = b.build({esg::minimum(x * 2u, x) + 1u});  // wraps as C's unsigned math does
  const uint64_t big = (uint64_t{1} << 63) + 5;
  const std::vector<uint64_t> want{4, 11, UINT64_MAX};  // x*2 wraps: big*2 = 10, (2^64-1)*2 = 2^64-2
  for (bool fusion : {true, false}) {
    const esg::Model m = esg::compile(g, esg::CompileOptions().fusion(fusion));
    const auto outs = m.run({esg::HostTensor::from(esg::u64, std::vector<uint64_t>{3, big, UINT64_MAX}, {3})});
    CHECK(outs.at(0).values<uint64_t>() == want);
  }
}

TEST_CASE("backend_names: the table's names, cpu first; a name outside it is refused, naming them") {
  const std::vector<std::string> names = esg::backend_names();
  REQUIRE(!names.empty());
  CHECK(names.front() == "cpu");
  CHECK(std::count(names.begin(), names.end(), "ascend-sim") == 1);
  esg::GraphBuilder b;
  const esg::Graph g = b.build({esg::relu(b.input("x", esg::f32, {4}))});
  try {
    esg::compile(g, esg::CompileOptions().backend("tpu"));
    FAIL("a backend outside the table compiled");
  } catch (const esg::InvalidArgumentError& e) {
    for (const std::string& name : names) CHECK(std::string(e.what()).find("'" + name + "'") != std::string::npos);
  }
}

TEST_CASE("the Ascend backend on the simulated device: same values; a missing runtime is a BackendError") {
  esg::GraphBuilder b;
  const Tensor x = b.input("x", esg::f32, {4, 50}), bias = b.input("bias", esg::f32, {50});
  const esg::Graph g = b.build({esg::tanh(x + bias) * 0.5f});
  std::vector<float> xs(200), bs(50);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = 0.01f * static_cast<float>(i) - 1.0f;
  for (size_t i = 0; i < bs.size(); ++i) bs[i] = 0.02f * static_cast<float>(i);
  const std::vector<esg::HostTensor> in{esg::HostTensor::from(esg::f32, xs, {4, 50}), esg::HostTensor::from(esg::f32, bs, {50})};
  const auto want = esg::compile(g).run(in).at(0).values<float>();
  const auto got = esg::compile(g, esg::CompileOptions().backend("ascend-sim").ai_cores(2)).run(in).at(0).values<float>();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));
  setenv("ESG_ASCEND_SIM_LIBRARY", "/nonexistent/libascendcl.so", 1);
  CHECK_THROWS_WITH_AS(esg::compile(g, esg::CompileOptions().backend("ascend-sim")),
                       doctest::Contains("cannot load AscendCL (libascendcl.so)"), esg::BackendError);
  unsetenv("ESG_ASCEND_SIM_LIBRARY");
  CHECK_THROWS_AS(esg::compile(g, esg::CompileOptions().backend("gpu")), esg::InvalidArgumentError);
  // An op with no device lowering: refused, or run on the host with host_fallback.
  esg::GraphBuilder nb;
  const Tensor nx = nb.input("x", esg::f32, {4, 50}), nbias = nb.input("bias", esg::f32, {50});
  const esg::Graph narrow = nb.build({esg::atanh(nx * 0.001f) + nbias});
  CHECK_THROWS_WITH_AS(esg::compile(narrow, esg::CompileOptions().backend("ascend-sim")), doctest::Contains("host_fallback"),
                       esg::UnsupportedError);
  const auto host_want = esg::compile(narrow).run(in).at(0).values<float>();
  const esg::Model fallback = esg::compile(narrow, esg::CompileOptions().backend("ascend-sim").host_fallback(true));
  const auto host_got = fallback.run(in).at(0).values<float>();
  REQUIRE(host_got.size() == host_want.size());
  for (size_t i = 0; i < host_got.size(); ++i) CHECK(host_got[i] == host_want[i]);  // the CPU's own kernels
  const std::vector<esg::Facts> host = fallback.facts().rows("host_ops");
  REQUIRE(host.size() == 1);
  CHECK(host[0].number("count") == 1);
  CHECK(fallback.stats().host_launches == 1);
}

TEST_CASE("esg::ascend_check: the smoke set matches the CPU on the simulated device; a device that cannot start throws") {
  const esg::AscendCheck check = esg::ascend_check("ascend-sim");
  CHECK(check.passed());
  CHECK(check.cases.size() == 9);
  CHECK(check.device.find("(Ascend910B1), CANN 8.5.0, AscendCL") != std::string::npos);
  const std::string table = check.table();
  CHECK(table.find("9 of 9 passed") != std::string::npos);
  CHECK(table.find("pass  two streams, captured (aclmdlRI)") != std::string::npos);
  // On an SoC the kernels do not target, the kernel cases fail by name and the library's pass.
  setenv("ACLSIM_SOC", "Ascend310P3", 1);
  const esg::AscendCheck other = esg::ascend_check("ascend-sim");
  unsetenv("ACLSIM_SOC");
  CHECK_FALSE(other.passed());
  CHECK(other.table().find("FAIL  elementwise kernel, f32") != std::string::npos);
  CHECK(other.table().find("ESG_ASCEND_ARCH=dav-m200") != std::string::npos);
  CHECK(other.table().find("pass  matmul (aclnnMatmul)") != std::string::npos);
  setenv("ESG_ASCEND_SIM_LIBRARY", "/nonexistent/libascendcl.so", 1);
  CHECK_THROWS_WITH_AS(esg::ascend_check("ascend-sim"), doctest::Contains("cannot load AscendCL"), esg::BackendError);
  unsetenv("ESG_ASCEND_SIM_LIBRARY");
}

TEST_CASE("kernel counts: elementwise chains fuse into one kernel") {
  {
    esg::GraphBuilder b;
    const Tensor a = b.input("a", esg::f32, {64, 32}), c = b.input("c", esg::f32, {32}), d = b.input("d", esg::f32, {64, 1});
    const esg::Graph g = b.build({a + c + d});
    CHECK(kernels(g) == 1);
    CHECK(kernels(g, esg::CompileOptions().fusion(false)) == 2);
  }
  {
    // GELU written out (the tanh approximation) is one kernel too.
    esg::GraphBuilder b;
    const Tensor x = b.input("x", esg::f32, {128});
    const Tensor y = x * 0.5f * (esg::tanh((x + x * x * x * 0.044715f) * 0.7978845608f) + 1.0f);
    CHECK(kernels(b.build({y})) == 1);
  }
  {
    esg::GraphBuilder b;
    const Tensor x = b.input("x", esg::f32, {8, 16});
    CHECK(kernels(b.build({esg::layer_norm(x)})) == 1);
    const Tensor z = b.input("z", esg::f32, {8, 16});
    CHECK(kernels(b.build({esg::softmax(z)})) == 1);
  }
  {
    // A value used both inside and after a chain escapes the group: two kernels.
    esg::GraphBuilder b;
    const Tensor x = b.input("x", esg::f32, {16});
    const Tensor e = esg::exp(x);
    const Tensor y = esg::reduce_sum(e + 1.0f);
    CHECK(kernels(b.build({y, esg::softmax(e)})) == 4);  // exp, (add), sum, softmax: exp escapes to softmax
  }
}

TEST_CASE("kernel counts: a matmul's epilogue (bias, activation, residual) joins it in one kernel") {
  // [3, 70, 48] x [48, 200]: 210 rows in blocks of 81 (two, then 48 rows), N not a multiple of the
  // 512-element chunk; the residual reads another input; the result is checked in double.
  esg::GraphBuilder b("epilogue");
  const Tensor x = b.input("x", esg::f32, {3, 70, 48}), w = b.input("w", esg::f32, {48, 200});
  const Tensor bias = b.input("bias", esg::f32, {200}), r = b.input("r", esg::f32, {3, 70, 200});
  const Tensor y = esg::relu(esg::matmul(x, w) + bias) + r;
  const esg::Graph g = b.build({y});
  CHECK(kernels(g) == 1);
  CHECK(kernels(g, esg::CompileOptions().fusion(false)) == 4);
  std::vector<float> xs(3 * 70 * 48), ws(48 * 200), bs(200), rs(3 * 70 * 200);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(static_cast<float>(i) * 0.37f);
  for (size_t i = 0; i < ws.size(); ++i) ws[i] = std::cos(static_cast<float>(i) * 0.11f) * 0.2f;
  for (size_t i = 0; i < bs.size(); ++i) bs[i] = std::sin(static_cast<float>(i)) * 0.5f;
  for (size_t i = 0; i < rs.size(); ++i) rs[i] = std::cos(static_cast<float>(i) * 0.01f);
  const std::vector<HostTensor> in{HostTensor::from(esg::f32, xs, {3, 70, 48}), HostTensor::from(esg::f32, ws, {48, 200}),
                                   HostTensor::from(esg::f32, bs, {200}), HostTensor::from(esg::f32, rs, {3, 70, 200})};
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    const std::vector<float> got = esg::compile(g, esg::CompileOptions().threads(threads)).run(in)[0].values<float>();
    double worst = 0;
    for (size_t row = 0; row < 210; ++row)
      for (size_t col = 0; col < 200; ++col) {
        double acc = bs[col];
        for (size_t k = 0; k < 48; ++k) acc += static_cast<double>(xs[row * 48 + k]) * ws[k * 200 + col];
        const double want = std::max(acc, 0.0) + rs[row * 200 + col];
        worst = std::max(worst, std::fabs(got[row * 200 + col] - want) / (1 + std::fabs(want)));
      }
    CHECK(worst < 1e-5);
  }
  // The head reads B whole for every block of rows: B must not be overwritten in place by the
  // group's output even where it dies there and has the output's shape (two blocks of 64 rows).
  {
    esg::GraphBuilder b3("b in place");
    const Tensor p = b3.input("p", esg::f32, {128, 128}), v_in = b3.input("v", esg::f32, {128, 256});
    const Tensor y3 = esg::matmul(p, esg::relu(v_in)) * 2.0f;
    const esg::Graph g3 = b3.build({esg::matmul(p, y3)});
    std::vector<float> ps(128 * 128), vs(128 * 256);
    for (size_t i = 0; i < ps.size(); ++i) ps[i] = std::sin(static_cast<float>(i) * 0.7f) * 0.1f;
    for (size_t i = 0; i < vs.size(); ++i) vs[i] = std::cos(static_cast<float>(i) * 0.3f);
    const std::vector<HostTensor> in3{HostTensor::from(esg::f32, ps, {128, 128}), HostTensor::from(esg::f32, vs, {128, 256})};
    const std::vector<float> fused = esg::compile(g3).run(in3)[0].values<float>();
    const std::vector<float> plain = esg::compile(g3, esg::CompileOptions().fusion(false)).run(in3)[0].values<float>();
    double worst = 0;
    for (size_t i = 0; i < fused.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(fused[i]) - plain[i]) / (1 + std::fabs(plain[i])));
    CHECK(worst < 1e-5);
  }
  // A matmul whose result is also used elsewhere stays a kernel of its own.
  esg::GraphBuilder b2("shared");
  const Tensor x2 = b2.input("x", esg::f32, {8, 8});
  const Tensor m = esg::matmul(x2, x2);
  CHECK(kernels(b2.build({esg::relu(m + 1.0f), m})) == 2);
}

TEST_CASE("kernel counts: a convolution's epilogue (bias, per-channel affine, activation, residual) joins it") {
  // Three images of 7 x 20 x 20 results: several 512-element chunks per image, a per-channel
  // scale broadcast over each image's rows; checked against a direct convolution in double.
  esg::GraphBuilder b("conv epilogue");
  const Tensor x = b.input("x", esg::f32, {3, 5, 20, 20}), w = b.input("w", esg::f32, {7, 5, 3, 3});
  const Tensor bias = b.input("bias", esg::f32, {7}), scale = b.input("scale", esg::f32, {7, 1, 1});
  const Tensor r = b.input("r", esg::f32, {3, 7, 20, 20});
  const Tensor conv = esg::conv2d(x, w, esg::Conv2dOptions().bias(bias).pads({1, 1, 1, 1}));
  const esg::Graph g = b.build({esg::relu(conv * scale + 0.25f) + r});
  CHECK(kernels(g) == 1);
  // Unfused and row-major (blocked, the [7, 1, 1] scale would need the convolution's result reordered).
  CHECK(kernels(g, esg::CompileOptions().fusion(false).backend_option("channel_block", 0)) == 5);
  std::vector<float> xs(3 * 5 * 400), ws(7 * 5 * 9), bs(7), ss(7), rs(3 * 7 * 400);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(static_cast<float>(i) * 0.37f);
  for (size_t i = 0; i < ws.size(); ++i) ws[i] = std::cos(static_cast<float>(i) * 0.11f) * 0.2f;
  for (size_t i = 0; i < bs.size(); ++i) bs[i] = std::sin(static_cast<float>(i)) * 0.5f, ss[i] = 0.5f + static_cast<float>(i) * 0.1f;
  for (size_t i = 0; i < rs.size(); ++i) rs[i] = std::cos(static_cast<float>(i) * 0.01f);
  const std::vector<HostTensor> in{HostTensor::from(esg::f32, xs, {3, 5, 20, 20}), HostTensor::from(esg::f32, ws, {7, 5, 3, 3}),
                                   HostTensor::from(esg::f32, bs, {7}), HostTensor::from(esg::f32, ss, {7, 1, 1}),
                                   HostTensor::from(esg::f32, rs, {3, 7, 20, 20})};
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    const std::vector<float> got = esg::compile(g, esg::CompileOptions().threads(threads)).run(in)[0].values<float>();
    double worst = 0;
    for (int n = 0; n < 3; ++n)
      for (int o = 0; o < 7; ++o)
        for (int i = 0; i < 20; ++i)
          for (int j = 0; j < 20; ++j) {
            double acc = bs[o];
            for (int c = 0; c < 5; ++c)
              for (int kh = 0; kh < 3; ++kh)
                for (int kw = 0; kw < 3; ++kw) {
                  const int ih = i + kh - 1, iw = j + kw - 1;
                  if (ih >= 0 && ih < 20 && iw >= 0 && iw < 20)
                    acc += static_cast<double>(xs[((n * 5 + c) * 20 + ih) * 20 + iw]) * ws[((o * 5 + c) * 3 + kh) * 3 + kw];
                }
            const size_t at = ((static_cast<size_t>(n) * 7 + o) * 20 + i) * 20 + j;
            const double want = std::max(acc * ss[o] + 0.25, 0.0) + rs[at];
            worst = std::max(worst, std::fabs(got[at] - want) / (1 + std::fabs(want)));
          }
    CHECK(worst < 1e-5);
  }
}

TEST_CASE("fused and unfused runs give the same bytes") {
  esg::GraphBuilder b;
  const Tensor x = b.input("x", esg::f32, {33, 17}), w = b.input("w", esg::f32, {17});
  const Tensor i = b.input("i", esg::i32, {33, 1});
  const Tensor y = esg::sigmoid(x * w - 0.25f) * esg::cast(esg::abs(i * 3 - 7), esg::f32) + esg::exp(-x);
  const esg::Graph g = b.build({y, esg::maximum(i, i * i - 5)});
  std::vector<float> xs(33 * 17), ws(17);
  std::vector<int32_t> is(33);
  for (size_t k = 0; k < xs.size(); ++k) xs[k] = std::sin(static_cast<float>(k)) * 2;
  for (size_t k = 0; k < ws.size(); ++k) ws[k] = std::cos(static_cast<float>(k));
  for (size_t k = 0; k < is.size(); ++k) is[k] = static_cast<int32_t>(k) - 16;
  const std::vector<HostTensor> in{HostTensor::from(esg::f32, xs, {33, 17}), HostTensor::from(esg::f32, ws, {17}),
                                   HostTensor::from(esg::i32, is, {33, 1})};
  const auto fused = esg::compile(g).run(in);
  const auto plain = esg::compile(g, esg::CompileOptions().fusion(false)).run(in);
  CHECK(fused[0].values<float>() == plain[0].values<float>());
  CHECK(fused[1].values<int32_t>() == plain[1].values<int32_t>());
  CHECK(kernels(g) < kernels(g, esg::CompileOptions().fusion(false)));
}

TEST_CASE("profiling writes a Chrome trace with one event per kernel") {
  const esg::Model m = esg::compile(mlp(false));
  const std::string path = "esg_profile_test.json";
  const auto outs = m.profile({HostTensor::from(esg::f32, std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3})}, path);
  CHECK(outs[0].values<float>() == std::vector<float>{4.5f, 0, 10.5f, 0});
  std::ifstream f(path);
  const std::string json((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CHECK(json.rfind("{\"traceEvents\": [", 0) == 0);
  CHECK(json.find("\"name\": \"fused matmul add relu\"") != std::string::npos);
  CHECK(json.find("\"ph\": \"X\"") != std::string::npos);
  std::remove(path.c_str());
  CHECK_THROWS_AS(m.profile({HostTensor::from(esg::f32, std::vector<float>(6), {2, 3})}, "/nonexistent/dir/t.json"), esg::IoError);
}

TEST_CASE("the compiled graph exports as DOT with its fused groups") {
  const esg::Model m = esg::compile(mlp(false));
  const std::string dot = m.to_dot();
  CHECK(dot.rfind("digraph \"mlp (compiled)\"", 0) == 0);
  CHECK(dot.find("fused\\nmatmul\\nadd\\nrelu") != std::string::npos);
  const std::string unfused = esg::compile(mlp(false), esg::CompileOptions().fusion(false)).to_dot();
  CHECK(unfused.find("matmul (oneDNN ") != std::string::npos);
  CHECK(unfused.find("k0 -> k1") != std::string::npos);
  CHECK(esg::compile(mlp(true)).to_dot().empty());  // no plan before the first run binds the batch
}

TEST_CASE("kernels split over threads give the bytes of one thread, also from concurrent runs") {
  // 300 x 700 elements: the fused and the unfused elementwise kernels split their work; the
  // column operand [300, 1] and the row operand [700] are read through their broadcast layouts.
  esg::GraphBuilder b("split");
  const Tensor x = b.input("x", esg::f32, {300, 700}), col = b.input("col", esg::f32, {300, 1}), row = b.input("row", esg::f32, {700});
  const Tensor y = esg::sigmoid(x * row - col) + esg::tanh(x) * 0.5f;
  const esg::Graph g = b.build({y, esg::greater(x, col)});
  std::vector<float> xs(300 * 700), cs(300), rs(700);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(static_cast<float>(i) * 0.01f) * 3;
  for (size_t i = 0; i < cs.size(); ++i) cs[i] = std::cos(static_cast<float>(i));
  for (size_t i = 0; i < rs.size(); ++i) rs[i] = std::sin(static_cast<float>(i) * 0.3f);
  const std::vector<HostTensor> in{HostTensor::from(esg::f32, xs, {300, 700}), HostTensor::from(esg::f32, cs, {300, 1}),
                                   HostTensor::from(esg::f32, rs, {700})};
  for (bool fusion : {true, false}) {
    CAPTURE(fusion);
    const auto want = esg::compile(g, esg::CompileOptions().fusion(fusion).threads(1)).run(in);
    const esg::Model m = esg::compile(g, esg::CompileOptions().fusion(fusion).threads(2));
    std::vector<std::thread> threads;
    std::vector<int> ok(3, 0);
    for (int t = 0; t < 3; ++t)
      threads.emplace_back([&, t] {
        for (int r = 0; r < 4; ++r) {
          const auto got = m.run(in);
          ok[static_cast<size_t>(t)] += got[0].values<float>() == want[0].values<float>() && got[1].values<uint8_t>() == want[1].values<uint8_t>();
        }
      });
    for (auto& t : threads) t.join();
    CHECK(ok == std::vector<int>{4, 4, 4});
  }
}

TEST_CASE("streams run on their own threads and give the bytes of one stream, also from concurrent runs") {
  // Four independent branches (matmuls and elementwise ops), joined at the end.
  esg::GraphBuilder b("branches");
  const Tensor x = b.input("x", esg::f32, {64, 64});
  Tensor sum;
  for (int branch = 0; branch < 4; ++branch) {
    Tensor y = x * static_cast<float>(branch + 1);
    for (int i = 0; i < 4; ++i) y = esg::tanh(esg::matmul(y, x) * 0.01f) + x;
    sum = branch == 0 ? y : sum + y;
  }
  const esg::Graph g = b.build({sum});
  std::vector<float> xs(64 * 64);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(static_cast<float>(i) * 0.1f);
  const std::vector<HostTensor> in{HostTensor::from(esg::f32, xs, {64, 64})};
  const std::vector<float> want = esg::compile(g).run(in)[0].values<float>();
  for (int streams : {2, 4}) {
    CAPTURE(streams);
    const esg::Model m = esg::compile(g, esg::CompileOptions().streams(streams).threads(streams));
    CHECK(m.stats().streams == streams);
    std::vector<std::thread> callers;
    std::vector<int> ok(2, 0);
    for (int t = 0; t < 2; ++t)  // one run takes the pool; a concurrent one runs in order
      callers.emplace_back([&, t] {
        for (int r = 0; r < 10; ++r) ok[static_cast<size_t>(t)] += m.run(in)[0].values<float>() == want;
      });
    for (auto& c : callers) c.join();
    CHECK(ok == std::vector<int>{10, 10});
  }
}

TEST_CASE("a kernel failing inside a stream stops the run with its error; the model stays usable") {
  // Two branches on two streams; one gathers with an index from the caller.
  esg::GraphBuilder b("failing");
  const Tensor x = b.input("x", esg::f32, {64, 64}), i = b.input("i", esg::i64, {4});
  const Tensor left = esg::tanh(esg::matmul(x, x)) * 2.0f;
  const Tensor right = esg::gather(esg::relu(x) + 1.0f, i);
  const esg::Model m = esg::compile(b.build({left, right}), esg::CompileOptions().streams(2).threads(2));
  const HostTensor xs = HostTensor::from(esg::f32, std::vector<float>(64 * 64, 0.5f), {64, 64});
  for (int r = 0; r < 3; ++r) {
    CHECK_THROWS_WITH_AS(m.run({xs, HostTensor::from(esg::i64, std::vector<int64_t>{0, 1, 99, 2}, {4})}),
                         doctest::Contains("out of range"), esg::Error);
    const auto ok = m.run({xs, HostTensor::from(esg::i64, std::vector<int64_t>{0, 1, 63, 2}, {4})});
    CHECK(ok[1].values<float>()[0] == 1.5f);
  }
}

namespace {
// scores[0, h, i, j] = sum_d q[0, h, i, d] * k[0, j, h, d] for q [1, 2, 3, 4] and k [1, 5, 2, 4]:
// attention scores with K in [batch, length, heads, depth] order, as exporters write them.
std::vector<float> attention_scores(const std::vector<float>& q, const std::vector<float>& k) {
  std::vector<float> s(30, 0.0f);
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 5; ++j)
        for (int d = 0; d < 4; ++d)
          s[static_cast<size_t>(h * 15 + i * 5 + j)] += q[static_cast<size_t>(h * 12 + i * 4 + d)] * k[static_cast<size_t>(j * 8 + h * 4 + d)];
  return s;
}
}  // namespace

TEST_CASE("simplification: a transposed matmul operand becomes a flag, x**2 a multiply; trailing reductions have CPU kernels") {
  // q [2,3,4] times k^T where k arrives as [2,4,3] transposed by {0,2,1}: one kernel, the GEMM
  // reading k in place.
  esg::GraphBuilder b;
  const Tensor q = b.input("q", esg::f32, {2, 3, 4}), k = b.input("k", esg::f32, {2, 5, 4});
  const Tensor y = esg::matmul(q, esg::transpose(k, esg::TransposeOptions().perm({0, 2, 1})));
  // [N, L, H, D] -> {0, 2, 3, 1} is the K^T of exported attention: a row-moving transpose remains.
  const Tensor k4 = b.input("k4", esg::f32, {1, 5, 2, 4}), q4 = b.input("q4", esg::f32, {1, 2, 3, 4});
  const Tensor scores = esg::matmul(q4, esg::transpose(k4, esg::TransposeOptions().perm({0, 2, 3, 1})));
  const Tensor sq = esg::pow(q, b.constant({2.0f}, {}));
  const Tensor mean_last = esg::reduce_mean(k, esg::ReduceMeanOptions().axes({-1}).keepdims(true));
  const Tensor sum_two = esg::reduce_sum(k4, esg::ReduceSumOptions().axes({3, 2}));
  const esg::Graph g = b.build({y, scores, sq, mean_last, sum_two});
  const esg::Model m = esg::compile(g);
  const esg::Facts facts = m.facts();
  for (const esg::Facts& group : facts.rows("groups")) CHECK(group.text("ops").find("pow") == std::string::npos);
  CHECK(facts.rows("reference_ops").empty());  // k4's row shuffle is the one transpose left: fast
  CHECK(m.stats().reference_kernels == 0);

  std::vector<float> qv(24), kv(40), k4v(40), q4v(24);
  for (size_t i = 0; i < qv.size(); ++i) qv[i] = static_cast<float>(i % 7) - 3, q4v[i] = static_cast<float>(i % 5) - 2;
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = static_cast<float>(i % 9) - 4, k4v[i] = static_cast<float>(i % 4) - 1;
  const auto out = m.run({HostTensor::from(esg::f32, qv, {2, 3, 4}), HostTensor::from(esg::f32, kv, {2, 5, 4}),
                          HostTensor::from(esg::f32, k4v, {1, 5, 2, 4}), HostTensor::from(esg::f32, q4v, {1, 2, 3, 4})});
  const std::vector<float> yv = out[0].values<float>(), sv = out[1].values<float>(), sqv = out[2].values<float>(),
                           mv = out[3].values<float>(), tv = out[4].values<float>();
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 5; ++j) {
        float want = 0;
        for (int d = 0; d < 4; ++d) want += qv[static_cast<size_t>(n * 12 + i * 4 + d)] * kv[static_cast<size_t>(n * 20 + j * 4 + d)];
        CHECK(yv[static_cast<size_t>(n * 15 + i * 5 + j)] == want);
      }
  CHECK(sv == attention_scores(q4v, k4v));
  for (size_t i = 0; i < qv.size(); ++i) CHECK(sqv[i] == qv[i] * qv[i]);
  for (size_t r = 0; r < 10; ++r)
    CHECK(mv[r] == doctest::Approx((kv[r * 4] + kv[r * 4 + 1] + kv[r * 4 + 2] + kv[r * 4 + 3]) / 4));
  for (size_t r = 0; r < 5; ++r) {
    float want = 0;
    for (size_t j = 0; j < 8; ++j) want += k4v[r * 8 + j];
    CHECK(tv[r] == want);
  }
}

TEST_CASE("simplification: a transpose read elsewhere too is not split into a second, partial copy") {
  esg::GraphBuilder b;
  const Tensor k4 = b.input("k4", esg::f32, {1, 5, 2, 4}), q4 = b.input("q4", esg::f32, {1, 2, 3, 4});
  const Tensor kt = esg::transpose(k4, esg::TransposeOptions().perm({0, 2, 3, 1}));
  const esg::Model m = esg::compile(b.build({esg::matmul(q4, kt), kt}));
  CHECK(m.stats().launches == 2);  // the transpose, once, and the product reading it
  CHECK(m.stats().fast_kernels == 2);
  std::vector<float> kv(40), qv(24);
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = static_cast<float>(i % 4) - 1;
  for (size_t i = 0; i < qv.size(); ++i) qv[i] = static_cast<float>(i % 5) - 2;
  const auto out = m.run({HostTensor::from(esg::f32, kv, {1, 5, 2, 4}), HostTensor::from(esg::f32, qv, {1, 2, 3, 4})});
  CHECK(out[0].values<float>() == attention_scores(qv, kv));
}

TEST_CASE("simplification: a transpose that moves only size-1 axes is a reshape, merged with the reshape before it") {
  esg::GraphBuilder b;
  const Tensor x = b.input("x", esg::f32, {1, 1, 8});
  // How attention splits the heads of one token: [1,1,8] -> [1,1,2,4] -> [1,2,1,4].
  const Tensor heads = esg::transpose(esg::reshape(x, {1, 1, 2, 4}), esg::TransposeOptions().perm({0, 2, 1, 3}));
  // A transpose that reorders two axes longer than 1 moves elements and stays.
  const Tensor swapped = esg::transpose(esg::reshape(x, {2, 4}), esg::TransposeOptions().perm({1, 0}));
  const esg::Model m = esg::compile(b.build({heads, swapped}));
  // The first reshape is an output (a copy into the caller's buffer); the second is a view of x.
  const esg::Facts facts = m.facts();
  const std::vector<esg::Facts> slow = facts.rows("reference_ops");
  REQUIRE(slow.size() == 1);
  CHECK(slow[0].text("op") == "reshape");
  CHECK(slow[0].number("count") == 1);
  CHECK(facts.number("launches") == 2);  // the reshape into the output, the transpose
  CHECK(facts.number("views") == 1);
  std::vector<float> xv(8);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i);
  const auto out = m.run({HostTensor::from(esg::f32, xv, {1, 1, 8})});
  CHECK(out[0].shape() == std::vector<int64_t>{1, 2, 1, 4});
  CHECK(out[0].values<float>() == xv);  // the same elements in the same order
  CHECK(out[1].values<float>() == std::vector<float>{0, 4, 1, 5, 2, 6, 3, 7});
}

TEST_CASE("blocked channels: pools and the elementwise chain between them stay blocked, reordered at the ends only") {
  esg::GraphBuilder b("pools");
  const Tensor x = b.input("x", esg::f32, {2, 12, 9, 9});  // 12 channels: the second block of 8 is half padding
  Tensor y = esg::max_pool2d(x, {2, 2}, esg::MaxPool2dOptions().strides({2, 2}));
  y = esg::relu(y * b.constant({0.5f}, {}) - b.constant({0.25f}, {}));
  y = esg::avg_pool2d(y, {3, 3}, esg::AvgPool2dOptions().pads({1, 1, 1, 1}));
  const Tensor z = esg::max_pool2d(esg::tanh(y), {2, 2});
  std::vector<float> xv(2 * 12 * 9 * 9);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>((i * 37) % 101) / 25.0f - 2.0f;
  const std::vector<HostTensor> in = {HostTensor::from(esg::f32, xv, {2, 12, 9, 9})};
  const esg::Graph chain = b.build({z});
  const esg::Model plain = esg::compile(chain, esg::CompileOptions().backend_option("channel_block", 0));
  const std::vector<float> want = plain.run(in)[0].values<float>();
  for (int block : {8, 16}) {
    CAPTURE(block);
    const esg::Model blocked = esg::compile(chain, esg::CompileOptions().backend_option("channel_block", block));
    const esg_model_stats s = blocked.stats();
    CHECK(s.reorders == 2);  // into the blocked format before the first pool, back for the output
    CHECK(s.launches == plain.stats().launches + 2);
    CHECK(s.lower_bound_bytes > plain.stats().lower_bound_bytes);  // 12 channels held as 16
    CHECK(blocked.run(in)[0].values<float>() == want);  // the same math on every element, bit for bit
    const std::vector<esg::Facts> formats = blocked.facts().rows("blocked_values");
    REQUIRE(formats.size() == 1);
    CHECK(formats[0].text("format") == (block == 8 ? "nChw8c" : "nChw16c"));
  }
  CHECK(plain.stats().reorders == 0);
  CHECK_THROWS_AS(esg::compile(chain, esg::CompileOptions().backend_option("channel_block", 12)), esg::InvalidArgumentError);
  CHECK_THROWS_AS(esg::compile(chain, esg::CompileOptions().backend_option("channel_block", 32)), esg::InvalidArgumentError);
}

TEST_CASE("blocked channels: row-major readers of a blocked value share one reorder") {
  esg::GraphBuilder b("readers");
  const Tensor x = b.input("x", esg::f32, {1, 5, 6, 6});
  const Tensor p = esg::max_pool2d(x, {2, 2}, esg::MaxPool2dOptions().strides({2, 2}));
  const Tensor e = esg::exp(p);
  // e is an output (row-major for the caller), read by a softmax over the channels (a row-major
  // kernel) and by another pool (blocked): the softmax reads the output's row-major copy.
  const esg::Graph g = b.build({e, esg::softmax(e, esg::SoftmaxOptions().axis(1)), esg::avg_pool2d(e, {3, 3})});
  std::vector<float> xv(5 * 36);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = std::sin(static_cast<float>(i));
  const std::vector<HostTensor> in = {HostTensor::from(esg::f32, xv, {1, 5, 6, 6})};
  const esg::Model blocked = esg::compile(g, esg::CompileOptions().backend_option("channel_block", 8));
  CHECK(blocked.stats().reorders == 3);  // x in; e out (the softmax reads it there); the last pool's result out
  const auto got = blocked.run(in), want = esg::compile(g).run(in);
  for (size_t o = 0; o < 3; ++o) CHECK(got[o].values<float>() == want[o].values<float>());
}

TEST_CASE("host tensors take and give their dtype's own element type only: nothing is reinterpreted") {
  CHECK_THROWS_WITH_AS(HostTensor::from(esg::f32, std::vector<int32_t>{1, 2}, {2}),
                       "HostTensor::from: int32_t elements for a tensor of f32", esg::DTypeError);
  CHECK_THROWS_AS(HostTensor::from(esg::i64, std::vector<double>{1, 2}, {2}), esg::DTypeError);
  CHECK_THROWS_WITH_AS(HostTensor::from(esg::f32, std::vector<float>{1, 2, 3}, {2}),
                       "HostTensor::from: 3 values for a shape of 2 elements", esg::InvalidArgumentError);
  const HostTensor x = HostTensor::from(esg::f32, std::vector<float>{1.5f, -2}, {2});
  CHECK_THROWS_WITH_AS(x.values<double>(), "HostTensor::values: double elements for a tensor of f32", esg::DTypeError);
  CHECK_THROWS_AS(x.values<int32_t>(), esg::DTypeError);
  CHECK(x.values<float>() == std::vector<float>{1.5f, -2});
  HostTensor h(esg::f16, {2});
  CHECK(h.data<uint16_t>() != nullptr);  // 16-bit floats as their bit patterns
  CHECK_THROWS_AS(h.data<float>(), esg::DTypeError);
  CHECK(HostTensor::from(esg::boolean, std::vector<uint8_t>{1, 0}, {2}).values<bool>() == std::vector<bool>{true, false});
  CHECK(HostTensor::from(esg::u8, std::vector<uint8_t>{7}, {1}).values<uint8_t>() == std::vector<uint8_t>{7});
  // A model refuses buffers of another dtype, as the C API does.
  esg::GraphBuilder b("neg");
  const esg::Model m = esg::compile(b.build({esg::neg(b.input("x", esg::f32, {2}))}));
  CHECK_THROWS_AS(m.run({HostTensor::from(esg::f64, std::vector<double>{1, 2}, {2})}), esg::DTypeError);
}

TEST_CASE("precision bf16: convolutions multiply bfloat16, within its rounding of f32; unknown precisions are refused") {
  esg::GraphBuilder b("conv");
  const Tensor x = b.input("x", esg::f32, {1, 16, 12, 12});
  std::vector<float> w(32 * 16 * 9);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(static_cast<float>(i) * 0.7f) * 0.1f;
  const esg::Graph g = b.build({esg::relu(esg::conv2d(x, b.constant(w, {32, 16, 3, 3}), esg::Conv2dOptions().pads({1, 1, 1, 1})))});
  CHECK_THROWS_WITH_AS(esg::compile(g, esg::CompileOptions().precision("f16")), doctest::Contains("precision 'f16'"),
                       esg::InvalidArgumentError);
  if (!__builtin_cpu_supports("avx512bf16")) {
    CHECK_THROWS_AS(esg::compile(g, esg::CompileOptions().precision("bf16")), esg::UnsupportedError);
    return;
  }
  std::vector<float> xs(16 * 144);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::cos(static_cast<float>(i) * 0.3f);
  const std::vector<HostTensor> in{HostTensor::from(esg::f32, xs, {1, 16, 12, 12})};
  const esg::Model exact = esg::compile(g), rounded = esg::compile(g, esg::CompileOptions().precision("bf16"));
  const std::vector<float> a = exact.run(in)[0].values<float>(), r = rounded.run(in)[0].values<float>();
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - r[i]));
  CHECK(worst > 0);  // rounded, not f32
  // Each of 144 products of |x| <= 1 and |w| <= 0.1, both rounded to 8 bits: at most 2·2^-8 of 0.1 off.
  CHECK(worst <= 144 * 2 * 0.1f / 256);
  const std::vector<esg::Facts> convolutions = rounded.facts().rows("onednn_convolutions");
  REQUIRE(convolutions.size() == 1);
  CHECK(convolutions[0].text("precision") == "bf16");
  CHECK(exact.facts().rows("onednn_convolutions").at(0).text("precision") == "f32");
}
