#include "runtime/fusion.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <optional>
#include <string_view>

#include "cpu/gemm.hpp"
#include "eval/elementwise.hpp"
#include "eval/indexing.hpp"
#include "ir/half.hpp"

namespace esg::runtime {
namespace {

using ir::Graph;
using ir::kNone;
using ir::NodeId;
using ir::ValueId;

// A fused group carries its tiles as doubles, exact for integers up to 2^53: 64-bit integers
// keep their unfused kernels, which compute in int64 or uint64.
bool wide_int(ir::DType t) { return t == ir::DType::I64 || t == ir::DType::U64; }

bool fusible(const Graph& g, NodeId n) {
  const ir::Node& node = g.nodes[n];
  if (node.region != 0 || node.blob != kNone || node.num_bodies != 0 || node.num_deps != 0 || node.num_outputs != 1 ||
      eval::find_elementwise(*node.op) == nullptr || wide_int(g.values[node.first_output].dtype))
    return false;
  for (ValueId v : g.inputs(node))
    if (wide_int(g.values[v].dtype)) return false;
  return true;
}

int find(std::vector<int>& parent, int x) {
  while (parent[static_cast<size_t>(x)] != x) x = parent[static_cast<size_t>(x)] = parent[static_cast<size_t>(parent[static_cast<size_t>(x)])];
  return x;
}

// A value of `dtype` as the unfused kernel would have stored and reloaded it: through the same
// store_f and load_f, so rounding and saturation are defined once.
double round_to(ir::DType t, double v) {
  alignas(8) uint8_t element[8];
  const eval::TensorRef one{t, ir::Shape{}, element};
  eval::store_f(one, 0, v);
  return eval::load_f(one, 0);
}

// run_group's working memory: tiles of inputs and results, operand rows, per-input modes.
struct Scratch {
  std::vector<double> tile, in_f;
  std::vector<int64_t> in_i, iv;
  std::vector<const double*> rows_f;
  std::vector<const int64_t*> rows_i;
  std::vector<char> direct, splat;
};

std::vector<FusedStep> bind_steps(const Graph& g, const FusedGroup& group) {
  std::vector<FusedStep> steps;
  for (NodeId m : group.members) {
    if (m == group.head) continue;
    const ir::Node& n = g.nodes[m];
    const cpu::ElementwiseF32* f32 = cpu::find_elementwise_f32(*n.op);
    FusedStep s;
    s.fn = eval::find_elementwise(*n.op);
    s.row_f32 = f32 ? f32->row : nullptr;
    s.row_affine = f32 ? f32->row_affine : nullptr;
    s.dtype = g.values[n.first_output].dtype;
    s.floating = ir::dtype_is_float(s.dtype);
    for (ValueId v : g.inputs(n)) {
      // Steps are the members without the head, in order.
      const auto member_at = std::find_if(group.members.begin(), group.members.end(), [&](NodeId x) { return g.nodes[x].first_output == v; });
      if (member_at != group.members.end() && *member_at == group.head) {
        s.operands.push_back({FusedStep::From::Head, 0});
      } else if (member_at != group.members.end()) {
        s.operands.push_back({FusedStep::From::Step, static_cast<size_t>(member_at - group.members.begin()) - (group.head != kNone)});
      } else {
        s.operands.push_back({FusedStep::From::Input, static_cast<size_t>(std::find(group.inputs.begin(), group.inputs.end(), v) - group.inputs.begin())});
        s.floating = s.floating || ir::dtype_is_float(g.values[v].dtype);
      }
    }
    for (size_t i = 0; i < n.op->attrs.size(); ++i) {
      const ir::AttrValue& a = g.attrs[n.first_attr + i];
      s.attrs.push_back(a.kind == ir::AttrKind::Float ? a.f : static_cast<double>(a.i));
      s.attrs_f32.push_back(static_cast<float>(s.attrs.back()));
    }
    const auto o = std::find(group.outputs.begin(), group.outputs.end(), n.first_output);
    if (o != group.outputs.end()) s.output = static_cast<int>(o - group.outputs.begin());
    steps.push_back(std::move(s));
  }
  return steps;
}

// run_group_f32's working memory, per thread.
struct F32Scratch {
  std::vector<float> tile, own, head_rows;
  std::vector<const float*> in_rows, rows;
  std::vector<float*> result;
};

// Whether `n` can head a group: a matmul whose B is one matrix and whose A is not transposed
// (so A's rows are the result's rows), or an f32 convolution (its result image by image).
bool can_head(const Graph& g, const ir::Node& n) {
  // A head's blocks are images: a grouped (depthwise) convolution splits its channels over the
  // threads instead, which a batch of one image would lose.
  if (cpu::is_conv2d_f32(g, n)) return ir::Conv2dAttrs(g, n).groups == 1;
  if (n.op->kind != ir::OpKind::matmul || g.values[n.first_output].dtype != ir::DType::F32) return false;
  const auto in = g.inputs(n);
  return g.values[in[0]].dtype == ir::DType::F32 && g.values[in[1]].dtype == ir::DType::F32 && g.shape(in[1]).rank() == 2 &&
         g.shape(n.first_output).rank() >= 2 && !ir::MatmulAttrs(g, n).transpose_a;
}

// An op whose result only this group reads, over the group's shape, as the group's head: its
// results computed block by block right before the members that use them. Its operands must
// come from before the group's first member, so that no path from the group leads back into it.
NodeId find_head(const Graph& g, const std::vector<NodeId>& members, const std::vector<char>& member,
                 const std::vector<std::vector<NodeId>>& consumers, const std::vector<char>& is_output) {
  const ir::Shape shape = g.shape(g.nodes[members.back()].first_output);
  for (NodeId m : members)
    for (ValueId v : g.inputs(g.nodes[m])) {
      if (v == kNone || g.values[v].producer == kNone) continue;
      const NodeId p = g.values[v].producer;
      const ir::Node& n = g.nodes[p];
      if (n.region != 0 || n.num_deps != 0 || n.num_outputs != 1 || is_output[v] || g.shape(v) != shape || !can_head(g, n)) continue;
      const auto in = g.inputs(n);
      const bool only_here = std::all_of(consumers[v].begin(), consumers[v].end(), [&](NodeId c) { return member[c] != 0; });
      const bool before = std::all_of(in.begin(), in.end(), [&](ValueId x) {
        return x == kNone || g.values[x].producer == kNone || g.values[x].producer < members.front();
      });
      if (only_here && before) return p;
    }
  return kNone;
}

// Tiles for the steps' results, reused once a result has no reader left: a chain of any length
// needs two or three, so a chunk's working set stays a few KB of L1 however long the group is.
// A step takes its tile before its operands' tiles are freed (a row's output overlaps no
// operand), and outputs keep theirs to the end (they are stored after every member ran).
void assign_slots(std::vector<FusedStep>& steps, size_t& slots) {
  std::vector<size_t> last_read(steps.size(), 0);
  for (size_t si = 0; si < steps.size(); ++si) {
    if (steps[si].output >= 0) last_read[si] = steps.size();
    for (const FusedStep::Operand& o : steps[si].operands)
      if (o.from == FusedStep::From::Step) last_read[o.index] = std::max(last_read[o.index], si);
  }
  std::vector<size_t> free;
  slots = 0;
  for (size_t si = 0; si < steps.size(); ++si) {
    if (free.empty()) free.push_back(slots++);
    steps[si].slot = free.back();
    free.pop_back();
    for (const FusedStep::Operand& o : steps[si].operands)
      if (o.from == FusedStep::From::Step && last_read[o.index] == si &&
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

std::optional<ScalarOp> scalar_op(const Graph& g, const FusedGroup& group, NodeId node, const FusedStep& s) {
  const ir::OpKind op = g.nodes[node].op->kind;
  using K = ir::OpKind;
  if (s.operands.size() != 2 || s.dtype != ir::DType::F32 || (op != K::mul && op != K::add && op != K::sub)) return std::nullopt;
  auto is_scalar = [&](const FusedStep::Operand& o) {
    return o.from == FusedStep::From::Input && group.layouts[o.index].access == cpu::Access::Scalar &&
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
bool append(FusedStep::Stage& st, const ScalarOp& op) {
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

// FusedGroup::f32_steps from its steps: each scalar op whose operand is a step no one else
// reads joins that step's result stage (a chain of them as far as one stage holds); then each
// one-input step whose operand is a scalar op (or a multiply followed by an add) no one else
// reads takes it as its operand stage. What a folded op's readers read is its host's result.
std::vector<FusedStep> fold_stages(const Graph& g, const FusedGroup& group) {
  std::vector<FusedStep> steps = group.steps;
  const size_t count = steps.size();
  const size_t first_step = group.head == kNone ? 0 : 1;  // members[first_step + i] is step i
  std::vector<std::optional<ScalarOp>> ops(count);
  std::vector<size_t> readers(count, 0), alias(count);
  std::vector<char> removed(count, 0);
  for (size_t si = 0; si < count; ++si) {
    ops[si] = scalar_op(g, group, group.members[first_step + si], steps[si]);
    alias[si] = si;
    for (const FusedStep::Operand& o : steps[si].operands)
      if (o.from == FusedStep::From::Step) ++readers[o.index];
  }
  auto sole_reader = [&](size_t si) { return readers[si] == 1 && steps[si].output < 0; };
  for (size_t si = 0; si < count; ++si) {
    for (FusedStep::Operand& o : steps[si].operands)
      if (o.from == FusedStep::From::Step) o.index = alias[o.index];
    if (!ops[si]) continue;
    const FusedStep::Operand x = steps[si].operands[ops[si]->operand];
    if (x.from != FusedStep::From::Step) continue;
    FusedStep& host = steps[x.index];
    if (ops[x.index] || !host.row_affine || host.dtype != ir::DType::F32 || !sole_reader(x.index) || !append(host.post, *ops[si]))
      continue;
    removed[si] = 1;
    alias[si] = x.index;
    readers[x.index] = readers[si];
    host.output = steps[si].output;
  }
  auto foldable = [&](const FusedStep::Operand& o) {
    return o.from == FusedStep::From::Step && !removed[o.index] && ops[o.index] && sole_reader(o.index);
  };
  for (size_t si = 0; si < count; ++si) {
    FusedStep& s = steps[si];
    if (removed[si] || ops[si] || s.operands.size() != 1 || !s.row_affine || !foldable(s.operands[0])) continue;
    // The stage's ops in order: a multiply before an add or subtract, if there is one.
    std::vector<size_t> chain = {s.operands[0].index};
    const FusedStep::Operand before = steps[chain[0]].operands[ops[chain[0]]->operand];
    if (ops[chain[0]]->kind != ScalarOp::Mul && foldable(before) && ops[before.index]->kind == ScalarOp::Mul)
      chain.insert(chain.begin(), before.index);
    for (size_t c : chain) append(s.pre, *ops[c]), removed[c] = 1;
    s.operands[0] = steps[chain[0]].operands[ops[chain[0]]->operand];
  }
  std::vector<size_t> position(count, 0);
  std::vector<FusedStep> kept;
  for (size_t si = 0; si < count; ++si)
    if (!removed[si]) position[si] = kept.size(), kept.push_back(std::move(steps[si]));
  for (FusedStep& s : kept)
    for (FusedStep::Operand& o : s.operands)
      if (o.from == FusedStep::From::Step) o.index = position[o.index];
  return kept;
}

void bind_f32(const Graph& g, FusedGroup& group) {
  // (Groups across types, for a device backend, have members the f32 rows do not serve.)
  for (NodeId m : group.members)
    if (m != group.head && !cpu::elementwise_f32_kernel(g, g.nodes[m])) return;
  group.read_by_steps.assign(group.inputs.size(), 0);
  for (const FusedStep& s : group.steps)
    for (const FusedStep::Operand& o : s.operands)
      if (o.from == FusedStep::From::Input) group.read_by_steps[o.index] = 1;
  std::vector<ir::Shape> shapes;
  for (size_t k = 0; k < group.inputs.size(); ++k) shapes.push_back(group.read_by_steps[k] ? g.shape(group.inputs[k]) : group.shape);
  if (group.head != kNone) {
    const ir::Node& n = g.nodes[group.head];
    const auto in = g.inputs(n);
    auto input_at = [&](ValueId v) { return static_cast<size_t>(std::find(group.inputs.begin(), group.inputs.end(), v) - group.inputs.begin()); };
    group.head_a = input_at(in[0]);
    group.head_b = input_at(in[1]);
    if (cpu::is_conv2d_f32(g, n)) {
      group.head_kind = FusedGroup::HeadKind::Conv2d;
      group.head_conv = cpu::conv_params(g, n);
      if (in.size() > 2 && in[2] != kNone) group.head_bias = static_cast<int>(input_at(in[2]));
    } else {
      group.head_transpose_b = ir::MatmulAttrs(g, n).transpose_b;
    }
  }
  group.layouts.resize(shapes.size());
  std::vector<const ir::Shape*> pointers;
  for (const ir::Shape& s : shapes) pointers.push_back(&s);
  group.run = cpu::plan_operands(group.shape, pointers.data(), pointers.size(), group.layouts.data());
  group.f32_steps = fold_stages(g, group);
  group.read_by_steps.assign(group.inputs.size(), 0);
  for (const FusedStep& s : group.f32_steps)
    for (const FusedStep::Operand& o : s.operands)
      if (o.from == FusedStep::From::Input) group.read_by_steps[o.index] = 1;
  assign_slots(group.f32_steps, group.slots);
  group.f32 = true;
}

bool overlaps(const eval::TensorRef& a, const eval::TensorRef& b) {
  return a.bytes < b.bytes + b.nbytes() && b.bytes < a.bytes + a.nbytes();
}

// An all-f32 group: chunks of every member's results on f32 rows; f32 inputs are read in place
// where a chunk's elements are contiguous. The chunk's outputs are stored after all
// its members ran, since an output may share an input's memory (in-place reuse). Results of
// comparisons and logic are 0 or 1, as bools are. With a head, the group runs block of rows by
// block of rows: the head's rows into a block the size of L2's share, then the members over it.
void run_group_f32(const FusedGroup& group, const std::vector<const eval::TensorRef*>& in,
                   const std::vector<const eval::TensorRef*>& out, const eval::Parallel* parallel) {
  constexpr size_t T = static_cast<size_t>(cpu::kChunk);
  const int64_t total = group.shape.num_elements();
  const int64_t width = group.shape.rank() ? group.shape[group.shape.rank() - 1] : 1;
  const bool head = group.head != kNone;
  if (total == 0) return;
  // An f32 output that shares no bytes with an input is written by its step in place, instead
  // of through a tile and a copy; its readers in the group read it there.
  const std::vector<FusedStep>& steps = group.f32_steps;
  std::array<float*, kMaxGroupOps> to_memory{};
  for (size_t si = 0; si < steps.size(); ++si) {
    const int o = steps[si].output;
    if (o < 0 || out[static_cast<size_t>(o)]->dtype != ir::DType::F32) continue;
    const eval::TensorRef& t = *out[static_cast<size_t>(o)];
    if (std::none_of(in.begin(), in.end(), [&](const eval::TensorRef* x) { return overlaps(t, *x); })) to_memory[si] = t.data<float>();
  }
  // The stages' scales and shifts, from this run's single-element inputs.
  std::array<cpu::Affine, kMaxGroupOps> affine{};
  for (size_t si = 0; si < steps.size(); ++si) {
    auto value = [&](int input, bool negate, float none) {
      const float v = input < 0 ? none : in[static_cast<size_t>(input)]->data<float>()[0];
      return negate ? -v : v;
    };
    const FusedStep::Stage &pre = steps[si].pre, &post = steps[si].post;
    affine[si] = {value(pre.scale, pre.negate_scale, 1.0f), value(pre.shift, pre.negate_shift, -0.0f),
                  value(post.scale, post.negate_scale, 1.0f), value(post.shift, post.negate_shift, -0.0f)};
  }
  // Without a head, blocks of kChunk elements; with one, blocks of whole rows or images.
  const bool conv = head && group.head_kind == FusedGroup::HeadKind::Conv2d;
  const int64_t image = conv ? total / group.shape[0] : 0;
  const int64_t block = conv ? image : head ? std::max(kHeadMinRows, kHeadBlockElements / width) * width : cpu::kChunk;
  const int64_t blocks = (total + block - 1) / block;
  cpu::split_work(blocks, block, parallel, [&](int64_t first, int64_t last) {
    // The buffers are the running thread's own and kept between runs, reached through one
    // reference: each use of a thread_local by name costs a TLS lookup call in a shared library.
    thread_local F32Scratch scratch;
    auto& [tile, own, head_rows, in_rows, rows, result] = scratch;
    tile.resize(group.slots * T);
    own.resize(in.size() * T);
    in_rows.resize(in.size());
    result.resize(steps.size());
    if (head) head_rows.resize(static_cast<size_t>(block));
    for (size_t k = 0; k < in.size(); ++k)
      if (group.read_by_steps[k]) cpu::prepare_row(*in[k], group.layouts[k], &own[k * T]);
    for (int64_t b = first; b < last; ++b) {
      const int64_t begin = b * block, end = std::min(total, begin + block);
      const int threads = parallel ? parallel->free_threads() : 1;
      if (conv)
        cpu::conv2d_images(group.head_conv, *in[group.head_a], *in[group.head_b], group.head_bias < 0 ? nullptr : in[static_cast<size_t>(group.head_bias)],
                           group.shape, begin / image, end / image, head_rows.data(), threads);
      else if (head)
        cpu::gemm_rows(*in[group.head_a], *in[group.head_b], group.head_transpose_b, begin / width, end / width, head_rows.data(), threads);
      cpu::for_each_chunk(begin, end, group.run, [&](int64_t base, int64_t n) {
        for (size_t k = 0; k < in.size(); ++k)
          if (group.read_by_steps[k]) in_rows[k] = cpu::chunk_row(*in[k], group.layouts[k], group.shape, base, n, &own[k * T]);
        for (size_t si = 0; si < steps.size(); ++si) {
          const FusedStep& s = steps[si];
          rows.resize(s.operands.size());
          for (size_t k = 0; k < s.operands.size(); ++k) {
            const FusedStep::Operand& o = s.operands[k];
            rows[k] = o.from == FusedStep::From::Input ? in_rows[o.index]
                      : o.from == FusedStep::From::Step ? result[o.index]
                                                        : head_rows.data() + (base - begin);
          }
          result[si] = to_memory[si] ? to_memory[si] + base : &tile[s.slot * T];
          if (s.staged())
            s.row_affine(rows.data(), s.attrs_f32.data(), affine[si], result[si], n);
          else
            s.row_f32(rows.data(), s.attrs_f32.data(), result[si], n);
        }
        for (size_t si = 0; si < steps.size(); ++si)
          if (steps[si].output >= 0 && !to_memory[si])
            cpu::store_row(result[si], *out[static_cast<size_t>(steps[si].output)], base, n);
      });
    }
  });
}

}  // namespace

std::vector<FusedGroup> find_groups(const Graph& g, const GroupingOptions& options) {
  const std::vector<NodeId>& nodes = g.regions[0].nodes;
  std::vector<std::vector<NodeId>> consumers(g.values.size());
  for (NodeId n : nodes)
    for (ValueId v : g.inputs(g.nodes[n]))
      if (v != kNone) consumers[v].push_back(n);
  std::vector<char> is_output(g.values.size(), 0);
  for (ValueId v : g.outputs()) is_output[v] = 1;

  // Ops the f32 kernel serves fuse only with each other, so that a value computes alike fused
  // and unfused (f32 rows there, the reference's double/int64 math for the rest).
  std::vector<char> f32(g.nodes.size(), 0);
  for (NodeId n : nodes) f32[n] = cpu::elementwise_f32_kernel(g, g.nodes[n]) != nullptr;
  auto fusible_here = [&](NodeId n) { return fusible(g, n) && (!options.kernel_takes || options.kernel_takes(g, g.nodes[n])); };
  // run_group_f32 keeps a pointer per step on its stack: no group beyond kMaxGroupOps.
  const int max_ops = std::min(options.max_ops, kMaxGroupOps);
  std::vector<int> parent(g.nodes.size()), size(g.nodes.size(), 1);
  std::iota(parent.begin(), parent.end(), 0);
  for (NodeId n : nodes) {
    if (!fusible_here(n)) continue;
    const ValueId out = g.nodes[n].first_output;
    const ir::Shape shape = g.shape(out);
    for (ValueId v : g.inputs(g.nodes[n])) {
      if (v == kNone || g.values[v].producer == kNone) continue;
      const NodeId p = g.values[v].producer;
      auto same_domain = [&](NodeId a) { return options.mixed_types || f32[a] == f32[n]; };
      if (!fusible_here(p) || !same_domain(p) || is_output[v] || g.shape(v) != shape) continue;
      const bool stays_inside = std::all_of(consumers[v].begin(), consumers[v].end(), [&](NodeId c) {
        return fusible_here(c) && same_domain(c) && g.shape(g.nodes[c].first_output) == shape;
      });
      const int a = find(parent, static_cast<int>(p)), b = find(parent, static_cast<int>(n));
      if (!stays_inside || a == b || size[static_cast<size_t>(a)] + size[static_cast<size_t>(b)] > max_ops) continue;
      parent[static_cast<size_t>(b)] = a;
      size[static_cast<size_t>(a)] += size[static_cast<size_t>(b)];
    }
  }
  std::vector<std::vector<NodeId>> by_root(g.nodes.size());
  for (NodeId n : nodes)
    if (fusible_here(n)) by_root[static_cast<size_t>(find(parent, static_cast<int>(n)))].push_back(n);

  std::vector<FusedGroup> groups;
  std::vector<char> member(g.nodes.size(), 0);
  std::vector<uint32_t> seen(g.nodes.size(), 0);
  uint32_t stamp = 0;
  // A set whose group would leave and re-enter itself runs unfused on the CPU; a backend that
  // wants every op in a group gets each member as a group of its own (those cannot cycle).
  std::vector<std::vector<NodeId>> todo = std::move(by_root);
  for (size_t next = 0; next < todo.size(); ++next) {
    std::vector<NodeId> members = todo[next];
    if (members.empty()) continue;
    for (NodeId m : members) member[m] = 1;
    const NodeId head = options.heads && f32[members.front()] ? find_head(g, members, member, consumers, is_output) : kNone;
    if (members.size() < 2 && head == kNone && !options.single_ops) {
      member[members.front()] = 0;
      continue;
    }
    if (head != kNone) members.insert(members.begin(), head), member[head] = 1;
    FusedGroup grp;
    grp.members = members;
    grp.head = head;
    grp.shape = g.shape(g.nodes[members.back()].first_output);
    for (NodeId m : members) {
      for (ValueId v : g.inputs(g.nodes[m]))
        if (v != kNone && (g.values[v].producer == kNone || !member[g.values[v].producer]) &&
            std::find(grp.inputs.begin(), grp.inputs.end(), v) == grp.inputs.end())
          grp.inputs.push_back(v);
      const ValueId out = g.nodes[m].first_output;
      const bool escapes = is_output[out] || std::any_of(consumers[out].begin(), consumers[out].end(), [&](NodeId c) { return !member[c]; });
      if (escapes) grp.outputs.push_back(out);
    }
    // No path may leave the group and come back: a group input computed from a member. Nodes
    // are in creation order and use only earlier values, so the search stops before the first
    // member: it walks only what lies between the group's members.
    bool cycle = false;
    const NodeId first = members.front();
    ++stamp;
    std::vector<NodeId> work;
    for (ValueId v : grp.inputs)
      if (g.values[v].producer != kNone && g.values[v].producer >= first) work.push_back(g.values[v].producer);
    while (!work.empty() && !cycle) {
      const NodeId n = work.back();
      work.pop_back();
      if (seen[n] == stamp) continue;
      seen[n] = stamp;
      if (member[n]) cycle = true;
      for (ValueId v : g.inputs(g.nodes[n]))
        if (v != kNone && g.values[v].producer != kNone && g.values[v].producer >= first) work.push_back(g.values[v].producer);
    }
    for (NodeId m : members) member[m] = 0;
    if (cycle) {
      if (options.single_ops)
        for (NodeId m : members)
          if (m != head) todo.push_back({m});
      continue;
    }
    grp.steps = bind_steps(g, grp);
    bind_f32(g, grp);
    groups.push_back(std::move(grp));
  }
  return groups;
}

void run_group(const FusedGroup& group, const std::vector<const eval::TensorRef*>& in,
               const std::vector<const eval::TensorRef*>& out, const eval::Parallel* parallel) {
  if (group.f32) return run_group_f32(group, in, out, parallel);
  const std::vector<FusedStep>& steps = group.steps;
  const int64_t total = group.shape.num_elements();
  // One tile of every input and every member's results: small enough for L1/L2. A tile's inputs
  // are all read before any of its outputs is written, so an output may share an input's memory.
  // The buffers are the thread's own and kept between runs: a run of tiny groups allocates nothing.
  const size_t T = static_cast<size_t>(std::clamp<int64_t>(total, 1, kTileElements));
  thread_local Scratch scratch;
  std::vector<double>& tile = scratch.tile;
  std::vector<double>& in_f = scratch.in_f;
  std::vector<int64_t>& in_i = scratch.in_i;
  std::vector<int64_t>& iv = scratch.iv;
  std::vector<const double*>& rows_f = scratch.rows_f;
  std::vector<const int64_t*>& rows_i = scratch.rows_i;
  std::vector<char>& direct = scratch.direct;
  std::vector<char>& splat = scratch.splat;
  tile.resize(steps.size() * T);
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
    direct[k] = in[k]->shape == group.shape;
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
    walk.emplace(group.shape, in_shapes);
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
      const FusedStep& s = steps[si];
      iv.resize(s.operands.size());
      double* result = &tile[si * T];
      // Operand rows of this tile, resolved once per step rather than per element.
      rows_f.resize(s.operands.size());
      rows_i.resize(s.operands.size());
      for (size_t k = 0; k < s.operands.size(); ++k) {
        const FusedStep::Operand& o = s.operands[k];
        const bool from_input = o.from == FusedStep::From::Input;  // no head here: heads join f32 groups only
        rows_f[k] = from_input ? &in_f[o.index * T] : &tile[o.index * T];
        rows_i[k] = from_input && !ir::dtype_is_float(in[o.index]->dtype) ? &in_i[o.index * T] : nullptr;
      }
      if (s.floating) {
        s.fn->row_f(rows_f.data(), s.attrs.data(), result, count);
      } else {
        for (int64_t e = 0; e < count; ++e) {
          for (size_t k = 0; k < s.operands.size(); ++k) iv[k] = rows_i[k] ? rows_i[k][e] : static_cast<int64_t>(rows_f[k][e]);
          result[e] = static_cast<double>(s.fn->i(iv.data(), s.attrs.data()));
        }
      }
      if (s.dtype == ir::DType::F32) {
        for (int64_t e = 0; e < count; ++e) result[e] = static_cast<float>(result[e]);
      } else if (s.dtype != ir::DType::F64) {
        for (int64_t e = 0; e < count; ++e) result[e] = round_to(s.dtype, result[e]);
      }
      if (s.output < 0) continue;
      const eval::TensorRef& dst = *out[static_cast<size_t>(s.output)];
      if (dst.dtype == ir::DType::F32) {
        float* d = dst.data<float>() + base;
        for (int64_t e = 0; e < count; ++e) d[e] = static_cast<float>(result[e]);
      } else {
        for (int64_t e = 0; e < count; ++e) eval::store_f(dst, base + e, result[e]);
      }
    }
  }
}

}  // namespace esg::runtime
