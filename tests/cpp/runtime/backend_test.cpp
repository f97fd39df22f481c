// The backend interface as the pipeline sees it: the table, each backend's options, grouping
// rules and refusals, asked through runtime::Backend only.
#include <doctest/doctest.h>

#include "backends/registry.hpp"
#include "cpu/factory.hpp"
#include "ir/builder.hpp"
#include "ir/error.hpp"
#include "ir/ops.gen.hpp"
#include "ir_build.hpp"
#include "runtime/plan.hpp"

using namespace esg;
using ir::ValueId;
using test::node;
using test::scalar;

namespace {

runtime::CompileOptions options_for(const char* backend) {
  runtime::CompileOptions o;
  o.backend = backends::find(backend);
  REQUIRE(o.backend != nullptr);
  return o;
}

}  // namespace

TEST_CASE("the table names every backend once, the CPU first") {
  CHECK(backends::names() == std::vector<std::string>{"cpu", "ascend", "ascend-sim"});
  for (const std::string& name : backends::names()) CHECK(backends::find(name)->name() == name);
  CHECK(backends::find("tpu") == nullptr);
  CHECK(backends::find("cpu")->options().size() == 2);  // channel_block, vnni
  CHECK(backends::find("ascend-sim")->options().size() == 3);
}

TEST_CASE("the start-up filled the table; a second backend of one name is a wiring bug") {
  CHECK_THROWS_WITH_AS(backends::add(cpu::make_backend()), "backend 'cpu' is added twice", std::logic_error);
  CHECK(backends::names().size() == 3);
}

TEST_CASE("backend options: name=value integers, the last one wins, undeclared ones read their default") {
  runtime::BackendOptions o;
  o.parse(" ai_cores = 4, host_fallback=1,,ai_cores=5 ");
  CHECK(o.values().size() == 3);
  const auto declared = backends::find("ascend")->options();
  CHECK(o.get("ai_cores", declared) == 5);
  CHECK(o.get("host_fallback", declared) == 1);
  CHECK(o.get("device", declared) == 0);
  for (const char* bad : {"ai_cores", "=3", "ai_cores=", "ai_cores=three", "ai_cores=1e3", "ai_cores=99999999999999999999"})
    CHECK_THROWS_AS(runtime::BackendOptions().parse(bad), ir::Error);
}

TEST_CASE("one pipeline, each backend's grouping: the CPU takes the matmul as head, Ascend leaves it to its library") {
  ir::Builder b("mlp");
  const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{4, 3});
  const ValueId w = b.add_input("w", ir::DType::F32, ir::Shape{3, 2});
  const ValueId y = node(b, ir::ops::relu, {node(b, ir::ops::add, {node(b, ir::ops::matmul, {x, w}), scalar(b, 0.5f)})});
  const auto g = b.finish({&y, 1});
  const std::vector<ir::Shape> shapes = {ir::Shape{4, 3}, ir::Shape{3, 2}};
  const runtime::Plan cpu(*g, shapes, options_for("cpu"));
  REQUIRE(cpu.launches().size() == 1);
  CHECK(cpu.groups().at(0).head != ir::kNone);
  const runtime::Plan ascend(*g, shapes, options_for("ascend-sim"));
  REQUIRE(ascend.launches().size() == 2);  // the matmul (aclnn), then add + relu (a generated kernel)
  CHECK(ascend.groups().at(0).head == ir::kNone);
  CHECK(ascend.groups().at(0).members.size() == 2);
}

TEST_CASE("cannot_run: the reason a backend refuses a launch, empty where it has a lowering") {
  ir::Builder b("narrow");
  const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{8});
  const ValueId y = node(b, ir::ops::exp, {node(b, ir::ops::atanh, {x})});
  const ValueId z = node(b, ir::ops::reduce_sum, {x}, {ir::AttrArg{}, ir::AttrArg::of_bool(false)});
  const ValueId outs[] = {y, z};
  const auto g = b.finish({outs, 2});
  const runtime::Plan ascend(*g, {ir::Shape{8}}, options_for("ascend-sim"));
  const runtime::Backend& device = *backends::find("ascend-sim");
  int refused = 0;
  for (size_t i = 0; i < ascend.launches().size(); ++i) {
    const std::string why = device.cannot_run(ascend, i);
    const bool group = ascend.launches()[i].group >= 0;
    CHECK(why.empty() == !group);  // the group with atanh has no kernel; reduce_sum goes to aclnn
    if (!group) continue;
    CHECK(why.find("atanh") != std::string::npos);
    ++refused;
  }
  CHECK(refused == 1);
  const runtime::Plan cpu(*g, {ir::Shape{8}}, options_for("cpu"));
  for (size_t i = 0; i < cpu.launches().size(); ++i) CHECK(backends::find("cpu")->cannot_run(cpu, i).empty());
}

TEST_CASE("memory formats: a blocked chain's launches, reorders at its ends, padded buffers") {
  ir::Builder b("pools");
  const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{1, 12, 8, 8});
  std::vector<ir::AttrArg> pool(ir::ops::max_pool2d.attrs.size());
  const int64_t kernel[] = {2, 2};
  pool[ir::MaxPool2dAttrs::Index::kernel] = ir::AttrArg::of_ints(kernel, 2);
  const ValueId p = node(b, ir::ops::max_pool2d, {x}, pool);                 // [1,12,7,7]
  const ValueId e = node(b, ir::ops::neg, {node(b, ir::ops::exp, {p})});      // a group of two
  const ValueId y = node(b, ir::ops::avg_pool2d, {e}, pool);                  // [1,12,6,6]
  const auto g = b.finish({&y, 1});
  runtime::CompileOptions o = options_for("cpu");
  o.backend_options.set("channel_block", 8);
  const runtime::Plan plan(*g, {ir::Shape{1, 12, 8, 8}}, o);
  const auto& l = plan.launches();
  REQUIRE(l.size() == 5);  // reorder, max pool, exp+neg, avg pool, reorder
  const schedule::Format blocked = schedule::Format::blocked_channels(8), row_major = schedule::Format::row_major();
  CHECK((l[0].node == ir::kNone && l[0].in[0].kind == runtime::Plan::Slot::Input && l[0].out[0].format == blocked));
  for (size_t i = 1; i < 4; ++i) {
    CHECK(l[i].node != ir::kNone);
    CHECK(l[i].in[0].format == blocked);
    CHECK(l[i].out[0].format == blocked);
  }
  CHECK(l[2].group >= 0);
  CHECK((l[4].node == ir::kNone && l[4].in[0].format == blocked && l[4].out[0].kind == runtime::Plan::Slot::Output &&
         l[4].out[0].format == row_major));
  // 12 channels in blocks of 8: 16 per pixel. The largest live pair (the max pool's blocked input
  // and result) takes 16·64·4 + 16·49·4 bytes, each aligned.
  CHECK(blocked.physical_elements(ir::Shape{1, 12, 8, 8}) == 16 * 64);
  CHECK(blocked.physical_elements(ir::Shape{1, 16, 8, 8}) == 16 * 64);
  CHECK(blocked.physical_elements(ir::Shape{1, 0, 8, 8}) == 0);
  CHECK(plan.arena_bytes() >= 16 * 64 * 4 + 16 * 49 * 4);
  CHECK(blocked.name(4) == "nChw8c");
  CHECK(schedule::Format::blocked_channels(16).name(3) == "nCw16c");
  // With channel_block 0: no format pass, no reorders.
  o.backend_options.set("channel_block", 0);
  CHECK(runtime::Plan(*g, {ir::Shape{1, 12, 8, 8}}, o).launches().size() == 3);
}
