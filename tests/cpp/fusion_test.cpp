// Fused groups as the CPU runs them: the tiles a chunk's results go to.
#include <doctest/doctest.h>

#include <set>

#include "ir/builder.hpp"
#include "ir/ops.gen.hpp"
#include "ir_build.hpp"
#include "runtime/fusion.hpp"

using namespace esg;
using ir::ValueId;
using test::node;
using test::scalar;

namespace {

runtime::FusedGroup only_group(ir::Builder& b, std::vector<ValueId> outputs) {
  const auto g = b.finish({outputs.data(), outputs.size()});
  auto groups = runtime::find_groups(*g);
  REQUIRE(groups.size() == 1);
  REQUIRE(groups[0].f32);
  return std::move(groups[0]);
}

// An independent check of the slots: a step's tile is none of its operands' tiles, and no
// result still to be read (or stored as an output) shares a tile with a later step's result.
void check_slots(const runtime::FusedGroup& grp) {
  const auto& steps = grp.steps;
  for (size_t si = 0; si < steps.size(); ++si) {
    CHECK(steps[si].slot < grp.slots);
    size_t last = steps[si].output >= 0 ? steps.size() : si;
    for (size_t later = si + 1; later < steps.size(); ++later)
      for (const auto& o : steps[later].operands)
        if (o.from == runtime::FusedStep::From::Step && o.index == si) last = later;
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
    const auto grp = only_group(b, {v});
    CHECK(grp.steps.size() == 20);
    CHECK(grp.slots == 2);
    check_slots(grp);
  }
  SUBCASE("a value read at the end and an early output keep their tiles") {
    ir::Builder b("diamond");
    const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{1000});
    const ValueId a = node(b, ir::ops::mul, {x, scalar(b, 2.0f)});
    const ValueId early = node(b, ir::ops::tanh, {a});
    ValueId v = node(b, ir::ops::sigmoid, {a});
    for (int k = 0; k < 6; ++k) v = node(b, ir::ops::exp, {node(b, ir::ops::neg, {v})});
    const ValueId last = node(b, ir::ops::add, {v, a});
    const auto grp = only_group(b, {early, last});
    CHECK(grp.outputs.size() == 2);
    CHECK(grp.slots == 4);  // a, the early output, and two for the chain between
    check_slots(grp);
  }
}

TEST_CASE("a group that would leave and re-enter itself: unfused on the CPU, single ops for a device") {
  // a -> t = tanh(a) -> r = reduce_sum(t) (not elementwise) -> u = t * r: t and u would be one
  // group whose input r is computed from its member t.
  ir::Builder b("cycle");
  const ValueId a = b.add_input("a", ir::DType::F32, ir::Shape{4});
  const ValueId t = node(b, ir::ops::tanh, {a});
  const ValueId r = node(b, ir::ops::reduce_sum, {t}, {ir::AttrArg{}, ir::AttrArg::of_bool(true)});
  const ValueId u = node(b, ir::ops::mul, {t, r});
  const auto g = b.finish({&u, 1});
  CHECK(runtime::find_groups(*g).empty());
  runtime::GroupingOptions device;
  device.single_ops = true;
  device.heads = false;
  const auto groups = runtime::find_groups(*g, device);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].members.size() == 1);
  CHECK(groups[1].members.size() == 1);
}

