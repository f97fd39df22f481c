#include "eval/sized_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "eval/evaluate.hpp"
#include "ir/builder.hpp"
#include "ir/error.hpp"

namespace esg::eval {
namespace {

using ir::DType;
using ir::Shape;

// ---- nonzero ------------------------------------------------------------------------------
std::vector<HostTensor> nonzero(const KernelCall& c, const RunControl&) {
  const TensorRef& x = *c.in[0];
  const int64_t n = x.size();
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < n; ++i)
    if (ir::dtype_is_float(x.dtype) ? load_f(x, i) != 0 : load_i(x, i) != 0) hits.push_back(i);
  const size_t rank = std::max<size_t>(x.shape.rank(), 1);
  const auto count = static_cast<int64_t>(hits.size());
  HostTensor y(DType::I64, {static_cast<int64_t>(rank), count}, HostTensor::Uninitialized{});
  int64_t* out = y.data<int64_t>();
  // Row d holds every hit's index along axis d: the flat index unravelled, last axis first.
  for (int64_t h = 0; h < count; ++h) {
    int64_t i = hits[static_cast<size_t>(h)];
    for (size_t d = x.shape.rank(); d-- > 0;) {
      out[static_cast<int64_t>(d) * count + h] = i % x.shape[d];
      i /= x.shape[d];
    }
    if (x.shape.rank() == 0) out[h] = 0;
  }
  return {std::move(y)};
}

// ---- unique -------------------------------------------------------------------------------
// x seen as [outer, m, inner], m along the axis: slice j is the outer x inner elements at j.
struct Slices {
  int64_t outer = 1, m = 1, inner = 1;
};

// Orders slices lexicographically by their elements (in x's order within a slice). NaNs sort
// last and equal each other, as numpy.unique's, so the order stays a strict weak one.
template <class T>
struct SliceOrder {
  const std::vector<T>& keys;  // slice j's elements at [j * len, (j + 1) * len)
  int64_t len;
  static bool less(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) return !std::isnan(a) && (std::isnan(b) || a < b);
    else return a < b;
  }
  static bool same(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) return a == b || (std::isnan(a) && std::isnan(b));
    else return a == b;
  }
  bool before(int64_t i, int64_t j) const {
    for (int64_t k = 0; k < len; ++k) {
      const T a = keys[static_cast<size_t>(i * len + k)], b = keys[static_cast<size_t>(j * len + k)];
      if (less(a, b)) return true;
      if (less(b, a)) return false;
    }
    return false;
  }
  bool equal(int64_t i, int64_t j) const {
    for (int64_t k = 0; k < len; ++k)
      if (!same(keys[static_cast<size_t>(i * len + k)], keys[static_cast<size_t>(j * len + k)])) return false;
    return true;
  }
};

// Groups of equal slices: each group's first slice and size, in slice order (sorted) or in the
// order each first occurs; and each slice's group.
struct Groups {
  std::vector<int64_t> first, count, of_slice;
};

template <class T>
Groups group_slices(const TensorRef& x, const Slices& s, bool sorted, T (*load)(const TensorRef&, int64_t)) {
  const int64_t len = s.outer * s.inner;
  std::vector<T> keys(static_cast<size_t>(s.m * len));
  for (int64_t j = 0; j < s.m; ++j)
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t i = 0; i < s.inner; ++i) keys[static_cast<size_t>(j * len + o * s.inner + i)] = load(x, (o * s.m + j) * s.inner + i);
  const SliceOrder<T> order{keys, len};
  std::vector<int64_t> by_key(static_cast<size_t>(s.m));
  std::iota(by_key.begin(), by_key.end(), 0);
  // Stable: within a group of equal slices the first in x comes first.
  std::stable_sort(by_key.begin(), by_key.end(), [&](int64_t a, int64_t b) { return order.before(a, b); });
  Groups g;
  g.of_slice.assign(static_cast<size_t>(s.m), 0);
  for (size_t k = 0; k < by_key.size(); ++k) {
    if (k == 0 || !order.equal(by_key[k - 1], by_key[k])) {
      g.first.push_back(by_key[k]);
      g.count.push_back(0);
    }
    ++g.count.back();
    g.of_slice[static_cast<size_t>(by_key[k])] = static_cast<int64_t>(g.first.size()) - 1;
  }
  if (!sorted) {  // renumber the groups by where each first occurs
    std::vector<int64_t> rank(g.first.size());
    std::iota(rank.begin(), rank.end(), 0);
    std::sort(rank.begin(), rank.end(), [&](int64_t a, int64_t b) { return g.first[static_cast<size_t>(a)] < g.first[static_cast<size_t>(b)]; });
    std::vector<int64_t> new_of(rank.size());
    Groups r;
    for (size_t k = 0; k < rank.size(); ++k) {
      new_of[static_cast<size_t>(rank[k])] = static_cast<int64_t>(k);
      r.first.push_back(g.first[static_cast<size_t>(rank[k])]);
      r.count.push_back(g.count[static_cast<size_t>(rank[k])]);
    }
    for (int64_t& of : g.of_slice) of = new_of[static_cast<size_t>(of)];
    r.of_slice = std::move(g.of_slice);
    return r;
  }
  return g;
}

// Unsigned 64-bit elements ride in int64 (load_i): flipping the sign bit keeps their order.
int64_t load_u64_ordered(const TensorRef& t, int64_t i) { return static_cast<int64_t>(static_cast<uint64_t>(load_i(t, i)) ^ (uint64_t{1} << 63)); }

std::vector<HostTensor> unique(const KernelCall& c, const RunControl&) {
  const TensorRef& x = *c.in[0];
  const ir::UniqueAttrs a = c.attrs<ir::UniqueAttrs>();
  Slices s;
  for (size_t d = 0; d < x.shape.rank(); ++d) (d < a.axis ? s.outer : d == a.axis ? s.m : s.inner) *= x.shape[d];
  const Groups g = ir::dtype_is_float(x.dtype) ? group_slices<double>(x, s, a.sorted, load_f)
                   : x.dtype == DType::U64     ? group_slices<int64_t>(x, s, a.sorted, load_u64_ordered)
                                               : group_slices<int64_t>(x, s, a.sorted, load_i);
  const auto n = static_cast<int64_t>(g.first.size());
  Shape ys = x.shape;
  ys[a.axis] = n;
  const HostTensor::Uninitialized written{};  // every byte below
  HostTensor y(x.dtype, ys, written), indices(DType::I64, {n}, written), inverse(DType::I64, {s.m}, written), counts(DType::I64, {n}, written);
  const size_t block = static_cast<size_t>(s.inner) * ir::dtype_size(x.dtype);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t k = 0; k < n; ++k)
      move_bytes(y.bytes.data() + static_cast<size_t>(o * n + k) * block, x.bytes + static_cast<size_t>(o * s.m + g.first[static_cast<size_t>(k)]) * block,
                 block);
  std::copy(g.first.begin(), g.first.end(), indices.data<int64_t>());
  std::copy(g.count.begin(), g.count.end(), counts.data<int64_t>());
  std::copy(g.of_slice.begin(), g.of_slice.end(), inverse.data<int64_t>());
  return {std::move(y), std::move(indices), std::move(inverse), std::move(counts)};
}

// ---- non_max_suppression -------------------------------------------------------------------
struct Box {
  float y1, x1, y2, x2;  // y1 <= y2, x1 <= x2
  float area() const { return (y2 - y1) * (x2 - x1); }
};

Box box_at(const float* b, bool center) {
  if (center) return {b[1] - b[3] / 2, b[0] - b[2] / 2, b[1] + b[3] / 2, b[0] + b[2] / 2};
  return {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
}

// Whether `b` overlaps `kept` by more than `threshold` of their union (in f32, as ONNX Runtime
// computes it, so borderline boxes go the same way). An empty box overlaps nothing.
bool overlaps(const Box& a, const Box& b, float threshold) {
  const float area_a = a.area(), area_b = b.area();
  if (area_a <= 0 || area_b <= 0) return false;
  const float h = std::max(0.0f, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
  const float w = std::max(0.0f, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
  const float inter = h * w;
  return inter / (area_a + area_b - inter) > threshold;
}

std::vector<HostTensor> non_max_suppression(const KernelCall& c, const RunControl&) {
  const TensorRef& boxes = *c.in[0];
  const TensorRef& scores = *c.in[1];
  const ir::NonMaxSuppressionAttrs a = c.attrs<ir::NonMaxSuppressionAttrs>();
  const int64_t batches = scores.shape[0], classes = scores.shape[1], count = scores.shape[2];
  const auto threshold = static_cast<float>(a.iou_threshold), min_score = static_cast<float>(a.score_threshold);
  std::vector<int64_t> picked;  // (batch, class, box) triples
  std::vector<int64_t> order;
  std::vector<Box> kept;
  for (int64_t b = 0; b < batches; ++b) {
    const float* bx = boxes.data<float>() + b * count * 4;
    for (int64_t k = 0; k < classes; ++k) {
      const float* sc = scores.data<float>() + (b * classes + k) * count;
      order.clear();
      for (int64_t i = 0; i < count; ++i)
        if (sc[i] > min_score) order.push_back(i);  // a NaN score never passes
      // A heap by decreasing score, the lower index first on a tie: only the candidates looked
      // at before max_boxes_per_class are kept are ever ordered.
      const auto later = [sc](int64_t i, int64_t j) { return sc[i] < sc[j] || (sc[i] == sc[j] && i > j); };
      std::make_heap(order.begin(), order.end(), later);
      kept.clear();
      while (!order.empty() && static_cast<int64_t>(kept.size()) < a.max_boxes_per_class) {
        std::pop_heap(order.begin(), order.end(), later);
        const int64_t i = order.back();
        order.pop_back();
        const Box box = box_at(bx + i * 4, a.center_point_box);
        if (std::any_of(kept.begin(), kept.end(), [&](const Box& k2) { return overlaps(box, k2, threshold); })) continue;
        kept.push_back(box);
        picked.insert(picked.end(), {b, k, i});
      }
    }
  }
  HostTensor selected(DType::I64, {static_cast<int64_t>(picked.size() / 3), 3}, HostTensor::Uninitialized{});
  std::copy(picked.begin(), picked.end(), selected.data<int64_t>());
  return {std::move(selected)};
}

// ---- operands read at run time ------------------------------------------------------------------
// An op with a `static_form` (reshape_to, slice_to, top_k_to, ...) runs as that op: each input
// named like one of its attributes is read as it (a list: every value; an int or a float: the
// one value), the other inputs are its inputs, and the op's own attributes pass on by name. The
// form's rule checks the values, with the messages it gives when built, and its kernel runs.
// The form an op runs as: its static form, except that range_to's integer operands count as
// integer_range does (range's attributes are doubles, exact up to 2^53 only).
const ir::OpSchema& form_of(const KernelCall& c) {
  const ir::OpSchema& self = *c.node.op;
  const bool integers = !c.in.empty() && c.in[0] && !ir::dtype_is_float(c.in[0]->dtype) && c.in[0]->dtype != ir::DType::Bool;
  return self.kind == ir::OpKind::range_to && integers ? *ir::find_op(ir::OpKind::integer_range) : *ir::find_op(self.static_form);
}

std::vector<HostTensor> as_static(const KernelCall& c, const RunControl& control) {
  const ir::OpSchema& self = *c.node.op;
  const ir::OpSchema& op = form_of(c);
  std::vector<bool> read(c.in.size(), false);
  std::vector<std::vector<int64_t>> lists(op.attrs.size());
  std::vector<ir::AttrArg> attrs(op.attrs.size());
  for (size_t a = 0; a < op.attrs.size(); ++a) {
    const ir::AttrSchema& want = op.attrs[a];
    ir::AttrArg& arg = attrs[a];
    if (const int in = self.input_index(want.name); in >= 0) {
      read[static_cast<size_t>(in)] = true;
      const TensorRef* t = c.in[static_cast<size_t>(in)];
      if (!t) continue;  // an absent optional input: the attribute's default
      arg.kind = want.kind;
      arg.present = true;
      if (want.kind == ir::AttrKind::IntList) {
        for (int64_t i = 0; i < t->size(); ++i) lists[a].push_back(load_i(*t, i));
        arg.ints = lists[a].data();
        arg.size = lists[a].size();
      } else if (t->size() != 1) {
        throw ir::Error(ir::ErrorCode::Shape, std::string(self.name) + ": `" + want.name + "` holds " + std::to_string(t->size()) +
                                                  " values, not one");
      } else if (want.kind == ir::AttrKind::Float) {
        arg.f = load_f(*t, 0);
      } else {
        arg.i = load_i(*t, 0);
      }
    } else if (const int own = self.attr_index(want.name); own >= 0) {  // a scalar (codegen checks)
      const ir::AttrValue& v = c.graph.attrs[c.node.first_attr + static_cast<uint32_t>(own)];
      arg.kind = v.kind;
      arg.present = true;
      arg.i = v.kind == ir::AttrKind::Float ? 0 : v.i;
      arg.f = v.kind == ir::AttrKind::Float ? v.f : 0;
    }
  }
  ir::Builder b;
  std::vector<ir::ValueId> ins;
  std::vector<const TensorRef*> refs;
  for (size_t i = 0; i < c.in.size(); ++i)
    if (!read[i]) {  // optional where the form's is (codegen checks): absent stays absent
      ins.push_back(c.in[i] ? b.add_input("in" + std::to_string(i), c.in[i]->dtype, c.in[i]->shape) : ir::kNone);
      refs.push_back(c.in[i]);
    }
  const ir::Graph& g = b.graph();
  const ir::Node& n = g.nodes[b.add_op(op, ins, attrs)];  // throws ir::Error naming the op and the values
  std::vector<HostTensor> made;
  std::vector<TensorRef> outs;
  for (uint32_t k = 0; k < n.num_outputs; ++k) {
    const ir::ValueId v = n.first_output + k;
    control.check_bytes(self.name, g.shape(v).num_elements() * static_cast<int64_t>(ir::dtype_size(g.values[v].dtype)));
  }
  for (uint32_t k = 0; k < n.num_outputs; ++k) {
    const ir::ValueId v = n.first_output + k;
    made.emplace_back(g.values[v].dtype, g.shape(v), HostTensor::Uninitialized{});
  }
  for (HostTensor& t : made) outs.push_back(t.ref());
  std::vector<const TensorRef*> out_ptrs;
  for (const TensorRef& r : outs) out_ptrs.push_back(&r);
  run_kernel(g, n, refs, out_ptrs);
  return made;
}

}  // namespace

SizedKernel find_sized_kernel(const ir::OpSchema& op) {
  if (*op.static_form) return as_static;
  switch (op.kind) {
    case ir::OpKind::nonzero: return nonzero;
    case ir::OpKind::unique: return unique;
    case ir::OpKind::non_max_suppression: return non_max_suppression;
    default: return nullptr;
  }
}

}  // namespace esg::eval
