// The graph core directly: node creation, rollback, symbolic shapes, the verifier.
#include <doctest/doctest.h>

#include "ir/builder.hpp"
#include "ir/error.hpp"
#include "ir/ops.gen.hpp"
#include "ir/printer.hpp"
#include "ir/verify.hpp"

using namespace esg::ir;

namespace {
std::vector<AttrArg> defaults(const OpSchema& op) { return std::vector<AttrArg>(op.attrs.size()); }
}  // namespace

TEST_CASE("every generated schema is consistent with its inference rule's needs") {
  CHECK(all_ops().size() >= 60);
  for (const OpSchema* op : all_ops()) {
    CAPTURE(op->name);
    CHECK(find_op(op->name) == op);
    CHECK(static_cast<bool>(op->infer));
    CHECK(op->type_vars.size() <= 8);
    for (const AttrSchema& a : op->attrs) CHECK((a.required || a.kind != AttrKind::Enum || a.i < a.num_enum_values));
  }
  CHECK(find_op("no_such_op") == nullptr);
  CHECK(find_op("constant") == &constant_op());
}

TEST_CASE("a node that fails leaves every pool as it was") {
  Builder b;
  const ValueId x = b.add_input("x", DType::F32, Shape{2, 3});
  Graph& g = b.graph();
  const size_t values = g.values.size(), ints = g.ints.size(), attrs = g.attrs.size();
  std::vector<AttrArg> args = defaults(ops::reduce_sum);
  const int64_t bad_axes[] = {0, 5};
  args[0] = AttrArg::of_ints(bad_axes, 2);
  const ValueId in[] = {x};
  CHECK_THROWS_AS(b.add_op(ops::reduce_sum, {in, 1}, args), Error);
  CHECK(g.nodes.empty());
  CHECK(g.values.size() == values);
  CHECK(g.ints.size() == ints);
  CHECK(g.attrs.size() == attrs);
  verify(g);
}

TEST_CASE("attributes of the wrong kind are rejected with the schema's expectation") {
  Builder b;
  const ValueId x = b.add_input("x", DType::F32, Shape{2, 3});
  std::vector<AttrArg> args = defaults(ops::softmax);
  args[0] = AttrArg::of_string("last");
  const ValueId in[] = {x};
  try {
    b.add_op(ops::softmax, {in, 1}, args);
    FAIL("accepted a string axis");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Attribute);
    CHECK(std::string(e.what()) == "softmax: attribute `axis` takes an int, got a string");
  }
}

TEST_CASE("symbolic dimensions flow through broadcasting and reshape") {
  Builder b;
  Graph& g = b.graph();
  const Dim batch = symbol_dim(g.symbol("B"));
  const ValueId x = b.add_input("x", DType::F32, Shape{batch, 128, 512});
  const ValueId one = b.add_input("one", DType::F32, Shape{1, 512});
  const ValueId in[] = {x, one};
  const NodeId add = b.add_op(ops::add, {in, 2}, {});
  CHECK(g.shape(g.nodes[add].first_output) == Shape{batch, 128, 512});
  std::vector<AttrArg> args = defaults(ops::reshape);
  const int64_t spec[] = {-1, 512};
  args[0] = AttrArg::of_ints(spec, 2);
  const ValueId rin[] = {x};
  const NodeId r = b.add_op(ops::reshape, {rin, 1}, args);
  const Shape flat = g.shape(g.nodes[r].first_output);
  CHECK(g.shape_str(flat) == "[B*128,512]");
  // …and back: [B*128, 512] -> [-1, 128, 512] gives B again only when spelled the same way.
  const int64_t back[] = {0, 512};
  args[0] = AttrArg::of_ints(back, 2);
  const ValueId bin[] = {g.nodes[r].first_output};
  const NodeId r2 = b.add_op(ops::reshape, {bin, 1}, args);
  CHECK(g.shape(g.nodes[r2].first_output) == flat);
}

TEST_CASE("the verifier catches a corrupted graph") {
  Builder b;
  const ValueId x = b.add_input("x", DType::F32, Shape{2});
  const ValueId in[] = {x};
  const NodeId n = b.add_op(ops::exp, {in, 1}, {});
  const ValueId out[] = {b.graph().nodes[n].first_output};
  auto g = b.finish({out, 1});
  verify(*g);
  Graph broken = *g;
  broken.operands[0] = broken.nodes[0].first_output;  // the node now reads its own output
  CHECK_THROWS_AS(verify(broken), Error);
  Graph broken2 = *g;
  broken2.regions[0].results[0] = 99;
  CHECK_THROWS_AS(verify(broken2), Error);
}

TEST_CASE("a cancelled body leaves no trace") {
  Builder b;
  const ValueId x = b.add_input("x", DType::F32, Shape{2});
  Graph& g = b.graph();
  const std::string before = to_text(g);
  const size_t values = g.values.size();
  b.begin_region(std::vector<Builder::ParamType>{});
  b.begin_region(std::vector<Builder::ParamType>{});
  const ValueId in[] = {x};
  b.add_op(ops::exp, {in, 1}, {});  // captures x into both bodies
  CHECK(g.regions[1].captures_outer.size() == 1);
  b.cancel_region();
  b.cancel_region();
  CHECK(g.values.size() == values);
  CHECK(g.regions.size() == 1);
  CHECK(g.nodes.empty());
  CHECK(to_text(g) == before);
}

TEST_CASE("a body that is never used makes the graph unbuildable") {
  Builder b;
  const ValueId x = b.add_input("x", DType::F32, Shape{2});
  b.begin_region(std::vector<Builder::ParamType>{});
  const ValueId r[] = {x};
  b.end_region({r, 1});
  CHECK_THROWS_AS(b.finish({r, 1}), Error);
}

TEST_CASE("a constant's copy starts on a cache line, or 16 bytes past one for rows a multiple of 4 KiB apart") {
  Builder b;
  Graph& g = b.graph();
  auto line_offset = [&](DType dtype, const Shape& shape) {
    const std::vector<uint8_t> bytes(static_cast<size_t>(shape.num_elements()) * dtype_size(dtype), 7);
    const ValueId v = b.add_constant(dtype, shape, bytes.data(), bytes.size());
    const Bytes& blob = *g.blobs[g.nodes[g.values[v].producer].blob];
    CHECK(std::vector<uint8_t>(blob.begin(), blob.end()) == bytes);  // the copy is the bytes
    return reinterpret_cast<uintptr_t>(blob.data()) % 64;
  };
  CHECK(line_offset(DType::F32, Shape{8, 1024}) == 16);  // rows 4 KiB apart
  CHECK(line_offset(DType::F32, Shape{2, 3, 3072}) == 16);  // 12 KiB
  CHECK(line_offset(DType::I8, Shape{4, 4096}) == 16);
  CHECK(line_offset(DType::F32, Shape{8, 1000}) == 0);
  CHECK(line_offset(DType::F32, Shape{4096}) == 0);  // a vector: no rows
  CHECK(line_offset(DType::F32, Shape{3, 0}) == 0);
}
