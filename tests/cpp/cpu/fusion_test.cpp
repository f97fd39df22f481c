// Fused groups as the CPU runs them: the scalar multiply-adds folded into their neighbours'
// stages, and the tiles a chunk's results go to.
#include <doctest/doctest.h>

#include <cstring>
#include <set>

#include "ir/builder.hpp"
#include "ir/ops.gen.hpp"
#include "ir_build.hpp"
#include "cpu/fused_kernel.hpp"

using namespace esg;
using ir::ValueId;
using test::node;
using test::scalar;

namespace {

// A graph's one group under the CPU's rules, and its CPU kernel (which points at the group).
struct Fused {
  std::unique_ptr<ir::Graph> g;
  std::unique_ptr<runtime::FusedGroup> grp;
  cpu::FusedKernel k;
};

Fused only_group(ir::Builder& b, std::vector<ValueId> outputs) {
  Fused f;
  f.g = b.finish({outputs.data(), outputs.size()});
  auto groups = runtime::find_groups(*f.g, cpu::grouping_rules());
  REQUIRE(groups.size() == 1);
  f.grp = std::make_unique<runtime::FusedGroup>(std::move(groups[0]));
  f.k = cpu::bind_fused_kernel(*f.g, *f.grp);
  REQUIRE(f.k.f32);
  return f;
}

// An independent check of the slots: a step's tile is none of its operands' tiles, and no
// result still to be read (or stored as an output) shares a tile with a later step's result.
void check_slots(const cpu::FusedKernel& k) {
  const auto& steps = k.f32_steps;
  for (size_t si = 0; si < steps.size(); ++si) {
    CHECK(steps[si].slot < k.slots);
    size_t last = steps[si].output >= 0 ? steps.size() : si;
    for (size_t later = si + 1; later < steps.size(); ++later)
      for (const auto& o : steps[later].operands)
        if (o.from == runtime::GroupStep::From::Step && o.index == si) last = later;
    // Live from its step up to and including its last reader: no step in (si, last] may write
    // into the same tile.
    for (size_t w = si + 1; w <= last && w < steps.size(); ++w) CHECK(steps[w].slot != steps[si].slot);
  }
}

}  // namespace

TEST_CASE("fused f32 groups reuse the tiles of results no one reads any more") {
  SUBCASE("a chain of any length needs two tiles") {
    ir::Builder b("chain");
    ValueId v = b.add_input("x", ir::DType::F32, ir::Shape{1000});
    for (int k = 0; k < 20; ++k) v = node(b, k % 2 ? ir::ops::tanh : ir::ops::neg, {v});
    const auto [g, grp, k] = only_group(b, {v});
    CHECK(k.f32_steps.size() == 20);
    CHECK(k.slots == 2);
    check_slots(k);
  }
  SUBCASE("a value read at the end and an early output keep their tiles") {
    ir::Builder b("diamond");
    const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{1000});
    const ValueId a = node(b, ir::ops::mul, {x, scalar(b, 2.0f)});
    const ValueId early = node(b, ir::ops::tanh, {a});
    ValueId v = node(b, ir::ops::sigmoid, {a});
    for (int k = 0; k < 6; ++k) v = node(b, ir::ops::exp, {node(b, ir::ops::neg, {v})});
    const ValueId last = node(b, ir::ops::add, {v, a});
    const auto [g, grp, k] = only_group(b, {early, last});
    CHECK(grp->outputs.size() == 2);
    CHECK(k.slots == 4);  // a, the early output, and two for the chain between
    check_slots(k);
  }
}

TEST_CASE("a group that would leave and re-enter itself splits where the path leaves it") {
  // a -> t = tanh(a) -> r = reduce_sum(t) (not elementwise) -> u = t * r: t and u would be one
  // group whose input r is computed from its member t; each is a set of its own (of one op:
  // unfused on the CPU, a single op for a device).
  ir::Builder b("cycle");
  const ValueId a = b.add_input("a", ir::DType::F32, ir::Shape{4});
  const ValueId t = node(b, ir::ops::tanh, {a});
  const ValueId r = node(b, ir::ops::reduce_sum, {t}, {ir::AttrArg{}, ir::AttrArg::of_bool(true)});
  const ValueId u = node(b, ir::ops::mul, {t, r});
  const auto g = b.finish({&u, 1});
  CHECK(runtime::find_groups(*g, cpu::grouping_rules()).empty());
  runtime::GroupingRules device;
  device.single_ops = true;
  const auto groups = runtime::find_groups(*g, device);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].members.size() == 1);
  CHECK(groups[1].members.size() == 1);
}

TEST_CASE("a recurrent cell whose state crosses a matmul fuses step by step") {
  // Three steps of c = sigmoid(x_t + h·W) * c + tanh(x_t + h·W), h = tanh(c): each step's
  // elementwise ops are one set with the state c flowing to the next step, and h·W leaves the
  // set and comes back. Split by level, every step is one group of its own.
  ir::Builder b("cell");
  const float w_values[64] = {};
  const ValueId w = b.add_constant(ir::DType::F32, ir::Shape{8, 8}, w_values, sizeof w_values);
  ValueId c = b.add_input("c0", ir::DType::F32, ir::Shape{1, 8});
  ValueId h = b.add_input("h0", ir::DType::F32, ir::Shape{1, 8});
  const ValueId rows[] = {b.add_input("x0", ir::DType::F32, ir::Shape{1, 8}), b.add_input("x1", ir::DType::F32, ir::Shape{1, 8}),
                          b.add_input("x2", ir::DType::F32, ir::Shape{1, 8})};
  for (const ValueId xt : rows) {
    const ValueId z = node(b, ir::ops::add, {xt, node(b, ir::ops::matmul, {h, w}, {ir::AttrArg::of_bool(false), ir::AttrArg::of_bool(false)})});
    c = node(b, ir::ops::add, {node(b, ir::ops::mul, {node(b, ir::ops::sigmoid, {z}), c}), node(b, ir::ops::tanh, {z})});
    h = node(b, ir::ops::tanh, {c});
  }
  const ValueId outs[] = {h, c};
  const auto g = b.finish({outs, 2});
  const auto groups = runtime::find_groups(*g, cpu::grouping_rules());
  // The first step's matmul output feeds an add whose other operand is an input: each step is
  // a group of its add, sigmoid, mul, tanh, add and tanh (the matmul heads it where it may).
  REQUIRE(groups.size() == 3);
  for (const runtime::FusedGroup& grp : groups) CHECK(grp.members.size() >= 6);
}


namespace {


// The group input a stage reads as its scale or shift: -1 for none, else the constant's value.
float stage_value(const ir::Graph& g, const runtime::FusedGroup& grp, int input) {
  REQUIRE(input >= 0);
  const ir::Value& v = g.values[grp.inputs[static_cast<size_t>(input)]];
  float f;
  std::memcpy(&f, g.blobs[g.nodes[v.producer].blob]->data(), 4);
  return f;
}

}  // namespace

TEST_CASE("fused f32 groups fold multiplies, adds and subtracts by scalars into their neighbours") {
  ir::Builder b("stages");
  const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{1000});
  auto groups_of = [&](std::vector<ValueId> outputs) { return only_group(b, std::move(outputs)); };
  SUBCASE("sigmoid(tanh(x*1.5+0.25)*0.5-0.125)*2+x runs as three rows") {
    const ValueId pre = node(b, ir::ops::add, {node(b, ir::ops::mul, {x, scalar(b, 1.5f)}), scalar(b, 0.25f)});
    const ValueId t = node(b, ir::ops::sub, {node(b, ir::ops::mul, {node(b, ir::ops::tanh, {pre}), scalar(b, 0.5f)}), scalar(b, 0.125f)});
    const ValueId y = node(b, ir::ops::add, {node(b, ir::ops::mul, {node(b, ir::ops::sigmoid, {t}), scalar(b, 2.0f)}), x});
    const auto [g, grp, k] = groups_of({y});
    CHECK(grp->steps.size() == 8);  // what a device backend generates from: one per member
    REQUIRE(k.f32_steps.size() == 3);
    const auto& tanh = k.f32_steps[0];
    CHECK(tanh.operands[0].from == runtime::GroupStep::From::Input);
    CHECK(stage_value(*g, *grp, tanh.pre.scale) == 1.5f);
    CHECK(stage_value(*g, *grp, tanh.pre.shift) == 0.25f);
    CHECK(stage_value(*g, *grp, tanh.post.scale) == 0.5f);
    CHECK(stage_value(*g, *grp, tanh.post.shift) == 0.125f);
    CHECK((tanh.post.negate_shift && !tanh.post.negate_scale && !tanh.pre.negate_shift));
    const auto& sigmoid = k.f32_steps[1];
    CHECK(sigmoid.pre.empty());
    CHECK(stage_value(*g, *grp, sigmoid.post.scale) == 2.0f);
    CHECK(sigmoid.post.shift < 0);
    CHECK(k.f32_steps[2].operands[0].index == 1);  // the add reads the sigmoid's row
    CHECK(k.f32_steps[2].output == 0);
    check_slots(k);
  }
  SUBCASE("s - x negates the scale; a stage takes one multiply, then one add") {
    const ValueId a = node(b, ir::ops::tanh, {node(b, ir::ops::sub, {scalar(b, 1.0f), x})});
    const ValueId c = node(b, ir::ops::mul, {node(b, ir::ops::mul, {a, scalar(b, 2.0f)}), scalar(b, 3.0f)});
    const auto [g, grp, k] = groups_of({node(b, ir::ops::exp, {node(b, ir::ops::add, {c, scalar(b, 1.0f)})})});
    // tanh(pre: -x + 1, post: ·2), then exp(pre: ·3 + 1): the second multiply cannot join the
    // tanh's stage, which has one, so it goes to the exp's with the add after it.
    REQUIRE(k.f32_steps.size() == 2);
    CHECK((k.f32_steps[0].pre.negate_scale && k.f32_steps[0].pre.scale < 0));
    CHECK(stage_value(*g, *grp, k.f32_steps[0].pre.shift) == 1.0f);
    CHECK(stage_value(*g, *grp, k.f32_steps[0].post.scale) == 2.0f);
    CHECK(k.f32_steps[0].post.shift < 0);
    CHECK(stage_value(*g, *grp, k.f32_steps[1].pre.scale) == 3.0f);
    CHECK(stage_value(*g, *grp, k.f32_steps[1].pre.shift) == 1.0f);
    CHECK(k.f32_steps[1].post.empty());
  }
  SUBCASE("an add before a multiply stays a row of its own") {
    const ValueId m = node(b, ir::ops::mul, {node(b, ir::ops::add, {x, scalar(b, 1.0f)}), scalar(b, 2.0f)});
    const auto [g, grp, k] = groups_of({node(b, ir::ops::tanh, {m})});
    REQUIRE(k.f32_steps.size() == 2);  // x + 1, then tanh(·2)
    CHECK(k.f32_steps[1].pre.scale >= 0);
    CHECK(k.f32_steps[1].pre.shift < 0);
  }
  SUBCASE("values read twice or by the caller are not folded into") {
    const ValueId a = node(b, ir::ops::mul, {x, scalar(b, 2.0f)});
    const ValueId twice = node(b, ir::ops::add, {node(b, ir::ops::tanh, {a}), a});  // a has two readers
    const ValueId t = node(b, ir::ops::tanh, {twice});
    const ValueId after = node(b, ir::ops::mul, {t, scalar(b, 3.0f)});  // t is an output too
    const auto [g, grp, k] = groups_of({t, after});
    CHECK(k.f32_steps.size() == grp->steps.size());
    for (const auto& s : k.f32_steps) CHECK(!s.staged());
  }
  SUBCASE("a folded value that is an output is stored from its host") {
    const ValueId y = node(b, ir::ops::mul, {node(b, ir::ops::tanh, {node(b, ir::ops::neg, {x})}), scalar(b, 2.0f)});
    const auto [g, grp, k] = groups_of({y});
    REQUIRE(k.f32_steps.size() == 2);
    CHECK(k.f32_steps[1].output == 0);
    CHECK(k.f32_steps[1].post.scale >= 0);
  }
}
