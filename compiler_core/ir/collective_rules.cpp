// The collectives' shape rules (op_defs/collective.yaml): each checks its group against the
// process's world (ir/world.hpp) where the graph is built, and sizes what it gathers or
// scatters by the group's size.
#include <algorithm>
#include <string>
#include <vector>

#include "ir/infer.hpp"
#include "ir/op_attrs.gen.hpp"
#include "ir/world.hpp"

namespace esg::ir {
namespace {

std::string ranks_str(Span<int64_t> v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// The group's size, once its ranks are checked: distinct ranks of the world, this process's
// among them (a rank takes part in every collective it builds). An empty list is the world.
int64_t group_size(InferContext& ctx, const World& w) {
  const Span<int64_t> ranks = ctx.attr_ints("ranks");
  if (ranks.empty()) return w.size;
  std::vector<int64_t> sorted(ranks.begin(), ranks.end());
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] < 0 || sorted[i] >= w.size)
      ctx.fail_attr("`ranks` " + ranks_str(ranks) + " names rank " + std::to_string(sorted[i]) + ", outside the world of " +
                    std::to_string(w.size) + (w.size == 1 ? " process (run under mpirun for more)" : " processes"));
    if (i && sorted[i] == sorted[i - 1])
      ctx.fail_attr("`ranks` " + ranks_str(ranks) + " names rank " + std::to_string(sorted[i]) + " twice");
  }
  if (!std::binary_search(sorted.begin(), sorted.end(), int64_t{w.rank}))
    ctx.fail_attr("`ranks` " + ranks_str(ranks) + " leaves out this process (rank " + std::to_string(w.rank) +
                  "): build a group's collectives only on its members");
  return static_cast<int64_t>(ranks.size());
}

// A rank of the world another rank of the group talks to: `attr` (root, peer) in range, and not
// this process for a peer.
void check_peer(InferContext& ctx, const World& w, const char* attr, bool may_be_self) {
  const int64_t r = ctx.attr_int(attr);
  if (r < 0 || r >= w.size)
    ctx.fail_attr("`" + std::string(attr) + "` = " + std::to_string(r) + " is outside the world of " + std::to_string(w.size) +
                  (w.size == 1 ? " process" : " processes"));
  if (!may_be_self && r == w.rank) ctx.fail_attr("`" + std::string(attr) + "` = " + std::to_string(r) + " is this process itself");
}

void check_average(InferContext& ctx) {
  const DType t = ctx.input(0).dtype;
  // (all_reduce's and reduce_scatter's `op` enums list the same values in the same order)
  if (ctx.attr_int("op") == static_cast<int64_t>(AllReduceOp::avg) && !dtype_is_float(t))
    ctx.fail_dtype(std::string("`avg` of ") + dtype_name(t) + " would round: average a floating dtype");
}

Dim times(InferContext& ctx, Dim d, int64_t n) {
  if (dim_is_symbolic(d)) return ctx.derived_symbol("(" + ctx.graph().dim_str(d) + "*" + std::to_string(n) + ")");
  if (d > kMaxElements / std::max<int64_t>(n, 1)) ctx.fail("gathering " + std::to_string(n) + " pieces of " + std::to_string(d) + " is beyond any tensor's size");
  return d * n;
}

Dim divided(InferContext& ctx, Dim d, int64_t n, const char* axis_attr) {
  if (dim_is_symbolic(d)) return ctx.derived_symbol("(" + ctx.graph().dim_str(d) + "/" + std::to_string(n) + ")");
  if (d % n)
    ctx.fail("`" + std::string(axis_attr) + "`'s length " + std::to_string(d) + " does not divide into the group's " + std::to_string(n) + " ranks");
  return d / n;
}

}  // namespace

void infer_all_reduce(InferContext& ctx) {
  group_size(ctx, process_world());
  check_average(ctx);
  ctx.set_shape(0, ctx.shape(0));
}

void infer_all_gather(InferContext& ctx) {
  const int64_t n = group_size(ctx, process_world());
  Shape s = ctx.shape(0);
  const size_t ax = ctx.axis(ctx.attr_int("axis"), s.rank(), "axis");
  s[ax] = times(ctx, s[ax], n);
  ctx.set_shape(0, s);
}

void infer_reduce_scatter(InferContext& ctx) {
  const int64_t n = group_size(ctx, process_world());
  check_average(ctx);
  Shape s = ctx.shape(0);
  const size_t ax = ctx.axis(ctx.attr_int("axis"), s.rank(), "axis");
  s[ax] = divided(ctx, s[ax], n, "axis");
  ctx.set_shape(0, s);
}

void infer_broadcast_from(InferContext& ctx) {
  const World w = process_world();
  group_size(ctx, w);
  check_peer(ctx, w, "root", true);
  const Span<int64_t> ranks = ctx.attr_ints("ranks");
  if (!ranks.empty() && std::find(ranks.begin(), ranks.end(), ctx.attr_int("root")) == ranks.end())
    ctx.fail_attr("`root` = " + std::to_string(ctx.attr_int("root")) + " is not one of `ranks` " + ranks_str(ranks));
  ctx.set_shape(0, ctx.shape(0));
}

void infer_all_to_all(InferContext& ctx) {
  const int64_t n = group_size(ctx, process_world());
  Shape s = ctx.shape(0);
  const size_t split = ctx.axis(ctx.attr_int("split_axis"), s.rank(), "split_axis");
  const size_t concat = ctx.axis(ctx.attr_int("concat_axis"), s.rank(), "concat_axis");
  s[split] = divided(ctx, s[split], n, "split_axis");
  s[concat] = times(ctx, s[concat], n);
  ctx.set_shape(0, s);
}

void infer_send(InferContext& ctx) {
  check_peer(ctx, process_world(), "peer", false);
  ctx.set_shape(0, Shape{});
}

void infer_recv(InferContext& ctx) {
  check_peer(ctx, process_world(), "peer", false);
  const Span<int64_t> shape = ctx.attr_ints("shape");
  ctx.set_shape(0, Shape::from(shape.data(), shape.size()));
}

}  // namespace esg::ir
