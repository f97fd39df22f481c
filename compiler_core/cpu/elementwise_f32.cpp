#include "cpu/elementwise_f32.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "cpu/fast_kernels.hpp"
#include "cpu/vector_math.hpp"
#include "eval/elementwise.hpp"

namespace esg::cpu {

int64_t plan_operands(const ir::Shape& out, const ir::Shape* const* in, size_t count, OperandLayout* layout) {
  const size_t rank = out.rank();
  const int64_t total = out.num_elements();
  int64_t run = std::max<int64_t>(total, 1);
  for (size_t k = 0; k < count; ++k) {
    OperandLayout& l = layout[k];
    const ir::Shape& s = *in[k];
    // The common cases first: they need no strides.
    if (s == out || s.num_elements() == 1) {
      l.access = s == out ? Access::Direct : Access::Scalar;
      continue;
    }
    // Right-aligned broadcast strides of a row-major operand.
    int64_t step = 1;
    for (size_t d = rank; d-- > 0;) {
      const size_t lead = rank - s.rank();
      const bool has = d >= lead && s[d - lead] != 1;
      l.stride[d] = has ? step : 0;
      if (has) step *= s[d - lead];
    }
    // The longest run of inner axes along which the operand is all contiguous or all broadcast;
    // a contiguous stretch of a quarter chunk or less extends over the broadcast axes outside it
    // (a row copied per chunk beats many short chunks).
    int64_t inner = 1;
    int mode = -1;  // 1 contiguous, 0 broadcast, -1 not yet known
    size_t d = rank;
    for (; d-- > 0;) {
      if (out[d] == 1) continue;
      const int m = l.stride[d] == 0 ? 0 : l.stride[d] == inner ? 1 : 2;
      if (mode == -1 && m != 2) mode = m;
      if (m != mode) break;
      inner *= out[d];
    }
    l.access = mode == 0 ? Access::Repeated : Access::Contiguous;
    if (mode == 1 && inner * 4 <= kChunk && d < rank && l.stride[d] == 0) {
      l.access = Access::Periodic;
      l.period = inner;
      for (d++; d-- > 0 && (out[d] == 1 || l.stride[d] == 0);) inner *= out[d];
    }
    run = std::min(run, std::max<int64_t>(inner, 1));
  }
  return run;
}

namespace {
int64_t offset(const OperandLayout& l, const ir::Shape& out, int64_t base) {
  int64_t at = 0;
  for (size_t d = out.rank(); d-- > 0 && base > 0;) {
    at += base % out[d] * l.stride[d];
    base /= out[d];
  }
  return at;
}

float element(const eval::TensorRef& t, int64_t at) {
  switch (t.dtype) {
    case ir::DType::F32: return t.data<float>()[at];
    case ir::DType::U8: return t.data<uint8_t>()[at];
    case ir::DType::I8: return t.data<int8_t>()[at];
    case ir::DType::I32: return static_cast<float>(t.data<int32_t>()[at]);
    default: return float(t.data<uint8_t>()[at] != 0);
  }
}

// `v` as an 8-bit integer of [Lo, Hi] holds it: NaN is 0, the rest clamped and truncated
// toward zero (the conversion to int32). Branch-free selects, so that the loops vectorize.
template <int Lo, int Hi>
ESG_VM_INLINE int32_t narrowed(float v) {
  const float low = v > static_cast<float>(Lo) ? v : static_cast<float>(Lo);  // NaN: Lo
  const float clamped = low < static_cast<float>(Hi) ? low : static_cast<float>(Hi);
  return v == v ? static_cast<int32_t>(clamped) : 0;
}

// Built for each ISA level like the generated rows: these run once per chunk of every 8-bit
// operand and result.
ESG_CPU_CLONES void narrow_u8(float* row, int64_t n) {
  for (int64_t e = 0; e < n; ++e) row[e] = static_cast<float>(narrowed<0, 255>(row[e]));
}
ESG_CPU_CLONES void narrow_i8(float* row, int64_t n) {
  for (int64_t e = 0; e < n; ++e) row[e] = static_cast<float>(narrowed<-128, 127>(row[e]));
}
ESG_CPU_CLONES void store_u8(const float* row, uint8_t* out, int64_t n) {
  for (int64_t e = 0; e < n; ++e) out[e] = static_cast<uint8_t>(narrowed<0, 255>(row[e]));
}
ESG_CPU_CLONES void store_i8(const float* row, int8_t* out, int64_t n) {
  for (int64_t e = 0; e < n; ++e) out[e] = static_cast<int8_t>(narrowed<-128, 127>(row[e]));
}
ESG_CPU_CLONES void load_u8(const uint8_t* in, float* row, int64_t n) {
  for (int64_t e = 0; e < n; ++e) row[e] = in[e];
}
ESG_CPU_CLONES void load_i8(const int8_t* in, float* row, int64_t n) {
  for (int64_t e = 0; e < n; ++e) row[e] = in[e];
}
ESG_CPU_CLONES void load_i32(const int32_t* in, float* row, int64_t n) {
  for (int64_t e = 0; e < n; ++e) row[e] = static_cast<float>(in[e]);
}
}  // namespace

void narrow_row(float* row, ir::DType dtype, int64_t n) {
  if (dtype == ir::DType::U8) narrow_u8(row, n);
  else if (dtype == ir::DType::I8) narrow_i8(row, n);
}

void prepare_row(const eval::TensorRef& t, const OperandLayout& l, float* own) {
  if (l.access == Access::Scalar) std::fill_n(own, kChunk, element(t, 0));
}

const float* chunk_row(const eval::TensorRef& t, const OperandLayout& l, const ir::Shape& out, int64_t base, int64_t n,
                       float* own) {
  switch (l.access) {
    case Access::Scalar: return own;
    case Access::Repeated: std::fill_n(own, n, element(t, offset(l, out, base))); return own;
    case Access::Periodic: {  // one stretch from its phase on, then the row doubled onto itself
      const int64_t phase = base % l.period, start = offset(l, out, base) - phase, first = std::min(n, l.period);
      for (int64_t e = 0; e < first; ++e) own[e] = element(t, start + (phase + e) % l.period);
      for (int64_t have = first; have < n; have *= 2)
        std::memcpy(own + have, own, static_cast<size_t>(std::min(have, n - have)) * sizeof(float));
      return own;
    }
    case Access::Direct:
    case Access::Contiguous: break;
  }
  const int64_t at = l.access == Access::Direct ? base : offset(l, out, base);
  switch (t.dtype) {
    case ir::DType::F32: return t.data<float>() + at;
    case ir::DType::U8: load_u8(t.data<uint8_t>() + at, own, n); return own;
    case ir::DType::I8: load_i8(t.data<int8_t>() + at, own, n); return own;
    case ir::DType::I32: load_i32(t.data<int32_t>() + at, own, n); return own;
    default: {
      const uint8_t* b = t.data<uint8_t>() + at;
      for (int64_t e = 0; e < n; ++e) own[e] = b[e] != 0;
      return own;
    }
  }
}

void store_row(const float* row, const eval::TensorRef& t, int64_t at, int64_t n) {
  switch (t.dtype) {
    case ir::DType::F32: std::memcpy(t.data<float>() + at, row, static_cast<size_t>(n) * sizeof(float)); return;
    case ir::DType::U8: store_u8(row, t.data<uint8_t>() + at, n); return;
    case ir::DType::I8: store_i8(row, t.data<int8_t>() + at, n); return;
    default: {
      uint8_t* b = t.data<uint8_t>() + at;
      for (int64_t e = 0; e < n; ++e) b[e] = row[e] != 0;
    }
  }
}

eval::Kernel elementwise_f32_kernel(const ir::Graph& g, const ir::Node& n) {
  const ElementwiseF32* ew = n.op->elementwise ? find_elementwise_f32(*n.op) : nullptr;
  if (!ew || n.num_outputs != 1) return nullptr;
  const ir::DType out = g.values[n.first_output].dtype;
  if (!f32_row_dtype(out)) return nullptr;
  const auto inputs = g.inputs(n);
  if (inputs.size() > kMaxOperands) return nullptr;
  // int32 values enter f32 rows only through a cast to f32 (an integer product's sums, to be
  // scaled), which rounds them to f32 as their load does; other ops compute them as integers.
  const bool int32_to_f32 = n.op->kind == ir::OpKind::cast && out == ir::DType::F32;
  for (ir::ValueId v : inputs)
    if (v == ir::kNone || !(f32_row_dtype(g.values[v].dtype) || (int32_to_f32 && g.values[v].dtype == ir::DType::I32))) return nullptr;
  if (out == ir::DType::U8 || out == ir::DType::I8) {
    const bool converts = n.op->kind == ir::OpKind::quantize_linear || n.op->kind == ir::OpKind::quantized_add ||
                          (n.op->kind == ir::OpKind::cast && g.values[inputs[0]].dtype == ir::DType::F32);
    if (!converts) return nullptr;
  }
  return ew->kernel;
}

void run_rows_f32(RowF32 row, const eval::KernelCall& c) {
  const eval::TensorRef& out = *c.out[0];
  const size_t count = c.in.size();
  const ir::Shape* shapes[kMaxOperands];
  for (size_t k = 0; k < count; ++k) shapes[k] = &c.in[k]->shape;
  OperandLayout layout[kMaxOperands];
  const int64_t run = plan_operands(out.shape, shapes, count, layout);
  float attrs[eval::kMaxElementwiseAttrs];
  for (size_t i = 0; i < c.node.op->attrs.size(); ++i) {
    const ir::AttrValue& a = c.graph.attrs[c.node.first_attr + i];
    attrs[i] = static_cast<float>(a.kind == ir::AttrKind::Float ? a.f : static_cast<double>(a.i));
  }
  split_elements(out.size(), c.parallel, [&](int64_t begin, int64_t end) {
    // Rows that are not read in place live on this thread's stack; results go through a chunk
    // there too because the output may share an input's memory (in-place reuse) and a row's
    // output overlaps no row.
    float own[kMaxOperands][kChunk], result[kChunk];
    const float* rows[kMaxOperands];
    for (size_t k = 0; k < count; ++k) prepare_row(*c.in[k], layout[k], own[k]);
    for_each_chunk(begin, end, run, [&](int64_t base, int64_t n) {
      for (size_t k = 0; k < count; ++k) rows[k] = chunk_row(*c.in[k], layout[k], out.shape, base, n, own[k]);
      row(rows, attrs, result, n);
      store_row(result, out, base, n);
    });
  });
}

}  // namespace esg::cpu
