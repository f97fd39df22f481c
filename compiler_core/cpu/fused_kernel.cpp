#include "cpu/fused_kernel.hpp"

#include <algorithm>
#include <array>
#include <optional>

#include "cpu/conv.hpp"
#include "cpu/gemm.hpp"
#include "eval/indexing.hpp"
#include "eval/scalar_math.hpp"

namespace esg::cpu {
namespace {

using ir::Graph;
using ir::kNone;
using ir::NodeId;
using ir::ValueId;
using runtime::FusedGroup;
using Operand = runtime::GroupStep::Operand;
using From = runtime::GroupStep::From;

// A value of `dtype` as the unfused kernel would have stored and reloaded it: through the same
// store_f and load_f, so rounding and saturation are defined once.
double round_to(ir::DType t, double v) {
  alignas(8) uint8_t element[8];
  const eval::TensorRef one{t, ir::Shape{}, element};
  eval::store_f(one, 0, v);
  return eval::load_f(one, 0);
}

// `v` wrapped into integer dtype `t`, as the unfused kernels store it (docs/reliability.md's
// integer rules: arithmetic wraps around).
int64_t wrap_to(ir::DType t, int64_t v) {
  alignas(8) uint8_t element[8];
  const eval::TensorRef one{t, ir::Shape{}, element};
  eval::store_i(one, 0, v);
  return eval::load_i(one, 0);
}

// The double/int64 path's working memory: tiles of inputs and results, operand rows, per-input modes.
struct Scratch {
  std::vector<double> tile, in_f;
  std::vector<int64_t> tile_i, in_i, iv;  // tile_i: integer members' results, exact (a double holds 2^53)
  std::vector<const double*> rows_f;
  std::vector<const int64_t*> rows_i;
  std::vector<char> direct, splat;
};

// run_f32's working memory, per thread.
struct F32Scratch {
  std::vector<float> tile, own, head_rows;
  std::vector<const float*> in_rows, rows;
  std::vector<float*> result;
};

// Whether `n` can head a group: a matmul whose B is one matrix and whose A is not transposed
// (so A's rows are the result's rows), or an f32 convolution (its oneDNN primitive applies the
// group as post-ops, or the group runs over its result).
bool can_head(const Graph& g, const ir::Node& n, const ir::Node& member) {
  if (!elementwise_f32_kernel(g, member)) return false;  // heads run only before f32 rows
  if (is_conv2d_f32(g, n)) return true;
  if (n.op->kind != ir::OpKind::matmul || g.values[n.first_output].dtype != ir::DType::F32) return false;
  const auto in = g.inputs(n);
  return g.values[in[0]].dtype == ir::DType::F32 && g.values[in[1]].dtype == ir::DType::F32 && g.shape(in[1]).rank() == 2 &&
         g.shape(n.first_output).rank() >= 2 && !ir::MatmulAttrs(g, n).transpose_a;
}

// Tiles for the steps' results, reused once a result has no reader left: a chain of any length
// needs two or three, so a chunk's working set stays a few KB of L1 however long the group is.
// A step takes its tile before its operands' tiles are freed (a row's output overlaps no
// operand), and outputs keep theirs to the end (they are stored after every member ran).
void assign_slots(std::vector<F32Step>& steps, size_t& slots) {
  std::vector<size_t> last_read(steps.size(), 0);
  for (size_t si = 0; si < steps.size(); ++si) {
    if (steps[si].output >= 0) last_read[si] = steps.size();
    for (const Operand& o : steps[si].operands)
      if (o.from == From::Step) last_read[o.index] = std::max(last_read[o.index], si);
  }
  std::vector<size_t> free;
  slots = 0;
  for (size_t si = 0; si < steps.size(); ++si) {
    if (free.empty()) free.push_back(slots++);
    steps[si].slot = free.back();
    free.pop_back();
    for (const Operand& o : steps[si].operands)
      if (o.from == From::Step && last_read[o.index] == si &&
          std::find(free.begin(), free.end(), steps[o.index].slot) == free.end())
        free.push_back(steps[o.index].slot);
  }
}

// A step that multiplies, adds or subtracts a single-element f32 input: what fold_stages moves
// into a neighbour's stage.
struct ScalarOp {
  enum Kind : uint8_t { Mul, Add, Sub, SubFrom } kind;  // x·s, x + s, x - s, s - x
  size_t operand;                                       // x's position in the step's operands
  int input;                                            // s, in FusedGroup::inputs
};

std::optional<ScalarOp> scalar_op(const Graph& g, const FusedKernel& kernel, const runtime::GroupStep& step, const F32Step& s) {
  const FusedGroup& group = *kernel.group;
  const ir::OpKind op = g.nodes[step.node].op->kind;
  using K = ir::OpKind;
  if (s.operands.size() != 2 || s.dtype != ir::DType::F32 || (op != K::mul && op != K::add && op != K::sub)) return std::nullopt;
  auto is_scalar = [&](const Operand& o) {
    return o.from == From::Input && kernel.layouts[o.index].access == Access::Scalar &&
           g.values[group.inputs[o.index]].dtype == ir::DType::F32;
  };
  for (size_t k = 0; k < 2; ++k) {
    if (!is_scalar(s.operands[k]) || is_scalar(s.operands[1 - k])) continue;
    const ScalarOp::Kind kind = op == K::mul ? ScalarOp::Mul : op == K::add ? ScalarOp::Add : k == 1 ? ScalarOp::Sub : ScalarOp::SubFrom;
    return ScalarOp{kind, 1 - k, static_cast<int>(s.operands[k].index)};
  }
  return std::nullopt;
}

// Appends `op` to a stage if the stage still rounds as the ops one after the other: one
// multiply, then one add (x - s is x + (-s) and s - x is (-x) + s, both exactly; a negated
// product is the product of the negated scale, also exactly).
bool append(F32Step::Stage& st, const ScalarOp& op) {
  if (st.shift >= 0 || st.negate_scale) return false;
  switch (op.kind) {
    case ScalarOp::Mul:
      if (st.scale >= 0) return false;
      st.scale = op.input;
      return true;
    case ScalarOp::Add: st.shift = op.input; return true;
    case ScalarOp::Sub: st.shift = op.input, st.negate_shift = true; return true;
    case ScalarOp::SubFrom: st.shift = op.input, st.negate_scale = true; return true;
  }
  return false;
}

// FusedKernel::f32_steps from the group's steps: each scalar op whose operand is a step no one else
// reads joins that step's result stage (a chain of them as far as one stage holds); then each
// one-input step whose operand is a scalar op (or a multiply followed by an add) no one else
// reads takes it as its operand stage. What a folded op's readers read is its host's result.
std::vector<F32Step> fold_stages(const Graph& g, const FusedKernel& kernel) {
  const FusedGroup& group = *kernel.group;
  std::vector<F32Step> steps;
  for (const runtime::GroupStep& gs : group.steps) {
    const ElementwiseF32* f32 = find_elementwise_f32(*g.nodes[gs.node].op);
    F32Step s;
    s.row = f32->row;
    s.row_affine = f32->row_affine;
    s.operands = gs.operands;
    for (double a : gs.attrs) s.attrs.push_back(static_cast<float>(a));
    s.dtype = gs.dtype;
    s.output = gs.output;
    steps.push_back(std::move(s));
  }
  const size_t count = steps.size();
  std::vector<std::optional<ScalarOp>> ops(count);
  std::vector<size_t> readers(count, 0), alias(count);
  std::vector<char> removed(count, 0);
  for (size_t si = 0; si < count; ++si) {
    ops[si] = scalar_op(g, kernel, group.steps[si], steps[si]);
    alias[si] = si;
    for (const Operand& o : steps[si].operands)
      if (o.from == From::Step) ++readers[o.index];
  }
  auto sole_reader = [&](size_t si) { return readers[si] == 1 && steps[si].output < 0; };
  for (size_t si = 0; si < count; ++si) {
    for (Operand& o : steps[si].operands)
      if (o.from == From::Step) o.index = alias[o.index];
    if (!ops[si]) continue;
    const Operand x = steps[si].operands[ops[si]->operand];
    if (x.from != From::Step) continue;
    F32Step& host = steps[x.index];
    if (ops[x.index] || !host.row_affine || host.dtype != ir::DType::F32 || !sole_reader(x.index) || !append(host.post, *ops[si]))
      continue;
    removed[si] = 1;
    alias[si] = x.index;
    readers[x.index] = readers[si];
    host.output = steps[si].output;
  }
  auto foldable = [&](const Operand& o) {
    return o.from == From::Step && !removed[o.index] && ops[o.index] && sole_reader(o.index);
  };
  for (size_t si = 0; si < count; ++si) {
    F32Step& s = steps[si];
    if (removed[si] || ops[si] || s.operands.size() != 1 || !s.row_affine || !foldable(s.operands[0])) continue;
    // The stage's ops in order: a multiply before an add or subtract, if there is one.
    std::vector<size_t> chain = {s.operands[0].index};
    const Operand before = steps[chain[0]].operands[ops[chain[0]]->operand];
    if (ops[chain[0]]->kind != ScalarOp::Mul && foldable(before) && ops[before.index]->kind == ScalarOp::Mul)
      chain.insert(chain.begin(), before.index);
    for (size_t c : chain) append(s.pre, *ops[c]), removed[c] = 1;
    s.operands[0] = steps[chain[0]].operands[ops[chain[0]]->operand];
  }
  std::vector<size_t> position(count, 0);
  std::vector<F32Step> kept;
  for (size_t si = 0; si < count; ++si)
    if (!removed[si]) position[si] = kept.size(), kept.push_back(std::move(steps[si]));
  for (F32Step& s : kept)
    for (Operand& o : s.operands)
      if (o.from == From::Step) o.index = position[o.index];
  return kept;
}

// `input_shapes`: each input's shape as the kernel reads it (Format::physical_shape).
void bind_f32(const Graph& g, FusedKernel& kernel, const std::vector<ir::Shape>& input_shapes) {
  const FusedGroup& group = *kernel.group;
  // (Groups across types, for a device backend's host fallback, have members the f32 rows do not serve.)
  for (const runtime::GroupStep& s : group.steps)
    if (!elementwise_f32_kernel(g, g.nodes[s.node])) return;
  kernel.read_by_steps.assign(group.inputs.size(), 0);
  for (const runtime::GroupStep& s : group.steps)
    for (const Operand& o : s.operands)
      if (o.from == From::Input) kernel.read_by_steps[o.index] = 1;
  std::vector<ir::Shape> shapes;
  for (size_t k = 0; k < group.inputs.size(); ++k) {
    const ir::Shape& s = input_shapes[k];
    shapes.push_back(!kernel.read_by_steps[k] || s == kernel.shape ? kernel.shape : s);
  }
  if (group.head != kNone) {
    const ir::Node& n = g.nodes[group.head];
    const auto in = g.inputs(n);
    auto input_at = [&](ValueId v) { return static_cast<size_t>(std::find(group.inputs.begin(), group.inputs.end(), v) - group.inputs.begin()); };
    if (is_conv2d_f32(g, n)) {
      kernel.head_kind = FusedKernel::HeadKind::Conv2d;
    } else {
      kernel.head_a = input_at(in[0]);
      kernel.head_b = input_at(in[1]);
      kernel.head_transpose_b = ir::MatmulAttrs(g, n).transpose_b;
      const ir::Shape a = g.shape(in[0]);
      kernel.head_depth = a[a.rank() - 1];
    }
  }
  kernel.layouts.resize(shapes.size());
  std::vector<const ir::Shape*> pointers;
  for (const ir::Shape& s : shapes) pointers.push_back(&s);
  kernel.run = plan_operands(kernel.shape, pointers.data(), pointers.size(), kernel.layouts.data());
  kernel.f32_steps = fold_stages(g, kernel);
  kernel.read_by_steps.assign(group.inputs.size(), 0);
  for (const F32Step& s : kernel.f32_steps)
    for (const Operand& o : s.operands)
      if (o.from == From::Input) kernel.read_by_steps[o.index] = 1;
  assign_slots(kernel.f32_steps, kernel.slots);
  kernel.f32 = true;
}

bool overlaps(const eval::TensorRef& a, const eval::TensorRef& b) {
  return a.bytes < b.bytes + b.nbytes() && b.bytes < a.bytes + a.nbytes();
}

// An all-f32 group: chunks of every member's results on f32 rows; f32 inputs are read in place
// where a chunk's elements are contiguous. The chunk's outputs are stored after all
// its members ran, since an output may share an input's memory (in-place reuse). Results of
// comparisons and logic are 0 or 1, as bools are. With a head, the group runs block of rows by
// block of rows: a matmul head's rows into a block the size of L2's share, then the members
// over it; a convolution head's results are all in `head_values` already.
void run_f32(const FusedKernel& kernel, const std::vector<const eval::TensorRef*>& in,
             const std::vector<const eval::TensorRef*>& out, const eval::Parallel* parallel, const float* head_values) {
  const FusedGroup& group = *kernel.group;
  constexpr size_t T = static_cast<size_t>(kChunk);
  const int64_t total = kernel.shape.num_elements();
  const int64_t width = kernel.shape.rank() ? kernel.shape[kernel.shape.rank() - 1] : 1;
  const bool conv = group.head != kNone && kernel.head_kind == FusedKernel::HeadKind::Conv2d;
  const bool head = group.head != kNone && !conv;  // a head computed block by block
  if (total == 0) return;
  // An f32 output that shares no bytes with an input is written by its step in place, instead
  // of through a tile and a copy; its readers in the group read it there.
  const std::vector<F32Step>& steps = kernel.f32_steps;
  std::array<float*, runtime::kMaxGroupOps> to_memory{};
  for (size_t si = 0; si < steps.size(); ++si) {
    const int o = steps[si].output;
    if (o < 0 || out[static_cast<size_t>(o)]->dtype != ir::DType::F32) continue;
    const eval::TensorRef& t = *out[static_cast<size_t>(o)];
    if (std::none_of(in.begin(), in.end(), [&](const eval::TensorRef* x) { return overlaps(t, *x); })) to_memory[si] = t.data<float>();
  }
  // The stages' scales and shifts, from this run's single-element inputs.
  std::array<Affine, runtime::kMaxGroupOps> affine{};
  for (size_t si = 0; si < steps.size(); ++si) {
    auto value = [&](int input, bool negate, float none) {
      const float v = input < 0 ? none : in[static_cast<size_t>(input)]->data<float>()[0];
      return negate ? -v : v;
    };
    const F32Step::Stage &pre = steps[si].pre, &post = steps[si].post;
    affine[si] = {value(pre.scale, pre.negate_scale, 1.0f), value(pre.shift, pre.negate_shift, -0.0f),
                  value(post.scale, post.negate_scale, 1.0f), value(post.shift, post.negate_shift, -0.0f)};
  }
  // Without a head, blocks of kChunk elements; with one, blocks of whole rows.
  const int64_t block = head ? (kernel.head_block_rows ? kernel.head_block_rows : head_rows_per_block(width)) * width : kChunk;
  const int64_t blocks = (total + block - 1) / block;
  // A head's block costs K multiply-adds an element: blocks of few columns but deep rows (a
  // feed-forward layer's second product, 64 x 768 of depth 3072) are worth a thread each.
  split_work(blocks, head ? block * std::max<int64_t>(kernel.head_depth, 1) : block, parallel, [&](int64_t first, int64_t last) {
    // The buffers are the running thread's own and kept between runs, reached through one
    // reference: each use of a thread_local by name costs a TLS lookup call in a shared library.
    thread_local F32Scratch scratch;
    // (Named references, not a structured binding: C++17 lambdas may not capture those.)
    std::vector<float>& tile = scratch.tile;
    std::vector<float>& own = scratch.own;
    std::vector<float>& head_rows = scratch.head_rows;
    std::vector<const float*>& in_rows = scratch.in_rows;
    std::vector<const float*>& rows = scratch.rows;
    std::vector<float*>& result = scratch.result;
    tile.resize(kernel.slots * T);
    own.resize(in.size() * T);
    in_rows.resize(in.size());
    result.resize(steps.size());
    if (head) head_rows.resize(static_cast<size_t>(block));
    for (size_t k = 0; k < in.size(); ++k)
      if (kernel.read_by_steps[k]) prepare_row(*in[k], kernel.layouts[k], &own[k * T]);
    for (int64_t b = first; b < last; ++b) {
      const int64_t begin = b * block, end = std::min(total, begin + block);
      if (head && kernel.head_primitive)
        kernel.head_primitive->rows(in[kernel.head_a]->data<float>(), begin / width, end / width, head_rows.data(), parallel);
      else if (head)
        gemm_rows(*in[kernel.head_a], *in[kernel.head_b], kernel.head_transpose_b, begin / width, end / width, head_rows.data(), parallel);
      for_each_chunk(begin, end, kernel.run, [&](int64_t base, int64_t n) {
        for (size_t k = 0; k < in.size(); ++k)
          if (kernel.read_by_steps[k]) in_rows[k] = chunk_row(*in[k], kernel.layouts[k], kernel.shape, base, n, &own[k * T]);
        for (size_t si = 0; si < steps.size(); ++si) {
          const F32Step& s = steps[si];
          rows.resize(s.operands.size());
          for (size_t k = 0; k < s.operands.size(); ++k) {
            const Operand& o = s.operands[k];
            rows[k] = o.from == From::Input  ? in_rows[o.index]
                      : o.from == From::Step ? result[o.index]
                      : conv                 ? head_values + base
                                             : head_rows.data() + (base - begin);
          }
          result[si] = to_memory[si] ? to_memory[si] + base : &tile[s.slot * T];
          if (s.staged())
            s.row_affine(rows.data(), s.attrs.data(), affine[si], result[si], n);
          else
            s.row(rows.data(), s.attrs.data(), result[si], n);
          narrow_row(result[si], s.dtype, n);  // its readers read what its dtype holds
        }
        for (size_t si = 0; si < steps.size(); ++si)
          if (steps[si].output >= 0 && !to_memory[si])
            store_row(result[si], *out[static_cast<size_t>(steps[si].output)], base, n);
      });
    }
  });
}

}  // namespace

runtime::GroupingRules grouping_rules() {
  runtime::GroupingRules rules;
  rules.domain = [](const Graph& g, const ir::Node& n) { return elementwise_f32_kernel(g, n) != nullptr ? 1 : 0; };
  rules.can_head = can_head;
  return rules;
}

FusedKernel bind_fused_kernel(const Graph& g, const FusedGroup& group, schedule::Format format,
                              const std::vector<schedule::Format>& input_formats) {
  FusedKernel kernel;
  kernel.group = &group;
  kernel.shape = format.physical_shape(group.shape);
  std::vector<ir::Shape> input_shapes;
  for (size_t k = 0; k < group.inputs.size(); ++k) {
    const ir::Shape s = g.shape(group.inputs[k]);
    input_shapes.push_back(input_formats.empty() ? s : input_formats[k].physical_shape(s));
  }
  bind_f32(g, kernel, input_shapes);
  return kernel;
}

void run_fused_kernel(const FusedKernel& kernel, const std::vector<const eval::TensorRef*>& in,
                      const std::vector<const eval::TensorRef*>& out, const eval::Parallel* parallel, const float* head_values) {
  if (kernel.f32) return run_f32(kernel, in, out, parallel, head_values);
  const FusedGroup& group = *kernel.group;
  const std::vector<runtime::GroupStep>& steps = group.steps;
  const int64_t total = kernel.shape.num_elements();
  // One tile of every input and every member's results: small enough for L1/L2. A tile's inputs
  // are all read before any of its outputs is written, so an output may share an input's memory.
  // The buffers are the thread's own and kept between runs: a run of tiny groups allocates nothing.
  const size_t T = static_cast<size_t>(std::clamp<int64_t>(total, 1, kTileElements));
  thread_local Scratch scratch;
  std::vector<double>& tile = scratch.tile;
  std::vector<int64_t>& tile_i = scratch.tile_i;
  std::vector<double>& in_f = scratch.in_f;
  std::vector<int64_t>& in_i = scratch.in_i;
  std::vector<int64_t>& iv = scratch.iv;
  std::vector<const double*>& rows_f = scratch.rows_f;
  std::vector<const int64_t*>& rows_i = scratch.rows_i;
  std::vector<char>& direct = scratch.direct;
  std::vector<char>& splat = scratch.splat;
  tile.resize(steps.size() * T);
  tile_i.resize(steps.size() * T);
  in_f.resize(in.size() * T);
  in_i.resize(in.size() * T);
  // Inputs of the group's own shape are read straight through (no broadcast walk), f32 ones
  // without a dtype switch per element; the same for f32 outputs.
  // Single-element inputs (scalar constants, mostly) fill their tile row once for all tiles.
  // Integer inputs fill both rows, float inputs only the double row: a member with a float
  // operand computes in double, so no one reads a float input as int64.
  direct.assign(in.size(), 0);
  splat.assign(in.size(), 0);
  bool any_broadcast = false;
  for (size_t k = 0; k < in.size(); ++k) {
    direct[k] = in[k]->shape == kernel.shape;
    splat[k] = !direct[k] && in[k]->shape.num_elements() == 1;
    any_broadcast = any_broadcast || (!direct[k] && !splat[k]);
    if (!splat[k]) continue;
    const bool floating = ir::dtype_is_float(in[k]->dtype);
    const double fv = floating ? eval::load_f(*in[k], 0) : static_cast<double>(eval::load_i(*in[k], 0));
    std::fill_n(&in_f[k * T], T, fv);
    if (!floating) std::fill_n(&in_i[k * T], T, eval::load_i(*in[k], 0));
  }
  std::optional<eval::BroadcastWalk> walk;
  if (any_broadcast) {
    std::vector<ir::Shape> in_shapes;
    for (const eval::TensorRef* t : in) in_shapes.push_back(t->shape);
    walk.emplace(kernel.shape, in_shapes);
  }
  for (int64_t base = 0; base < total; base += kTileElements) {
    const int64_t count = std::min(kTileElements, total - base);
    for (size_t k = 0; k < in.size(); ++k) {
      double* fk = &in_f[k * T];
      int64_t* ik = &in_i[k * T];
      const bool floating = ir::dtype_is_float(in[k]->dtype);
      if (direct[k] && in[k]->dtype == ir::DType::F32) {
        const float* src = in[k]->data<float>() + base;
        std::copy_n(src, count, fk);
      } else if (direct[k]) {
        for (int64_t e = 0; e < count; ++e)
          floating ? void(fk[e] = eval::load_f(*in[k], base + e))
                   : void(fk[e] = static_cast<double>(ik[e] = eval::load_i(*in[k], base + e)));
      }
    }
    if (any_broadcast)
      for (int64_t e = 0; e < count; ++e, walk->next())
        for (size_t k = 0; k < in.size(); ++k) {
          if (direct[k] || splat[k]) continue;
          const size_t at = k * T + static_cast<size_t>(e);
          if (ir::dtype_is_float(in[k]->dtype)) in_f[at] = eval::load_f(*in[k], walk->offset(k));
          else in_i[at] = eval::load_i(*in[k], walk->offset(k)), in_f[at] = static_cast<double>(in_i[at]);
        }
    for (size_t si = 0; si < steps.size(); ++si) {
      const runtime::GroupStep& s = steps[si];
      iv.resize(s.operands.size());
      double* result = &tile[si * T];
      int64_t* result_i = &tile_i[si * T];
      const bool integer = !ir::dtype_is_float(s.dtype);
      // Operand rows of this tile, resolved once per step rather than per element.
      rows_f.resize(s.operands.size());
      rows_i.resize(s.operands.size());
      for (size_t k = 0; k < s.operands.size(); ++k) {
        const Operand& o = s.operands[k];
        const bool from_input = o.from == From::Input;  // no head here: heads join f32 groups only
        rows_f[k] = from_input ? &in_f[o.index * T] : &tile[o.index * T];
        rows_i[k] = from_input ? (ir::dtype_is_float(in[o.index]->dtype) ? nullptr : &in_i[o.index * T])
                               : (ir::dtype_is_float(steps[o.index].dtype) ? nullptr : &tile_i[o.index * T]);
      }
      if (s.floating) {
        s.fn->row_f(rows_f.data(), s.attrs.data(), result, count);
      } else {
        // Computed in int64 and wrapped into the member's dtype, as the unfused kernel does.
        for (int64_t e = 0; e < count; ++e) {
          for (size_t k = 0; k < s.operands.size(); ++k) iv[k] = rows_i[k] ? rows_i[k][e] : eval::e_result<int64_t>(rows_f[k][e]);
          const int64_t v = s.fn->i(iv.data(), s.attrs.data());
          result_i[e] = integer ? wrap_to(s.dtype, v) : v;
          result[e] = static_cast<double>(result_i[e]);
        }
      }
      if (s.dtype == ir::DType::F32) {
        for (int64_t e = 0; e < count; ++e) result[e] = static_cast<float>(result[e]);
      } else if (integer && s.floating) {  // a float computed into an integer dtype saturates (NaN: 0)
        for (int64_t e = 0; e < count; ++e) result[e] = round_to(s.dtype, result[e]), result_i[e] = eval::e_result<int64_t>(result[e]);
      } else if (!integer && s.dtype != ir::DType::F64) {
        for (int64_t e = 0; e < count; ++e) result[e] = round_to(s.dtype, result[e]);
      }
      if (s.output < 0) continue;
      const eval::TensorRef& dst = *out[static_cast<size_t>(s.output)];
      if (dst.dtype == ir::DType::F32) {
        float* d = dst.data<float>() + base;
        for (int64_t e = 0; e < count; ++e) d[e] = static_cast<float>(result[e]);
      } else if (integer && !ir::dtype_is_float(dst.dtype)) {
        for (int64_t e = 0; e < count; ++e) eval::store_i(dst, base + e, result_i[e]);
      } else {
        for (int64_t e = 0; e < count; ++e) eval::store_f(dst, base + e, result[e]);
      }
    }
  }
}

}  // namespace esg::cpu
