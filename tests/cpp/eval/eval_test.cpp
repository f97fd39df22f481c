// The reference evaluator beyond single ops: symbolic shapes bound at run time, control flow,
// and bad inputs.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "eval/evaluate.hpp"
#include "ir/cut.hpp"
#include "ir/builder.hpp"
#include "ir/serialize.hpp"
#include "ir/error.hpp"
#include "ir/ops.gen.hpp"
#include "ir_build.hpp"

using namespace esg;

namespace {
eval::HostTensor f32(const ir::Shape& s, std::vector<float> v) {
  eval::HostTensor t(ir::DType::F32, s);
  for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = v[i];
  return t;
}
}  // namespace

TEST_CASE("a graph with a symbolic batch runs with any batch") {
  ir::Builder b;
  const ir::Dim batch = ir::symbol_dim(b.graph().symbol("B"));
  const ir::ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{batch, 2});
  const ir::ValueId in[] = {x, x};
  const ir::NodeId add = b.add_op(ir::ops::add, {in, 2}, {});
  const ir::ValueId out[] = {b.graph().nodes[add].first_output};
  const auto g = b.finish({out, 1});
  for (int64_t n : {1, 3}) {
    std::vector<float> v(static_cast<size_t>(2 * n), 1.5f);
    const auto y = eval::evaluate(*g, {f32(ir::Shape{n, 2}, v)});
    CHECK(y[0].shape == ir::Shape{n, 2});
    CHECK(y[0].data<float>()[0] == 3.0f);
  }
  CHECK_THROWS_AS(eval::evaluate(*g, {f32(ir::Shape{2, 3}, std::vector<float>(6))}), ir::Error);
  CHECK_THROWS_AS(eval::evaluate(*g, {}), ir::Error);
}

TEST_CASE("while loops run their body until the condition fails") {
  ir::Builder b;
  const ir::ValueId i0 = b.add_input("i", ir::DType::I64, ir::Shape{});
  const ir::ValueId acc = b.add_input("acc", ir::DType::F32, ir::Shape{2});
  const int64_t three = 3;
  const ir::ValueId limit = b.add_constant(ir::DType::I64, ir::Shape{}, &three, 8);
  const int64_t one = 1;
  const ir::ValueId inc = b.add_constant(ir::DType::I64, ir::Shape{}, &one, 8);
  const ir::ValueId init[] = {i0, acc};
  b.begin_region({init, 2});
  const ir::ValueId lt_in[] = {b.region_params()[0], limit};
  const ir::ValueId c = b.graph().nodes[b.add_op(ir::ops::less, {lt_in, 2}, {})].first_output;
  const ir::RegionId cond = b.end_region({&c, 1});
  b.begin_region({init, 2});
  const ir::ValueId p0 = b.region_params()[0], p1 = b.region_params()[1];
  const ir::ValueId add_in[] = {p0, inc}, dbl_in[] = {p1, p1};
  const ir::ValueId next[] = {b.graph().nodes[b.add_op(ir::ops::add, {add_in, 2}, {})].first_output,
                              b.graph().nodes[b.add_op(ir::ops::add, {dbl_in, 2}, {})].first_output};
  const ir::RegionId body = b.end_region({next, 2});
  const ir::RegionId bodies[] = {cond, body};
  const ir::NodeId w = b.add_op(ir::ops::while_, {init, 2}, {}, {bodies, 2});
  const ir::ValueId outs[] = {b.graph().nodes[w].first_output, b.graph().nodes[w].first_output + 1};
  const auto g = b.finish({outs, 2});
  eval::HostTensor start(ir::DType::I64, ir::Shape{});
  start.data<int64_t>()[0] = 0;
  const auto y = eval::evaluate(*g, {start, f32(ir::Shape{2}, {1, 2})});
  CHECK(y[0].data<int64_t>()[0] == 3);
  CHECK(y[1].data<float>()[1] == 16.0f);  // doubled three times
}

TEST_CASE("a gather index out of range is an error, not a read out of bounds") {
  ir::Builder b;
  const ir::ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{3});
  const ir::ValueId idx = b.add_input("i", ir::DType::I64, ir::Shape{1});
  const ir::ValueId in[] = {x, idx};
  std::vector<ir::AttrArg> attrs(1);
  const ir::NodeId n = b.add_op(ir::ops::gather, {in, 2}, attrs);
  const ir::ValueId out[] = {b.graph().nodes[n].first_output};
  const auto g = b.finish({out, 1});
  eval::HostTensor bad(ir::DType::I64, ir::Shape{1});
  bad.data<int64_t>()[0] = 7;
  CHECK_THROWS_AS(eval::evaluate(*g, {f32(ir::Shape{3}, {1, 2, 3}), bad}), ir::Error);
}

TEST_CASE("graph files of every release run, with symbolic sizes bound to 2") {
  size_t ran = 0;
  for (const auto& release : std::filesystem::directory_iterator(ESG_COMPAT_DIR)) {
    const std::filesystem::path graphs = release.path() / "graphs";
    if (!std::filesystem::is_directory(graphs)) continue;
    for (const auto& f : std::filesystem::directory_iterator(graphs)) {
      if (f.path().extension() != ".esg") continue;
      CAPTURE(f.path().string());
      const auto g = ir::load(f.path().string());
      std::vector<eval::HostTensor> inputs;
      for (ir::ValueId v : g->inputs()) {
        ir::Shape s = g->shape(v);
        for (size_t d = 0; d < s.rank(); ++d)
          if (ir::dim_is_symbolic(s[d])) s[d] = 2;
        eval::HostTensor t(g->values[v].dtype, s);
        for (int64_t i = 0; i < t.size(); ++i)
          ir::dtype_is_float(t.dtype) ? eval::store_f(t, i, 0.5 * std::sin(static_cast<double>(i))) : eval::store_i(t, i, i % 2);
        inputs.push_back(t);
      }
      const auto outs = eval::evaluate(*g, inputs);
      REQUIRE(outs.size() == g->outputs().size());
      for (size_t k = 0; k < outs.size(); ++k) {
        CHECK(outs[k].dtype == g->values[g->outputs()[k]].dtype);
        for (int64_t i = 0; i < outs[k].size(); ++i) CHECK(std::isfinite(eval::load_f(outs[k], i)));
      }
      ++ran;
    }
  }
  CHECK(ran >= 4);
}

TEST_CASE("a graph with ops sized by data is cut into stages, and evaluated stage by stage") {
  // c = x * 2 (stage 0); nz = nonzero(c) between; p = gather(x, nz[0]) + 2 (stage 1, the
  // constant copied into it); u = unique(p) after it, whose counts are an output.
  ir::Builder b;
  const ir::ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{6});
  const float two_v = 2;
  const ir::ValueId two = b.add_constant(ir::DType::F32, ir::Shape{}, &two_v, 4);
  auto op = [&](const ir::OpSchema& s, std::vector<ir::ValueId> in, std::vector<ir::AttrArg> attrs = {}) {
    attrs.resize(s.attrs.size());
    return b.graph().nodes[b.add_op(s, in, attrs)].first_output;
  };
  const ir::ValueId c = op(ir::ops::mul, {x, two});
  const ir::ValueId nz = op(ir::ops::nonzero, {c});
  ir::AttrArg axes;
  axes.kind = ir::AttrKind::IntList;
  axes.present = true;
  const int64_t zero = 0;
  axes.ints = &zero;
  axes.size = 1;
  const ir::ValueId idx = op(ir::ops::squeeze, {nz}, {axes});
  const ir::ValueId p = op(ir::ops::add, {op(ir::ops::gather, {x, idx}), two});
  const ir::ValueId u = op(ir::ops::unique, {p});
  const ir::ValueId outs[] = {u + 3, nz};  // unique's counts, and the nonzero positions
  const auto g = b.finish({outs, 2});

  const ir::Cut cut = ir::cut_at_sized_by_data(*g);
  REQUIRE(cut.stages.size() == 2);  // unique's counts are an output as they come: no stage after it
  CHECK(cut.stages[0].then_run.size() == 1);
  CHECK(cut.stages[0].inputs == std::vector<ir::ValueId>{x});
  CHECK(cut.stages[0].outputs == std::vector<ir::ValueId>{c});
  REQUIRE(cut.stages[1].graph);
  CHECK(cut.stages[1].inputs == std::vector<ir::ValueId>{nz, x});  // the constant is copied, not passed
  int constants = 0;
  for (ir::NodeId n = 0; n < cut.stages[1].graph->nodes.size(); ++n) constants += cut.stages[1].graph->nodes[n].op == &ir::constant_op();
  CHECK(constants == 1);
  CHECK(cut.stages[1].then_run.size() == 1);

  const auto y = eval::evaluate(*g, {f32(ir::Shape{6}, {3, 0, 1, 3, 0, 7})});
  REQUIRE(y.size() == 2);
  // Non-zero at 0, 2, 3, 5; picked + 2 = [5, 3, 5, 9]; distinct sorted [3, 5, 9], counted [1, 2, 1].
  CHECK(y[0].shape == ir::Shape{3});
  CHECK(std::vector<int64_t>(y[0].data<int64_t>(), y[0].data<int64_t>() + 3) == std::vector<int64_t>{1, 2, 1});
  CHECK(y[1].shape == ir::Shape{1, 4});
  CHECK(std::vector<int64_t>(y[1].data<int64_t>(), y[1].data<int64_t>() + 4) == std::vector<int64_t>{0, 2, 3, 5});
}

TEST_CASE("a constant made under a sized op's control dependency is still copied where it is read") {
  ir::Builder b;
  const ir::ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{3});
  std::vector<ir::AttrArg> none(ir::ops::nonzero.attrs.size());
  const ir::ValueId nz = b.graph().nodes[b.add_op(ir::ops::nonzero, {&x, 1}, none)].first_output;
  b.push_control_deps({&nz, 1});
  const float one = 1;
  const ir::ValueId c = b.add_constant(ir::DType::F32, ir::Shape{}, &one, 4);
  b.pop_control_deps();
  const ir::ValueId in[] = {x, c};
  const ir::ValueId y = b.graph().nodes[b.add_op(ir::ops::add, {in, 2}, {})].first_output;
  const ir::ValueId outs[] = {nz, c, y};
  const auto g = b.finish({outs, 3});
  const auto r = eval::evaluate(*g, {f32(ir::Shape{3}, {0, 2, 0})});
  REQUIRE(r.size() == 3);
  CHECK(r[0].shape == ir::Shape{1, 1});
  CHECK(r[1].data<float>()[0] == 1.0f);
  CHECK(r[2].data<float>()[2] == 1.0f);
}

TEST_CASE("integer arithmetic wraps around at the edges, and the minimum divided by -1 is the minimum") {
  // In the int64 compute domain each of these overflows: undefined behaviour in C++ (UBSan in the
  // asan preset stops on it) and, for the division, a trap that kills the process.
  for (const ir::DType t : {ir::DType::I64, ir::DType::I32}) {
    const bool wide = t == ir::DType::I64;
    const int64_t lo = wide ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int32_t>::min();
    const int64_t hi = wide ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int32_t>::max();
    ir::Builder b;
    const ir::ValueId x = b.add_input("x", t, ir::Shape{4}), y = b.add_input("y", t, ir::Shape{4});
    const ir::ValueId xy[] = {x, y};
    std::vector<ir::ValueId> outs;
    for (const ir::OpSchema* op : {&ir::ops::div, &ir::ops::add, &ir::ops::sub, &ir::ops::mul})
      outs.push_back(b.graph().nodes[b.add_op(*op, {xy, 2}, {})].first_output);
    for (const ir::OpSchema* op : {&ir::ops::neg, &ir::ops::abs}) outs.push_back(b.graph().nodes[b.add_op(*op, {&x, 1}, {})].first_output);
    const auto g = b.finish({outs.data(), outs.size()});
    auto tensor = [&](std::vector<int64_t> v) {
      eval::HostTensor h(t, ir::Shape{4});
      for (size_t i = 0; i < v.size(); ++i)
        if (wide) h.data<int64_t>()[i] = v[i];
        else h.data<int32_t>()[i] = static_cast<int32_t>(v[i]);
      return h;
    };
    // x and y, element by element: lo / -1, hi + 1, lo by 0, lo - 1.
    const auto r = eval::evaluate(*g, {tensor({lo, hi, lo, lo}), tensor({-1, 1, 0, 1})});
    auto at = [&](size_t out, size_t i) { return wide ? r[out].data<int64_t>()[i] : int64_t{r[out].data<int32_t>()[i]}; };
    CHECK(at(0, 0) == lo);  // div: lo / -1 wraps to lo
    CHECK(at(0, 2) == 0);   //      by zero: 0, as numpy
    CHECK(at(1, 1) == lo);  // add: hi + 1
    CHECK(at(2, 3) == hi);  // sub: lo - 1
    CHECK(at(3, 0) == lo);  // mul: lo * -1
    CHECK(at(4, 0) == lo);  // neg: -lo
    CHECK(at(5, 0) == lo);  // abs: |lo|
  }
}

TEST_CASE("integer sums, products and matrix products wrap around too") {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
  ir::Builder b;
  const ir::ValueId x = b.add_input("x", ir::DType::I64, ir::Shape{2}), m = b.add_input("m", ir::DType::I64, ir::Shape{1, 2});
  const int64_t column[] = {2, 1};
  const ir::ValueId outs[] = {test::node(b, ir::ops::reduce_sum, {x}), test::node(b, ir::ops::reduce_prod, {x}),
                              test::node(b, ir::ops::matmul, {m, test::node(b, ir::ops::reshape, {x}, {ir::AttrArg::of_ints(column, 2)})})};
  const auto g = b.finish({outs, 3});
  eval::HostTensor xs(ir::DType::I64, ir::Shape{2}), ms(ir::DType::I64, ir::Shape{1, 2});
  xs.data<int64_t>()[0] = kMax, xs.data<int64_t>()[1] = 2;
  ms.data<int64_t>()[0] = 2, ms.data<int64_t>()[1] = kMax;
  const auto r = eval::evaluate(*g, {xs, ms});
  CHECK(r[0].data<int64_t>()[0] == kMin + 1);  // kMax + 2
  CHECK(r[1].data<int64_t>()[0] == -2);         // kMax * 2
  CHECK(r[2].data<int64_t>()[0] == -4);         // 2 kMax + 2 kMax
}
