// Compiling and running graphs through the C++ API: values, stats and facts, symbolic sizes,
// options, errors at run time, profiles and DOT, the backends by name, the simulated Ascend.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>

#include <esgraph/ascend_check.hpp>
#include <esgraph/esgraph.hpp>

#include "api_graphs.hpp"

using api_test::mlp;
using api_test::run_mlp;
using api_test::seq;
using esg::HostTensor;
using esg::Tensor;

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
  CHECK(check.cases.size() == 12);
  CHECK(check.device.find("(Ascend910B1), CANN 8.5.0, AscendCL") != std::string::npos);
  const std::string table = check.table();
  CHECK(table.find("12 of 12 passed") != std::string::npos);
  CHECK(table.find("pass     two streams, captured (aclmdlRI)") != std::string::npos);
  // On an SoC the kernels do not target, the kernel cases are refused by name and the library's
  // pass: a partial pass.
  setenv("ACLSIM_SOC", "Ascend310P3", 1);
  const esg::AscendCheck other = esg::ascend_check("ascend-sim");
  unsetenv("ACLSIM_SOC");
  CHECK_FALSE(other.passed());
  CHECK(other.partial());
  CHECK(other.cases.at(0).refused);
  CHECK(other.table().find("refused  elementwise kernel, f32") != std::string::npos);
  CHECK(other.table().find("esgraph builds no kernels for dav-m200 (Ascend310P)") != std::string::npos);
  CHECK(other.table().find("pass     matmul (aclnnMatmul)") != std::string::npos);
  // 310P multiplies f32 in FLOAT16: its product is bounded as such.
  for (const esg::AscendCheckCase& c : other.cases)
    if (c.name == "matmul (aclnnMatmul)") CHECK(c.tolerance == 5e-2);
  setenv("ESG_ASCEND_SIM_LIBRARY", "/nonexistent/libascendcl.so", 1);
  CHECK_THROWS_WITH_AS(esg::ascend_check("ascend-sim"), doctest::Contains("cannot load AscendCL"), esg::BackendError);
  unsetenv("ESG_ASCEND_SIM_LIBRARY");
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
  // The product on its primitive: oneDNN's, or our packed GEMM where oneDNN has only its gemm.
  CHECK((unfused.find("matmul (oneDNN ") != std::string::npos || unfused.find("matmul (esgraph packed:avx2)") != std::string::npos));
  CHECK(unfused.find("k0 -> k1") != std::string::npos);
  CHECK(esg::compile(mlp(true)).to_dot().empty());  // no plan before the first run binds the batch
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

namespace {
int in_place_released = 0;
void count_in_place_release(void*) { ++in_place_released; }
}  // namespace

TEST_CASE("weights given in place are read where they lie, and released once the last model is gone") {
  // Products of 8 rows with [96, 200] weights, as given and transposed: oneDNN's kernel reads
  // plain weights in place (gemm's, without AVX-512) or packs them (brgemm's); either way the
  // results are numpy's, and the caller's memory is released once.
  const int64_t k = 96, n = 200, rows = 8;
  std::vector<float> w(static_cast<size_t>(k * n)), x(static_cast<size_t>(rows * k));
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(static_cast<int>(i * 7 % 13) - 6) / 8;
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i * 5 % 11) - 5) / 4;
  for (const bool transposed : {false, true}) {
    CAPTURE(transposed);
    in_place_released = 0;
    std::optional<esg::Model> m;
    {
      esg::GraphBuilder b("in_place");
      const Tensor in = b.input("x", esg::f32, {rows, k});
      const std::vector<int64_t> shape = transposed ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n};
      const Tensor weights = b.constant_in_place(esg::f32, shape, w.data(), w.size() * sizeof(float), count_in_place_release);
      m.emplace(esg::compile(b.build({esg::matmul(in, weights, esg::MatmulOptions().transpose_b(transposed))})));
    }
    CHECK(in_place_released == 0);
    const std::vector<float> got = m->run({HostTensor::from(esg::f32, x, {rows, k})})[0].values<float>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < n; ++c) {
        double want = 0;
        for (int64_t i = 0; i < k; ++i)
          want += double(x[static_cast<size_t>(r * k + i)]) * w[static_cast<size_t>(transposed ? c * k + i : i * n + c)];
        REQUIRE(got[static_cast<size_t>(r * n + c)] == doctest::Approx(want).epsilon(1e-5));
      }
    const esg::Facts facts = m->facts();
    CHECK(facts.number("weights_in_place") + facts.number("weights_packed") >= 1);
    m.reset();
    CHECK(in_place_released == 1);
  }
  esg::GraphBuilder b("refused");
  in_place_released = 0;
  CHECK_THROWS_WITH_AS(b.constant_in_place(esg::f32, {2}, reinterpret_cast<const char*>(w.data()) + 2, 8, count_in_place_release),
                       doctest::Contains("not aligned to its 4-byte f32 elements"), esg::InvalidArgumentError);
  CHECK(in_place_released == 1);
}
