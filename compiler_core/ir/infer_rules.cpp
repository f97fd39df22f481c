// The shape inference rules named in infer_rules.def, one function each.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <string>

#include "ir/error.hpp"
#include "ir/infer.hpp"

namespace esg::ir {

// ---- InferContext ------------------------------------------------------------------------
size_t InferContext::num_inputs() const { return node().num_inputs - node().num_captures; }

ValueId InferContext::input_id(size_t i) const {
  if (i >= num_inputs()) return kNone;
  return g_.operands[node().first_input + i];
}

const AttrValue& InferContext::attr(const char* name) const {
  const int i = op_.attr_index(name);
  if (i < 0)
    throw Error(ErrorCode::Internal, std::string(op_.name) + ": rule `" + op_.infer_name +
                                         "` reads attribute `" + name + "`, which the op does not declare");
  return g_.attrs[node().first_attr + static_cast<size_t>(i)];
}

int64_t InferContext::attr_int(const char* name) const { return attr(name).i; }
double InferContext::attr_float(const char* name) const { return attr(name).f; }
Span<int64_t> InferContext::attr_ints(const char* name) const { return g_.ints_of(attr(name)); }

std::string beyond_element_limit(const Graph& g, const Shape& s) {
  return g.shape_str(s) + " has more than 2^48 elements (sizes multiply beyond the limit of a tensor)";
}

void InferContext::fail_oversized(size_t output, const Shape& s) const {
  fail("output " + std::to_string(output) + ": " + beyond_element_limit(g_, s));
}

size_t InferContext::axis(int64_t a, size_t rank, const char* attr_name) const {
  const auto r = static_cast<int64_t>(rank);
  if (a < -r || a >= r || rank == 0)
    fail_attr("`" + std::string(attr_name) + "` = " + std::to_string(a) + " is out of range for rank " +
              std::to_string(rank) + " (valid: " + (rank ? std::to_string(-r) + " .. " + std::to_string(r - 1) : "none") + ")");
  return static_cast<size_t>(a < 0 ? a + r : a);
}

namespace {

std::string list_str(Span<int64_t> v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// Two dims that must agree; a symbolic one agrees with anything (checked when the graph runs).
bool dims_compatible(Dim a, Dim b) { return a == b || dim_is_symbolic(a) || dim_is_symbolic(b); }

// A static dim if both are static, else a symbol naming the expression.
Dim combine(InferContext& ctx, Dim a, const char* op, Dim b, int64_t (*f)(int64_t, int64_t)) {
  if (!dim_is_symbolic(a) && !dim_is_symbolic(b)) return f(a, b);
  // A symbol plus nothing is the symbol itself: a pad of 0 on a dynamic batch keeps its name,
  // which the frontends compare sizes by.
  if (op[0] == '+' && !dim_is_symbolic(b) && b == 0) return a;
  const Graph& g = ctx.graph();
  return ctx.derived_symbol("(" + g.dim_str(a) + op + g.dim_str(b) + ")");
}

// Output size of a sliding window: floor or ceil of (in + pads - span) / stride, plus one.
Dim window_out(InferContext& ctx, Dim in, int64_t pad_begin, int64_t pad_end, int64_t span, int64_t stride,
               bool ceil_mode, const char* axis) {
  // Attributes may hold any int64: sums that leave int64 are windows no tensor can have.
  int64_t pads = 0, room = 0;
  if (__builtin_add_overflow(pad_begin, pad_end, &pads) || pads > kMaxElements || span > kMaxElements || span < 1)
    ctx.fail_attr(std::string("the padding or window of ") + axis + " is beyond any tensor's size");
  if (dim_is_symbolic(in))
    return ctx.derived_symbol("window(" + ctx.graph().dim_str(in) + "," + std::to_string(pads) + "," +
                              std::to_string(span) + "," + std::to_string(stride) + (ceil_mode ? ",ceil)" : ")"));
  room = in + pads - span;
  if (room < 0)
    ctx.fail(std::string("the window (") + std::to_string(span) + ") is larger than the padded " + axis + " (" +
             std::to_string(in + pads) + ")");
  int64_t up = 0;
  const int64_t windows = !ceil_mode ? room / stride : __builtin_add_overflow(room, stride - 1, &up) ? int64_t{room > 0} : up / stride;
  int64_t out = windows + 1;
  // A last window that starts entirely inside the padding is dropped (as PyTorch and ONNX do).
  if (ceil_mode && (out - 1) * stride >= in + pad_begin) --out;
  return out;
}

void expect_len(InferContext& ctx, const char* attr, Span<int64_t> v, size_t n) {
  if (v.size() != n)
    ctx.fail_attr("`" + std::string(attr) + "` needs " + std::to_string(n) + " entries, got " + list_str(v));
}

void expect_rank(InferContext& ctx, size_t input, size_t rank) {
  if (ctx.shape(input).rank() != rank)
    ctx.fail("input `" + std::string(ctx.op().inputs[std::min(input, ctx.op().inputs.size() - 1)].name) +
             "` must have rank " + std::to_string(rank) + ", got " + ctx.graph().shape_str(ctx.shape(input)));
}

}  // namespace

Shape broadcast_shapes(InferContext& ctx, const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.rank(), b.rank());
  Shape out;
  out.resize(rank);
  for (size_t i = 0; i < rank; ++i) {
    const Dim da = i < rank - a.rank() ? 1 : a[i - (rank - a.rank())];
    const Dim db = i < rank - b.rank() ? 1 : b[i - (rank - b.rank())];
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else if (dim_is_symbolic(da) || dim_is_symbolic(db)) {
      out[i] = dim_is_symbolic(da) ? db : da;  // the symbol must be that size (or 1) at run time
    } else {
      const Graph& g = ctx.graph();
      ctx.fail("cannot broadcast " + g.shape_str(a) + " with " + g.shape_str(b) + ": axis " +
               std::to_string(static_cast<int64_t>(i) - static_cast<int64_t>(rank)) + " has sizes " +
               std::to_string(da) + " and " + std::to_string(db) + ", neither 1");
    }
  }
  return out;
}

void infer_unary(InferContext& ctx) { ctx.set_shape(0, ctx.shape(0)); }

void infer_broadcast(InferContext& ctx) {
  Shape s = ctx.shape(0);
  for (size_t i = 1; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i)) s = broadcast_shapes(ctx, s, ctx.shape(i));
  ctx.set_shape(0, s);
}

void infer_reduce(InferContext& ctx) {
  const Shape& x = ctx.shape(0);
  const Span<int64_t> axes = ctx.attr_ints("axes");
  const bool keep = ctx.attr_bool("keepdims");
  bool reduced[kMaxRank] = {};
  for (int64_t a : axes) {
    const size_t ax = ctx.axis(a, x.rank(), "axes");
    if (reduced[ax]) ctx.fail_attr("`axes` " + list_str(axes) + " names axis " + std::to_string(ax) + " twice");
    reduced[ax] = true;
  }
  Shape out;
  for (size_t i = 0; i < x.rank(); ++i) {
    const bool r = axes.empty() || reduced[i];
    if (!r) out.push_back(x[i]);
    else if (keep) out.push_back(1);
  }
  ctx.set_shape(0, out);
}

void infer_arg_reduce(InferContext& ctx) {
  const Shape& x = ctx.shape(0);
  const size_t ax = ctx.axis(ctx.attr_int("axis"), x.rank(), "axis");
  if (x[ax] == 0) ctx.fail("cannot take the arg-extremum of an empty axis");
  Shape out;
  for (size_t i = 0; i < x.rank(); ++i) {
    if (i != ax) out.push_back(x[i]);
    else if (ctx.attr_bool("keepdims")) out.push_back(1);
  }
  ctx.set_shape(0, out);
}

void infer_grid_sample(InferContext& ctx) {
  const Shape& x = ctx.shape(0);
  const Shape& grid = ctx.shape(1);
  const Graph& g = ctx.graph();
  if (x.rank() != 4) ctx.fail("x must be [N, C, H, W], got " + g.shape_str(x));
  if (grid.rank() != 4 || !dims_compatible(grid[3], 2))
    ctx.fail("grid must be [N, Ho, Wo, 2], got " + g.shape_str(grid));
  if (!dims_compatible(grid[0], x[0]))
    ctx.fail("grid " + g.shape_str(grid) + " and x " + g.shape_str(x) + " differ in N");
  if (x[2] == 0 || x[3] == 0) ctx.fail("x " + g.shape_str(x) + " has empty images: there is nothing to sample");
  ctx.set_shape(0, Shape{x[0], x[1], grid[1], grid[2]});
}

void infer_roi_align(InferContext& ctx) {
  const Shape &x = ctx.shape(0), &rois = ctx.shape(1), &indices = ctx.shape(2);
  const Graph& g = ctx.graph();
  if (x.rank() != 4) ctx.fail("x must be [N, C, H, W], got " + g.shape_str(x));
  if (x[2] == 0 || x[3] == 0) ctx.fail("x " + g.shape_str(x) + " has empty images: there is nothing to pool");
  if (rois.rank() != 2 || !dims_compatible(rois[1], 4)) ctx.fail("rois must be [R, 4], got " + g.shape_str(rois));
  if (indices.rank() != 1 || !dims_compatible(indices[0], rois[0]))
    ctx.fail("batch_indices " + g.shape_str(indices) + " must be [R], one per region of rois " + g.shape_str(rois));
  ctx.set_shape(0, Shape{rois[0], x[1], ctx.attr_int("output_height"), ctx.attr_int("output_width")});
}

void infer_det(InferContext& ctx) {
  const Shape& x = ctx.shape(0);
  if (x.rank() < 2) ctx.fail("x must have rank >= 2 ([.., n, n]), got " + ctx.graph().shape_str(x));
  if (!dims_compatible(x[x.rank() - 2], x[x.rank() - 1]))
    ctx.fail("the matrices of x " + ctx.graph().shape_str(x) + " are not square");
  Shape out = x;
  out.resize(x.rank() - 2);
  ctx.set_shape(0, out);
}

// ---- sizes the data decides (OpSchema::sized_by_data) ------------------------------------------

void infer_nonzero(InferContext& ctx) {
  const Shape& x = ctx.shape(0);
  ctx.set_shape(0, {static_cast<Dim>(std::max<size_t>(x.rank(), 1)), ctx.data_symbol("count")});
}

void infer_unique(InferContext& ctx) {
  const Shape& x = ctx.shape(0);
  if (x.rank() == 0) ctx.fail("x is a scalar: unique takes slices along an axis (flatten x for its distinct elements)");
  const size_t ax = ctx.axis(ctx.attr_int("axis"), x.rank(), "axis");
  const Dim n = ctx.data_symbol("count");
  Shape y = x;
  y[ax] = n;
  ctx.set_shape(0, y);
  ctx.set_shape(1, {n});
  ctx.set_shape(2, {x[ax]});
  ctx.set_shape(3, {n});
}

// A tensor of values read as the op runs: 1-D of a static length (`want` of them, if given).
static Dim operand_length(InferContext& ctx, size_t operand, int64_t want = -1) {
  const Shape& s = ctx.shape(operand);
  const char* name = ctx.op().inputs[operand].name;
  if (s.rank() != 1 || dim_is_symbolic(s[0]))
    ctx.fail(std::string("`") + name + "` must be a 1-D tensor of a static length (its values are read as the op runs), got " +
             ctx.graph().shape_str(s));
  if (want >= 0 && s[0] != want)
    ctx.fail(std::string("`") + name + "` holds " + std::to_string(s[0]) + " values, not the " + std::to_string(want) + " wanted");
  return s[0];
}

// One value read as the op runs: [] or [1].
static void one_value(InferContext& ctx, size_t operand) {
  const Shape& s = ctx.shape(operand);
  if (s.rank() > 1 || (s.rank() == 1 && s[0] != 1))
    ctx.fail(std::string("`") + ctx.op().inputs[operand].name + "` must hold one value ([] or [1]), got " + ctx.graph().shape_str(s));
}

// Every size of y is read from data: as many as x has.
static Shape data_sized_like(InferContext& ctx, size_t rank) {
  Shape out;
  for (size_t d = 0; d < rank; ++d) out.push_back(ctx.data_symbol(("d" + std::to_string(d)).c_str()));
  return out;
}

// reshape_to, expand_to, fill_to: as many sizes as `shape` (input `operand`) holds, each known
// once the op has read them.
static Shape sizes_of_operand(InferContext& ctx, size_t operand) {
  const Dim n = operand_length(ctx, operand);
  if (n > kMaxRank) ctx.fail("`shape` holds " + std::to_string(n) + " sizes, more than the " + std::to_string(kMaxRank) + " a tensor may have");
  return data_sized_like(ctx, static_cast<size_t>(n));
}

void infer_reshape_to(InferContext& ctx) { ctx.set_shape(0, sizes_of_operand(ctx, 1)); }

void infer_fill_to(InferContext& ctx) { ctx.set_shape(0, sizes_of_operand(ctx, 0)); }

void infer_expand_to(InferContext& ctx) {
  const Shape out = sizes_of_operand(ctx, 1);
  if (out.rank() < ctx.shape(0).rank())
    ctx.fail("cannot expand " + ctx.graph().shape_str(ctx.shape(0)) + " to the lower rank " + std::to_string(out.rank()) + " `shape` holds");
  ctx.set_shape(0, out);
}

void infer_slice_to(InferContext& ctx) {
  const Dim n = operand_length(ctx, 1);
  operand_length(ctx, 2, n);
  for (size_t i = 3; i < 5; ++i)
    if (ctx.has_input(i)) operand_length(ctx, i, n);
  if (n > static_cast<Dim>(ctx.shape(0).rank()))
    ctx.fail("`starts` holds " + std::to_string(n) + " values, more than x's " + std::to_string(ctx.shape(0).rank()) + " axes");
  ctx.set_shape(0, data_sized_like(ctx, ctx.shape(0).rank()));
}

void infer_pad_to(InferContext& ctx) {
  operand_length(ctx, 1, 2 * static_cast<int64_t>(ctx.shape(0).rank()));
  ctx.set_shape(0, data_sized_like(ctx, ctx.shape(0).rank()));
}

void infer_top_k_to(InferContext& ctx) {
  one_value(ctx, 1);
  Shape y = ctx.shape(0);
  if (y.rank() == 0) ctx.fail("x is a scalar: top_k takes elements along an axis");
  y[ctx.axis(ctx.attr_int("axis"), y.rank(), "axis")] = ctx.data_symbol("k");
  ctx.set_shape(0, y);
  ctx.set_shape(1, y);
}

void infer_range_to(InferContext& ctx) {
  for (size_t i = 0; i < 3; ++i) one_value(ctx, i);
  ctx.set_shape(0, {ctx.data_symbol("count")});
}

void infer_non_max_suppression(InferContext& ctx) {
  const Graph& g = ctx.graph();
  const Shape& boxes = ctx.shape(0);
  const Shape& scores = ctx.shape(1);
  if (boxes.rank() != 3 || !dims_compatible(boxes[2], 4))
    ctx.fail("boxes must be [batch, boxes, 4], got " + g.shape_str(boxes));
  if (scores.rank() != 3) ctx.fail("scores must be [batch, classes, boxes], got " + g.shape_str(scores));
  if (!dims_compatible(boxes[0], scores[0]) || !dims_compatible(boxes[1], scores[2]))
    ctx.fail("boxes " + g.shape_str(boxes) + " and scores " + g.shape_str(scores) + " disagree on the batch or the box count");
  ctx.set_shape(0, {ctx.data_symbol("count"), 3});
}

void infer_top_k(InferContext& ctx) {
  Shape out = ctx.shape(0);
  const size_t ax = ctx.axis(ctx.attr_int("axis"), out.rank(), "axis");
  const int64_t k = ctx.attr_int("k");
  if (!dim_is_symbolic(out[ax]) && k > out[ax])
    ctx.fail_attr("`k` = " + std::to_string(k) + " is larger than the axis (" + std::to_string(out[ax]) + ")");
  out[ax] = k;
  ctx.set_shape(0, out);
  ctx.set_shape(1, out);
}

void infer_softmax(InferContext& ctx) {
  const Shape x = ctx.shape(0);
  ctx.axis(ctx.attr_int("axis"), x.rank(), "axis");
  if (ctx.has_input(1)) {  // softmax's mask (API 2): broadcasts to x without growing it
    const Shape mask = ctx.shape(1);
    if (broadcast_shapes(ctx, x, mask) != x)
      ctx.fail("`mask` " + ctx.graph().shape_str(mask) + " must broadcast to x's shape " + ctx.graph().shape_str(x) +
               " without changing it");
  }
  ctx.set_shape(0, x);
}

void infer_norm(InferContext& ctx) {
  const Shape& x = ctx.shape(0);
  const size_t ax = ctx.axis(ctx.attr_int("axis"), x.rank(), "axis");
  Shape tail;
  for (size_t i = ax; i < x.rank(); ++i) tail.push_back(x[i]);
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    const Shape& p = ctx.shape(i);
    bool ok = p.rank() == tail.rank();
    for (size_t d = 0; ok && d < p.rank(); ++d) ok = dims_compatible(p[d], tail[d]);
    if (!ok)
      ctx.fail("`" + std::string(ctx.op().inputs[i].name) + "` must have the normalized shape " +
               ctx.graph().shape_str(tail) + ", got " + ctx.graph().shape_str(p));
  }
  ctx.set_shape(0, x);
}

namespace {
// The product of inputs 0 and 1, either transposed (`ta`, `tb`): leading axes broadcast.
Shape matmul_shape(InferContext& ctx, bool ta, bool tb) {
  const Graph& g = ctx.graph();
  const Shape& a = ctx.shape(0);
  const Shape& b = ctx.shape(1);
  if (a.rank() < 2 || b.rank() < 2)
    ctx.fail("both inputs need rank >= 2 (reshape a vector to [1,k] or [k,1]), got " + g.shape_str(a) +
             " and " + g.shape_str(b));
  const Dim m = a[a.rank() - (ta ? 1 : 2)], ka = a[a.rank() - (ta ? 2 : 1)];
  const Dim kb = b[b.rank() - (tb ? 1 : 2)], n = b[b.rank() - (tb ? 2 : 1)];
  if (!dims_compatible(ka, kb))
    ctx.fail("the contracted dimensions differ: " + g.dim_str(ka) + " (a" + (ta ? ", transposed" : "") + ") vs " +
             g.dim_str(kb) + " (b" + (tb ? ", transposed" : "") + ")");
  Shape ba = Shape::from(a.begin(), a.rank() - 2), bb = Shape::from(b.begin(), b.rank() - 2);
  Shape out = broadcast_shapes(ctx, ba, bb);
  out.push_back(m);
  out.push_back(n);
  return out;
}
}  // namespace

void infer_matmul(InferContext& ctx) { ctx.set_shape(0, matmul_shape(ctx, ctx.attr_bool("transpose_a"), ctx.attr_bool("transpose_b"))); }

// q, k, v of one rank: [batch, heads, seq, head_size], or [batch, seq, heads·head_size] (with
// seq_first [seq, batch, …]); k and v share the sequence, q and k the head size.
void infer_attention(InferContext& ctx) {
  const Graph& g = ctx.graph();
  const Shape q = ctx.shape(0), k = ctx.shape(1), v = ctx.shape(2);
  const size_t rank = q.rank();
  if (rank != 3 && rank != 4)
    ctx.fail("q must have rank 3 ([batch, seq, heads*head_size]) or 4 ([batch, heads, seq, head_size]), got " + g.shape_str(q));
  if (k.rank() != rank || v.rank() != rank)
    ctx.fail("q, k and v must have one rank, got " + g.shape_str(q) + ", " + g.shape_str(k) + " and " + g.shape_str(v));
  const int64_t heads = ctx.attr_int("num_heads");
  const bool seq_first = ctx.attr_bool("seq_first");
  const size_t batch = rank == 3 && seq_first ? 1 : 0, seq = rank == 4 ? 2 : 1 - batch, width = rank - 1;
  auto agree = [&](const char* what, Dim a, Dim b, const char* names) {
    if (!dims_compatible(a, b)) ctx.fail(std::string(what) + " differs: " + g.dim_str(a) + " vs " + g.dim_str(b) + " (" + names + ")");
  };
  agree("the batch", q[batch], k[batch], "q, k");
  agree("the batch", k[batch], v[batch], "k, v");
  agree("the key/value sequence", k[seq], v[seq], "k, v");
  agree("the head size", q[width], k[width], "q, k");
  Dim head_count = heads;
  if (rank == 4) {
    if (seq_first) ctx.fail_attr("`seq_first` applies to rank-3 inputs only; rank 4 is [batch, heads, seq, head_size]");
    agree("the number of heads", q[1], k[1], "q, k");
    agree("the number of heads", k[1], v[1], "k, v");
    if (heads != 1 && !dims_compatible(q[1], heads))
      ctx.fail_attr("`num_heads` = " + std::to_string(heads) + " but q has " + g.dim_str(q[1]) + " heads (axis 1)");
    head_count = q[1];
  } else {
    for (const auto& [name, s] : {std::pair<const char*, const Shape*>{"q", &q}, {"v", &v}})
      if (!dim_is_symbolic((*s)[width]) && (*s)[width] % heads != 0)
        ctx.fail("the last axis of " + std::string(name) + " (" + g.dim_str((*s)[width]) + ") is not a multiple of `num_heads` = " +
                 std::to_string(heads));
  }
  if (ctx.has_input(3)) {  // the mask broadcasts to the scores without growing them
    const Shape scores{q[batch], head_count, q[seq], k[seq]};
    const Shape mask = ctx.shape(3);
    if (mask.rank() > 4 || broadcast_shapes(ctx, scores, mask) != scores)
      ctx.fail("`mask` " + g.shape_str(mask) + " must broadcast to the scores' shape [batch, heads, q_seq, kv_seq] = " +
               g.shape_str(scores) + " without changing it");
  }
  Shape out = q;
  out[width] = v[width];
  ctx.set_shape(0, out);
}

namespace {
// A convolution's result shape from its image (input `xi`), filter (`wi`) and optional bias
// (`bi`) and the attributes conv2d and quantized_conv2d share.
void conv2d_shape(InferContext& ctx, size_t xi, size_t wi, size_t bi) {
  const Graph& g = ctx.graph();
  expect_rank(ctx, xi, 4);
  expect_rank(ctx, wi, 4);
  const Shape& x = ctx.shape(xi);
  const Shape& w = ctx.shape(wi);
  const Span<int64_t> strides = ctx.attr_ints("strides"), pads = ctx.attr_ints("pads"),
                      dil = ctx.attr_ints("dilations");
  expect_len(ctx, "strides", strides, 2);
  expect_len(ctx, "pads", pads, 4);
  expect_len(ctx, "dilations", dil, 2);
  const int64_t groups = ctx.attr_int("groups");
  if ((!dim_is_symbolic(w[2]) && w[2] < 1) || (!dim_is_symbolic(w[3]) && w[3] < 1))
    ctx.fail("the filter's spatial size must be positive, got " + g.shape_str(w));
  int64_t grouped = 0;
  if (!dim_is_symbolic(x[1]) && !dim_is_symbolic(w[1]) && (__builtin_mul_overflow(w[1], groups, &grouped) || x[1] != grouped))
    ctx.fail("input channels " + g.dim_str(x[1]) + " must equal filter channels " + g.dim_str(w[1]) +
             " x groups " + std::to_string(groups));
  if (!dim_is_symbolic(w[0]) && w[0] % groups != 0)
    ctx.fail("output channels " + g.dim_str(w[0]) + " must be divisible by groups " + std::to_string(groups));
  if (ctx.has_input(bi)) {
    const Shape& bias = ctx.shape(bi);
    if (bias.rank() != 1 || !dims_compatible(bias[0], w[0]))
      ctx.fail("`bias` must be [" + g.dim_str(w[0]) + "], got " + g.shape_str(bias));
  }
  Shape out{x[0], w[0], 0, 0};
  for (size_t i = 0; i < 2; ++i) {
    const Dim k = w[2 + i];
    int64_t span = 1;
    if (!dim_is_symbolic(k) && (__builtin_mul_overflow(dil[i], k - 1, &span) || span >= kMaxElements))
      ctx.fail_attr("`dilations` " + list_str(dil) + " make a window beyond any tensor's size");
    if (!dim_is_symbolic(k)) ++span;
    out[2 + i] = window_out(ctx, x[2 + i], pads[i], pads[i + 2], span, strides[i], false, i ? "width" : "height");
  }
  ctx.set_shape(0, out);
}
}  // namespace

void infer_conv2d(InferContext& ctx) { conv2d_shape(ctx, 0, 1, 2); }

void infer_quantized_conv2d(InferContext& ctx) {
  const Graph& g = ctx.graph();
  const auto name = [&](size_t i) { return "`" + std::string(ctx.op().inputs[i].name) + "`"; };
  for (size_t i : {1, 2, 6, 7})  // x's and y's scale and zero point
    if (ctx.shape(i).num_elements() != 1)
      ctx.fail(name(i) + " must hold one value, got " + g.shape_str(ctx.shape(i)));
  const Dim out_channels = ctx.shape(3).rank() == 4 ? ctx.shape(3)[0] : Dim{1};
  for (size_t i : {4, 5}) {  // w's: one, or one per output channel
    const Shape& s = ctx.shape(i);
    if (s.num_elements() != 1 && (s.rank() != 1 || !dims_compatible(s[0], out_channels)))
      ctx.fail(name(i) + " must hold one value or one per output channel [" + g.dim_str(out_channels) + "], got " +
               g.shape_str(s));
  }
  conv2d_shape(ctx, 0, 3, 8);
}

void infer_matmul_integer(InferContext& ctx) {
  const Graph& g = ctx.graph();
  const Shape y = matmul_shape(ctx, false, false);
  const auto per = [&](size_t i, Dim along, const char* what) {
    const Shape& s = ctx.shape(i);
    if (s.num_elements() != 1 && (s.rank() != 1 || !dims_compatible(s[0], along)))
      ctx.fail("`" + std::string(ctx.op().inputs[i].name) + "` must hold one value or one per " + what + " [" + g.dim_str(along) +
               "], got " + g.shape_str(s));
  };
  per(2, y[y.rank() - 2], "row of a");
  per(3, y[y.rank() - 1], "column of b");
  ctx.set_shape(0, y);
}

// a [..., M, K] times the N columns of w that b holds as codes of `bits` bits, in blocks of
// `block_size` along K, each block with its scale and zero point.
void infer_matmul_nbits(InferContext& ctx) {
  const Graph& g = ctx.graph();
  const int64_t bits = ctx.attr_int("bits"), block = ctx.attr_int("block_size");
  if (bits != 2 && bits != 4 && bits != 8) ctx.fail_attr("`bits` must be 2, 4 or 8, got " + std::to_string(bits));
  if ((block & (block - 1)) != 0 || block > (int64_t{1} << 30))
    ctx.fail_attr("`block_size` must be a power of two up to 2^30, got " + std::to_string(block));
  const Shape& a = ctx.shape(0);
  if (a.rank() < 2) ctx.fail("`a` needs rank >= 2 ([..., M, K]), got " + g.shape_str(a));
  const Dim k = a[a.rank() - 1];
  if (dim_is_symbolic(k)) ctx.fail("`a`'s last axis (K) must be a number, got " + g.shape_str(a));
  const Dim n = ctx.shape(1).rank() > 0 ? ctx.shape(1)[0] : Dim{0};
  const Shape blocks{n, (k + block - 1) / block};
  Shape codes = blocks;
  codes.push_back(block * bits / 8);
  const auto expect = [&](size_t i, const Shape& want) {
    const Shape& s = ctx.shape(i);
    bool ok = s.rank() == want.rank();
    for (size_t d = 0; ok && d < s.rank(); ++d) ok = dims_compatible(s[d], want[d]);
    if (!ok)
      ctx.fail("`" + std::string(ctx.op().inputs[i].name) + "` must be " + g.shape_str(want) + " for K = " + std::to_string(k) +
               ", " + std::to_string(bits) + " bits and blocks of " + std::to_string(block) + ", got " + g.shape_str(s));
  };
  expect(1, codes);
  expect(2, blocks);
  if (ctx.has_input(3)) expect(3, blocks);
  Shape y = Shape::from(a.begin(), a.rank() - 1);
  y.push_back(n);
  ctx.set_shape(0, y);
}

void infer_pool2d(InferContext& ctx) {
  expect_rank(ctx, 0, 4);
  const Shape& x = ctx.shape(0);
  const Span<int64_t> kernel = ctx.attr_ints("kernel"), strides = ctx.attr_ints("strides"),
                      pads = ctx.attr_ints("pads");
  expect_len(ctx, "kernel", kernel, 2);
  expect_len(ctx, "strides", strides, 2);
  expect_len(ctx, "pads", pads, 4);
  const bool ceil_mode = ctx.attr_bool("ceil_mode");
  for (size_t i = 0; i < 2; ++i)
    if (pads[i] >= kernel[i] || pads[i + 2] >= kernel[i])
      ctx.fail_attr("padding " + list_str(pads) + " must be smaller than the kernel " + list_str(kernel));
  Shape out{x[0], x[1], 0, 0};
  for (size_t i = 0; i < 2; ++i)
    out[2 + i] = window_out(ctx, x[2 + i], pads[i], pads[i + 2], kernel[i], strides[i], ceil_mode, i ? "width" : "height");
  ctx.set_shape(0, out);
}

void infer_reshape(InferContext& ctx) {
  const Graph& g = ctx.graph();
  const Shape& x = ctx.shape(0);
  const Span<int64_t> spec = ctx.attr_ints("shape");
  Shape out;
  int infer_at = -1;
  for (size_t i = 0; i < spec.size(); ++i) {
    if (spec[i] == -1) {
      if (infer_at >= 0) ctx.fail_attr("`shape` " + list_str(spec) + " has more than one -1");
      infer_at = static_cast<int>(i);
      out.push_back(1);
    } else if (spec[i] == 0) {
      if (i >= x.rank()) ctx.fail_attr("`shape` " + list_str(spec) + " copies axis " + std::to_string(i) + " (0), which the input lacks");
      out.push_back(x[i]);
    } else {
      out.push_back(spec[i]);
    }
  }
  // Element counts, split into a static product and the symbolic factors (as a sorted multiset).
  auto split = [&](const Shape& s, int skip, int64_t& n, std::vector<Dim>& syms) {
    n = 1;
    for (size_t i = 0; i < s.rank(); ++i) {
      if (static_cast<int>(i) == skip) continue;
      if (dim_is_symbolic(s[i])) syms.push_back(s[i]);
      else if (__builtin_mul_overflow(n, s[i], &n) || n > kMaxElements)
        ctx.fail_attr("`shape` " + list_str(spec) + " has more than 2^48 elements (the limit of a tensor)");
    }
    std::sort(syms.begin(), syms.end());
  };
  int64_t n_in, n_out;
  std::vector<Dim> s_in, s_out;
  split(x, -1, n_in, s_in);
  split(out, infer_at, n_out, s_out);
  if (infer_at < 0) {
    if (s_in == s_out && n_in != n_out)
      ctx.fail("cannot reshape " + g.shape_str(x) + " (" + std::to_string(n_in) + " elements) to " + g.shape_str(out) +
               " (" + std::to_string(n_out) + " elements)");
  } else {
    for (Dim d : s_out) {  // cancel symbols present on both sides
      auto it = std::find(s_in.begin(), s_in.end(), d);
      if (it != s_in.end()) s_in.erase(it);
    }
    if (n_out == 0 || n_in % n_out != 0) {
      if (s_in.empty())
        ctx.fail("cannot reshape " + g.shape_str(x) + " to " + list_str(spec) + ": " + std::to_string(n_in) +
                 " elements do not divide into " + std::to_string(n_out));
      std::string expr;
      for (Dim d : s_in) expr += g.dim_str(d) + "*";
      out[static_cast<size_t>(infer_at)] = ctx.derived_symbol("(" + expr + std::to_string(n_in) + "/" + std::to_string(n_out) + ")");
    } else if (s_in.empty()) {
      out[static_cast<size_t>(infer_at)] = n_in / n_out;
    } else {
      std::string expr;
      for (Dim d : s_in) expr += (expr.empty() ? "" : "*") + g.dim_str(d);
      const int64_t f = n_in / n_out;
      out[static_cast<size_t>(infer_at)] = f == 1 && s_in.size() == 1 ? s_in[0] : ctx.derived_symbol(f == 1 ? expr : expr + "*" + std::to_string(f));
    }
  }
  ctx.set_shape(0, out);
}

void infer_transpose(InferContext& ctx) {
  const Shape& x = ctx.shape(0);
  const Span<int64_t> perm = ctx.attr_ints("perm");
  Shape out;
  if (perm.empty()) {
    for (size_t i = x.rank(); i-- > 0;) out.push_back(x[i]);
  } else {
    if (perm.size() != x.rank())
      ctx.fail_attr("`perm` " + list_str(perm) + " must have one entry per axis of " + ctx.graph().shape_str(x));
    bool seen[kMaxRank] = {};
    for (int64_t p : perm) {
      const size_t ax = ctx.axis(p, x.rank(), "perm");
      if (seen[ax]) ctx.fail_attr("`perm` " + list_str(perm) + " is not a permutation");
      seen[ax] = true;
      out.push_back(x[ax]);
    }
  }
  ctx.set_shape(0, out);
}

void infer_concat(InferContext& ctx) {
  const Graph& g = ctx.graph();
  Shape out = ctx.shape(0);
  const size_t ax = ctx.axis(ctx.attr_int("axis"), out.rank(), "axis");
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    const Shape& s = ctx.shape(i);
    bool ok = s.rank() == out.rank();
    for (size_t d = 0; ok && d < s.rank(); ++d) ok = d == ax || dims_compatible(s[d], out[d]);
    if (!ok)
      ctx.fail("xs[" + std::to_string(i) + "] " + g.shape_str(s) + " does not match xs[0] " + g.shape_str(ctx.shape(0)) +
               " outside axis " + std::to_string(ax));
    int64_t joined = 0;  // (sizes of a tensor each, but their sum may leave int64)
    if (!dim_is_symbolic(out[ax]) && !dim_is_symbolic(s[ax]) && (__builtin_add_overflow(out[ax], s[ax], &joined) || joined > kMaxElements))
      ctx.fail("xs[0.." + std::to_string(i) + "] joined along axis " + std::to_string(ax) + " would hold more than any tensor's size");
    out[ax] = combine(ctx, out[ax], "+", s[ax], [](int64_t a, int64_t b) { return a + b; });
  }
  ctx.set_shape(0, out);
}

void infer_split(InferContext& ctx) {
  const Shape& x = ctx.shape(0);
  const size_t ax = ctx.axis(ctx.attr_int("axis"), x.rank(), "axis");
  const Span<int64_t> sizes = ctx.attr_ints("sizes");
  if (sizes.empty()) ctx.fail_attr("`sizes` must name at least one piece");
  int64_t total = 0;
  for (int64_t s : sizes)
    if (__builtin_add_overflow(total, s, &total) || total > kMaxElements)
      ctx.fail_attr("`sizes` " + list_str(sizes) + " add up to more than any tensor's size");
  if (!dim_is_symbolic(x[ax]) && total != x[ax])
    ctx.fail("`sizes` " + list_str(sizes) + " add up to " + std::to_string(total) + ", but axis " +
             std::to_string(ax) + " has " + std::to_string(x[ax]));
  for (size_t i = 0; i < sizes.size(); ++i) {
    Shape s = x;
    s[ax] = sizes[i];
    ctx.set_shape(i, s);
  }
}

void infer_slice(InferContext& ctx) {
  const Shape& x = ctx.shape(0);
  const Span<int64_t> starts = ctx.attr_ints("starts"), ends = ctx.attr_ints("ends"),
                      axes = ctx.attr_ints("axes"), steps = ctx.attr_ints("steps");
  if (starts.size() != ends.size() || (!axes.empty() && axes.size() != starts.size()) ||
      (!steps.empty() && steps.size() != starts.size()))
    ctx.fail_attr("`starts`, `ends` and (when given) `axes` and `steps` need the same length, got " +
                  list_str(starts) + ", " + list_str(ends) + ", " + list_str(axes) + ", " + list_str(steps));
  if (starts.size() > x.rank()) ctx.fail_attr("more slices than axes");
  Shape out = x;
  bool seen[kMaxRank] = {};
  for (size_t i = 0; i < starts.size(); ++i) {
    const size_t ax = axes.empty() ? i : ctx.axis(axes[i], x.rank(), "axes");
    if (seen[ax]) ctx.fail_attr("`axes` " + list_str(axes) + " names an axis twice");
    seen[ax] = true;
    int64_t step = steps.empty() ? 1 : steps[i];
    if (step == 0) ctx.fail_attr("`steps` cannot contain 0");
    const Dim d = x[ax];
    // A step longer than the axis takes one element at most, as does a step of the axis' length + 1.
    if (!dim_is_symbolic(d)) step = std::clamp<int64_t>(step, -(d + 1), d + 1);
    if (dim_is_symbolic(d)) {
      const bool whole = step == 1 && starts[i] == 0 && ends[i] >= INT32_MAX;
      out[ax] = whole ? d : ctx.derived_symbol("slice(" + ctx.graph().dim_str(d) + "," + std::to_string(starts[i]) + ":" +
                                                   std::to_string(ends[i]) + ":" + std::to_string(step) + ")");
      continue;
    }
    // numpy / ONNX clamping.
    auto clamp = [&](int64_t v, bool is_end) {
      if (v < 0) v += d;
      if (step > 0) return std::clamp<int64_t>(v, 0, d);
      (void)is_end;
      return std::clamp<int64_t>(v, -1, d - 1);
    };
    const int64_t s = clamp(starts[i], false), e = clamp(ends[i], true);
    const int64_t n = step > 0 ? (e - s + step - 1) / step : (s - e + (-step) - 1) / (-step);
    out[ax] = std::max<int64_t>(n, 0);
  }
  ctx.set_shape(0, out);
}

void infer_gather(InferContext& ctx) {
  const Shape& x = ctx.shape(0);
  const Shape& idx = ctx.shape(1);
  const size_t ax = ctx.axis(ctx.attr_int("axis"), x.rank(), "axis");
  Shape out;
  for (size_t i = 0; i < ax; ++i) out.push_back(x[i]);
  if (out.rank() + idx.rank() + (x.rank() - ax - 1) > static_cast<size_t>(kMaxRank))
    ctx.fail("the result would exceed rank " + std::to_string(kMaxRank));
  for (Dim d : idx) out.push_back(d);
  for (size_t i = ax + 1; i < x.rank(); ++i) out.push_back(x[i]);
  ctx.set_shape(0, out);
}

void infer_sequence_at(InferContext& ctx) {
  const Graph& g = ctx.graph();
  const size_t n = ctx.num_inputs() - 1;  // the elements, then the position
  const Shape& first = ctx.shape(0);
  for (size_t i = 1; i < n; ++i) {
    const Shape& s = ctx.shape(i);
    bool same = s.rank() == first.rank();
    for (size_t d = 0; same && d < s.rank(); ++d) same = dims_compatible(s[d], first[d]);
    if (!same)
      ctx.fail("elements[" + std::to_string(i) + "] " + g.shape_str(s) + " differs from elements[0] " + g.shape_str(first) +
               ": a position read at run time picks among elements of one shape");
  }
  if (ctx.shape(n).rank() != 0) ctx.fail("`position` " + g.shape_str(ctx.shape(n)) + " must be a scalar");
  ctx.set_shape(0, first);
}

void infer_scatter_elements(InferContext& ctx) {
  const Graph& g = ctx.graph();
  const Shape& data = ctx.shape(0);
  const Shape& idx = ctx.shape(1);
  const Shape& upd = ctx.shape(2);
  if (idx.rank() != data.rank())
    ctx.fail("`indices` " + g.shape_str(idx) + " must have the rank of `data` " + g.shape_str(data));
  if (upd.rank() != idx.rank())
    ctx.fail("`updates` " + g.shape_str(upd) + " must have the shape of `indices` " + g.shape_str(idx));
  const size_t ax = ctx.axis(ctx.attr_int("axis"), data.rank(), "axis");
  for (size_t i = 0; i < idx.rank(); ++i) {
    if (!dims_compatible(idx[i], upd[i]))
      ctx.fail("`updates` " + g.shape_str(upd) + " must have the shape of `indices` " + g.shape_str(idx));
    // Off the scattered axis an index position is also the data position: it must exist.
    if (i != ax && !dim_is_symbolic(idx[i]) && !dim_is_symbolic(data[i]) && idx[i] > data[i])
      ctx.fail("`indices` " + g.shape_str(idx) + " is larger than `data` " + g.shape_str(data) + " on axis " + std::to_string(i));
  }
  ctx.set_shape(0, data);
}

void infer_scatter_nd(InferContext& ctx) {
  const Graph& g = ctx.graph();
  const Shape& data = ctx.shape(0);
  const Shape& idx = ctx.shape(1);
  const Shape& upd = ctx.shape(2);
  if (idx.rank() == 0 || dim_is_symbolic(idx[idx.rank() - 1]))
    ctx.fail("`indices` " + g.shape_str(idx) + " needs a static last axis (the index tuples' length)");
  const auto k = static_cast<size_t>(idx[idx.rank() - 1]);
  if (k > data.rank())
    ctx.fail("index tuples of length " + std::to_string(k) + " address more axes than `data` " + g.shape_str(data) + " has");
  Shape want;
  for (size_t i = 0; i + 1 < idx.rank(); ++i) want.push_back(idx[i]);
  for (size_t i = k; i < data.rank(); ++i) want.push_back(data[i]);
  bool ok = want.rank() == upd.rank();
  for (size_t i = 0; ok && i < want.rank(); ++i) ok = dims_compatible(want[i], upd[i]);
  if (!ok) ctx.fail("`updates` " + g.shape_str(upd) + " must have the shape " + g.shape_str(want) + " (indices.shape[:-1] + data.shape[k:])");
  ctx.set_shape(0, data);
}

void infer_expand(InferContext& ctx) {
  const Graph& g = ctx.graph();
  const Shape& x = ctx.shape(0);
  const Span<int64_t> spec = ctx.attr_ints("shape");
  if (spec.size() < x.rank())
    ctx.fail("cannot expand " + g.shape_str(x) + " to the lower rank " + list_str(spec));
  const Shape target = Shape::from(spec.data(), spec.size());
  const size_t lead = target.rank() - x.rank();
  for (size_t i = 0; i < x.rank(); ++i)
    if (x[i] != 1 && !dims_compatible(x[i], target[lead + i]))
      ctx.fail("cannot expand " + g.shape_str(x) + " to " + list_str(spec) + ": axis " + std::to_string(lead + i) +
               " has size " + g.dim_str(x[i]) + ", which cannot become " + std::to_string(target[lead + i]) +
               " (only a size-1 axis expands)");
  ctx.set_shape(0, target);
}

void infer_squeeze(InferContext& ctx) {
  const Graph& g = ctx.graph();
  const Shape& x = ctx.shape(0);
  const Span<int64_t> axes = ctx.attr_ints("axes");
  bool drop[kMaxRank] = {};
  for (int64_t a : axes) {
    const size_t ax = ctx.axis(a, x.rank(), "axes");
    if (x[ax] != 1 && !dim_is_symbolic(x[ax]))
      ctx.fail("axis " + std::to_string(ax) + " of " + g.shape_str(x) + " has size " + g.dim_str(x[ax]) + ", not 1");
    drop[ax] = true;
  }
  Shape out;
  for (size_t i = 0; i < x.rank(); ++i)
    if (!(axes.empty() ? x[i] == 1 : drop[i])) out.push_back(x[i]);
  ctx.set_shape(0, out);
}

void infer_unsqueeze(InferContext& ctx) {
  const Shape& x = ctx.shape(0);
  const Span<int64_t> axes = ctx.attr_ints("axes");
  const size_t rank = x.rank() + axes.size();
  if (rank > static_cast<size_t>(kMaxRank)) ctx.fail("the result would exceed rank " + std::to_string(kMaxRank));
  bool ins[kMaxRank] = {};
  for (int64_t a : axes) {
    const size_t ax = ctx.axis(a, rank, "axes");
    if (ins[ax]) ctx.fail_attr("`axes` " + list_str(axes) + " names an axis twice");
    ins[ax] = true;
  }
  Shape out;
  size_t k = 0;
  for (size_t i = 0; i < rank; ++i) out.push_back(ins[i] ? 1 : x[k++]);
  ctx.set_shape(0, out);
}

namespace {

// Integers a double holds exactly: below 2^53 every one. At 2^53 and beyond, a float attribute
// for an integer dtype may not be the value the caller wrote (2^53 + 1 arrives as 2^53, and
// nothing here can tell them apart), so the first refused magnitude is 2^53 itself.
constexpr double kExactInDouble = 9007199254740992.0;  // 2^53

bool is_integer(DType t) { return !dtype_is_float(t) && t != DType::Bool; }

// Whether integer dtype `t` holds `v`.
bool fits_integer(DType t, __int128 v) {
  const unsigned bits = static_cast<unsigned>(dtype_size(t)) * 8;
  if (dtype_is_unsigned(t)) return v >= 0 && v <= (static_cast<__int128>(1) << bits) - 1;
  return v >= -(static_cast<__int128>(1) << (bits - 1)) && v < (static_cast<__int128>(1) << (bits - 1));
}

// A double at or past 2^53 as the integer it is (std::to_string would add ".000000").
std::string whole_number(double v) {
  char text[64];
  std::snprintf(text, sizeof text, "%.0f", v);
  return text;
}

void exact_for_integers(InferContext& ctx, DType dtype, std::initializer_list<const char*> attrs, const char* instead) {
  if (!is_integer(dtype)) return;
  for (const char* name : attrs)
    if (std::fabs(ctx.attr_float(name)) >= kExactInDouble)
      ctx.fail_attr("`" + std::string(name) + "` = " + whole_number(ctx.attr_float(name)) + " is beyond the integers a double holds "
                    "exactly (below 2^53; 2^53 + 1 would arrive as 2^53) and the result is " + dtype_name(dtype) + ": " + instead);
}

}  // namespace

void infer_pad(InferContext& ctx) {
  const Graph& g = ctx.graph();
  const Shape& x = ctx.shape(0);
  exact_for_integers(ctx, g.values[ctx.input_id(0)].dtype, {"value"}, "pad with a concat of a constant instead");
  const Span<int64_t> pads = ctx.attr_ints("pads");
  expect_len(ctx, "pads", pads, 2 * x.rank());
  const bool reflect = ctx.attr_int("mode") == 1, edge = ctx.attr_int("mode") == 2;
  Shape out = x;
  for (size_t i = 0; i < x.rank(); ++i) {
    const int64_t before = pads[i], after = pads[x.rank() + i];
    int64_t both = 0;
    if (__builtin_add_overflow(before, after, &both) || both > kMaxElements)
      ctx.fail_attr("`pads` " + list_str(pads) + " are beyond any tensor's size");
    if (!dim_is_symbolic(x[i])) {
      if (reflect && (before >= x[i] || after >= x[i]))
        ctx.fail("reflect padding " + std::to_string(std::max(before, after)) + " needs axis " + std::to_string(i) +
                 " longer than that, got " + g.shape_str(x));
      if (edge && x[i] == 0 && before + after > 0) ctx.fail("edge padding of an empty axis");
    }
    out[i] = combine(ctx, x[i], "+", both, [](int64_t a, int64_t b) { return a + b; });
  }
  ctx.set_shape(0, out);
}

void infer_fill(InferContext& ctx) {
  exact_for_integers(ctx, static_cast<DType>(ctx.attr_int("dtype")), {"value"}, "make the tensor as a constant");
  const Span<int64_t> shape = ctx.attr_ints("shape");
  ctx.set_shape(0, Shape::from(shape.data(), shape.size()));
}

void infer_range(InferContext& ctx) {
  const double start = ctx.attr_float("start"), limit = ctx.attr_float("limit"), step = ctx.attr_float("step");
  if (step == 0 || !std::isfinite(step) || !std::isfinite(start) || !std::isfinite(limit))
    ctx.fail_attr("`start`, `limit` and `step` must be finite, and `step` non-zero");
  exact_for_integers(ctx, static_cast<DType>(ctx.attr_int("dtype")), {"start", "limit", "step"}, "integer_range counts in int64");
  const double n = std::ceil((limit - start) / step);
  if (n > 1e12) ctx.fail_attr("the range would have " + std::to_string(n) + " elements");
  ctx.set_shape(0, Shape{static_cast<Dim>(std::max(n, 0.0))});
}

void infer_integer_range(InferContext& ctx) {
  const __int128 start = ctx.attr_int("start"), limit = ctx.attr_int("limit"), step = ctx.attr_int("step");
  if (step == 0) ctx.fail_attr("`step` must be non-zero");
  const auto dtype = static_cast<DType>(ctx.attr_int("dtype"));
  if (dtype == DType::Bool || dtype == DType::BF16) ctx.fail_attr(std::string("`dtype` is ") + dtype_name(dtype) + ": a range is numbers");
  // ceil((limit - start) / step), exactly: the difference of two int64 needs 65 bits.
  const __int128 span = limit - start;
  const __int128 n = span / step + (span % step != 0 && (span > 0) == (step > 0));
  if (n > 1000000000000) ctx.fail_attr("the range would have " + std::to_string(static_cast<int64_t>(n)) + " elements");
  if (n > 0 && is_integer(dtype)) {
    const __int128 last = start + (n - 1) * step;
    for (const __int128 v : {start, last})
      if (!fits_integer(dtype, v))
        ctx.fail_attr("the range reaches " + std::to_string(static_cast<int64_t>(v)) + ", which " + dtype_name(dtype) + " cannot hold");
  }
  ctx.set_shape(0, Shape{static_cast<Dim>(n > 0 ? n : 0)});
}

namespace {
void check_scalar_bool(InferContext& ctx, ValueId id, const std::string& what) {
  const Value& v = ctx.graph().values[id];
  const Shape s = ctx.graph().shape(id);
  if (v.dtype != DType::Bool || s.num_elements() > 1 || s.rank() > 1)
    ctx.fail(what + " must be a bool scalar, got " + ctx.graph().type_str(id));
}
}  // namespace

void infer_if_else(InferContext& ctx) {
  const Graph& g = ctx.graph();
  check_scalar_bool(ctx, ctx.input_id(0), "`cond`");
  const Region& a = g.regions[ctx.bodies()[0]];
  const Region& b = g.regions[ctx.bodies()[1]];
  if (a.results.size() != b.results.size())
    ctx.fail("the branches return " + std::to_string(a.results.size()) + " and " + std::to_string(b.results.size()) +
             " tensors; they must return the same number");
  for (size_t i = 0; i < a.results.size(); ++i) {
    const DType ta = g.values[a.results[i]].dtype, tb = g.values[b.results[i]].dtype;
    const Shape sa = g.shape(a.results[i]), sb = g.shape(b.results[i]);
    if (ta != tb || sa.rank() != sb.rank())
      ctx.fail("result " + std::to_string(i) + " is " + g.type_str(a.results[i]) + " in then_branch but " +
               g.type_str(b.results[i]) + " in else_branch; dtypes and ranks must agree");
    Shape s = sa;
    for (size_t d = 0; d < s.rank(); ++d)
      if (sa[d] != sb[d]) s[d] = ctx.derived_symbol("if(" + g.dim_str(sa[d]) + "|" + g.dim_str(sb[d]) + ")");
    ctx.output(i).dtype = ta;
    ctx.set_shape(i, s);
  }
}

void infer_while_loop(InferContext& ctx) {
  const Graph& g = ctx.graph();
  const Region& cond = g.regions[ctx.bodies()[0]];
  const Region& body = g.regions[ctx.bodies()[1]];
  const size_t n = ctx.num_inputs();
  if (cond.params.size() != n || body.params.size() != n)
    ctx.fail("the bodies must take one parameter per loop-carried value (" + std::to_string(n) + ")");
  if (cond.results.size() != 1) ctx.fail("`cond` must return exactly one tensor");
  check_scalar_bool(ctx, cond.results[0], "the result of `cond`");
  if (body.results.size() != n)
    ctx.fail("`body` returns " + std::to_string(body.results.size()) + " tensors for " + std::to_string(n) +
             " loop-carried values");
  for (size_t i = 0; i < n; ++i) {
    const DType t = ctx.input(i).dtype;
    const Shape s = ctx.shape(i);
    if (t != g.values[body.results[i]].dtype || s != g.shape(body.results[i]))
      ctx.fail("loop-carried value " + std::to_string(i) + " enters as " + g.type_str(ctx.input_id(i)) +
               " but `body` returns " + g.type_str(body.results[i]) + "; they must match");
    ctx.output(i).dtype = t;
    ctx.set_shape(i, s);
  }
}

}  // namespace esg::ir
