#include "ascend/row_kernel_source.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "ir/error.hpp"
#include "ir/op_attrs.gen.hpp"

namespace esg::ascend {
namespace {

using ir::Error;
using ir::ErrorCode;

constexpr uint32_t kReserveBytes = 1024;  // left to the runtime
constexpr uint32_t kRowAlign = 64;        // elements: whole 256-byte repeats of f32

// What a row kernel reads and computes, from the node.
struct RowOp {
  ir::OpKind kind;
  ir::DType dtype = ir::DType::F32;
  int64_t rows = 0, length = 0;
  size_t lead_rank = 0;  // x's dims before the row
  ir::ValueId x = ir::kNone, mask = ir::kNone, scale = ir::kNone, bias = ir::kNone;
  double softmax_scale = 1.0, epsilon = 0.0;
};

ir::ValueId input(const ir::Graph& g, const ir::Node& n, uint32_t i) { return i < n.num_inputs ? g.operands[n.first_input + i] : ir::kNone; }

RowOp describe(const ir::Graph& g, const ir::Node& n) {
  RowOp r;
  r.kind = n.op->kind;
  r.x = input(g, n, 0);
  r.dtype = g.values[r.x].dtype;
  // The row is x's dims from the axis on (each view's axis is normalized).
  if (r.kind == ir::OpKind::softmax) {
    const ir::SoftmaxAttrs a(g, n);
    r.lead_rank = a.axis;
    r.mask = input(g, n, 1);
    r.softmax_scale = a.scale;
  } else if (r.kind == ir::OpKind::log_softmax) {
    r.lead_rank = ir::LogSoftmaxAttrs(g, n).axis;
  } else if (r.kind == ir::OpKind::layer_norm) {
    const ir::LayerNormAttrs a(g, n);
    r.lead_rank = a.axis;
    r.scale = input(g, n, 1);
    r.bias = input(g, n, 2);
    r.epsilon = a.epsilon;
  } else {  // rms_norm
    const ir::RmsNormAttrs a(g, n);
    r.lead_rank = a.axis;
    r.scale = input(g, n, 1);
    r.epsilon = a.epsilon;
  }
  const ir::Shape& s = g.shape(r.x);
  r.rows = 1, r.length = 1;
  for (size_t d = 0; d < s.rank(); ++d) (d < r.lead_rank ? r.rows : r.length) *= s[d];
  return r;
}

// The longest row whose buffers fit the Unified Buffer, and a longer row's chunk: x, the mask
// and y double-buffered in their type; two f32 rows to work in; the scale and bias in f32;
// ReduceMax/ReduceSum's scratch (whole blocks of 8 floats, at most two per 64-element repeat:
// under a byte per element).
uint32_t capacity(const RowOp& r) {
  const uint64_t e = ir::dtype_size(r.dtype);
  const uint64_t bytes_per_element = 2 * e * (2 + (r.mask != ir::kNone)) + 4 * (2 + (r.scale != ir::kNone) + (r.bias != ir::kNone)) + 1;
  const uint64_t fit = (kUnifiedBufferBytes - kReserveBytes - 64) / bytes_per_element;
  return static_cast<uint32_t>(fit / kRowAlign * kRowAlign);
}

// ReduceMax/ReduceSum's scratch for `count` f32 elements (CANN's formula for the count form:
// one result per 256-byte repeat, two with an index, rounded up to whole 32-byte blocks).
uint32_t reduce_scratch(uint32_t count) { return ((count + 63) / 64 * 2 + 7) / 8 * 8; }

// The mask's row stride along each of x's leading dims (0 where it broadcasts); *ok tells
// whether the mask repeats whole rows that way at all (else the row kernel does not take it).
std::vector<uint64_t> mask_strides(const ir::Graph& g, const RowOp& r, bool* ok) {
  const ir::Shape& x = g.shape(r.x);
  const ir::Shape& m = g.shape(r.mask);
  *ok = m.rank() >= 1 && m.rank() <= x.rank() && m[m.rank() - 1] == r.length && r.lead_rank + 1 == x.rank() &&
        g.values[r.mask].dtype == r.dtype;
  std::vector<uint64_t> strides(r.lead_rank, 0);
  if (!*ok) return strides;
  uint64_t stride = 1;
  const size_t offset = x.rank() - m.rank();
  for (size_t d = m.rank() - 1; d-- > 0;) {
    const int64_t md = m[d], xd = x[offset + d];
    if (md != 1 && md != xd) *ok = false;
    strides[offset + d] = md == 1 ? 0 : stride;
    stride *= static_cast<uint64_t>(md);
  }
  return strides;
}

}  // namespace

bool is_row_op(const ir::OpSchema& op) {
  const ir::OpKind k = op.kind;
  return k == ir::OpKind::softmax || k == ir::OpKind::log_softmax || k == ir::OpKind::layer_norm || k == ir::OpKind::rms_norm;
}

std::string row_kernel_refusal(const ir::Graph& g, const ir::Node& n) {
  if (!is_row_op(*n.op)) return "not a row normalization";
  const RowOp r = describe(g, n);
  const ir::Shape& x = g.shape(r.x);
  if (r.dtype != ir::DType::F32 && r.dtype != ir::DType::F16 && r.dtype != ir::DType::BF16) return "f32, f16 and bf16 only";
  if (x.rank() == 0) return "a rank-0 tensor";
  if ((r.kind == ir::OpKind::softmax || r.kind == ir::OpKind::log_softmax) && r.lead_rank + 1 != x.rank())
    return "a softmax over another axis than the last";
  for (ir::ValueId v : {r.scale, r.bias})
    if (v != ir::kNone && (g.shape(v).num_elements() != r.length || g.values[v].dtype != r.dtype)) return "a scale or bias that is not one row";
  if (r.mask != ir::kNone) {
    bool ok = false;
    mask_strides(g, r, &ok);
    if (!ok) return "a mask " + g.shape_str(g.shape(r.mask)) + " that does not repeat whole rows of " + g.shape_str(x);
    if (r.lead_rank > static_cast<size_t>(kMaxRowLeadDims)) return "a mask over more than " + std::to_string(kMaxRowLeadDims) + " leading dims";
  }
  return "";
}

RowTiling row_tiling(const ir::Graph& g, const ir::Node& n, uint32_t cores, uint32_t* blocks) {
  const RowOp r = describe(g, n);
  RowTiling t;
  t.rows = static_cast<uint64_t>(r.rows);
  t.length = static_cast<uint64_t>(r.length);
  const uint64_t used = std::max<uint64_t>(1, std::min<uint64_t>(cores, t.rows));
  t.rows_per_block = (t.rows + used - 1) / used;
  *blocks = t.rows && t.length ? static_cast<uint32_t>((t.rows + t.rows_per_block - 1) / t.rows_per_block) : 0;
  if (r.mask != ir::kNone) {
    bool ok = false;
    const std::vector<uint64_t> strides = mask_strides(g, r, &ok);
    const ir::Shape& x = g.shape(r.x);
    t.mask_rows = static_cast<uint64_t>(g.shape(r.mask).num_elements()) / std::max<uint64_t>(1, t.length);
    t.lead_rank = r.lead_rank;
    for (size_t d = 0; d < r.lead_rank; ++d) t.lead[d] = static_cast<uint64_t>(x[d]), t.mask_stride[d] = strides[d];
  }
  return t;
}

namespace {

// The row's math, in f32 over a tile of n elements: `prologue` makes the row `A` from x (and
// the mask); then passes, each ending in a reduction whose result a scalar member takes; then
// the final statements, writing `$o` (y itself when it is f32, else w, converted after). A row
// in the Unified Buffer runs it all on one tile (`final_whole` reuses what the passes left in
// w); a longer row runs each pass over its chunks, then `final_chunked` chunk by chunk.
struct RowMath {
  std::vector<std::string> prologue;
  std::string init;                                // the scalars, per row
  std::vector<std::vector<std::string>> passes;    // per pass: its statements, ending in a reduction into a scalar
  std::vector<std::string> after;                  // per pass: the scalar math once the pass has seen the whole row
  std::vector<std::string> final_whole, final_chunked;
};

RowMath row_math(const RowOp& r, bool f32) {
  RowMath m;
  std::string a = "x";
  if (!f32) m.prologue.push_back("Cast(w, x, RoundMode::CAST_NONE, n);"), a = "w";
  // The scalar unit reads a result the vector pipe wrote into s, which the vector pipe writes
  // again later: flags on both sides, as no queue orders them.
  auto read_s = [](const std::string& statement) { return pipe_flag("V_S") + "\n    " + statement + "\n    " + pipe_flag("S_V"); };
  auto reduce_into = [&](const char* op, const std::string& of, const std::string& update) {
    return std::vector<std::string>{std::string(op) + "(s, " + of + ", scratch, n);", read_s(update)};
  };
  const std::string count = "static_cast<float>(length_)";
  if (r.kind == ir::OpKind::softmax || r.kind == ir::OpKind::log_softmax) {
    if (r.softmax_scale != 1.0) m.prologue.push_back("Muls(w, " + a + ", " + float_literal(r.softmax_scale) + ", n);"), a = "w";
    if (r.mask != ir::kNone) {
      if (!f32) m.prologue.push_back("Cast(t, m, RoundMode::CAST_NONE, n);");
      m.prologue.push_back("Add(w, " + a + ", " + (f32 ? "m" : "t") + ", n);"), a = "w";
    }
    m.init = "top_ = " + float_literal(-INFINITY) + ", sum_ = 0.0f;";
    m.passes.push_back(reduce_into("ReduceMax", a, "top_ = s.GetValue(0) > top_ ? s.GetValue(0) : top_;"));
    m.after.push_back("");
    if (r.kind == ir::OpKind::softmax) {
      m.passes.push_back({"Adds(w, " + a + ", -top_, n);", "Exp(w, w, n);", "ReduceSum(s, w, scratch, n);", read_s("sum_ += s.GetValue(0);")});
      m.after.push_back("");
      m.final_whole = {"Muls($o, w, 1.0f / sum_, n);"};
      m.final_chunked = {"Adds(w, " + a + ", -top_, n);", "Exp(w, w, n);", "Muls($o, w, 1.0f / sum_, n);"};
    } else {  // x - max - log(sum(exp(x - max)))
      m.passes.push_back({"Adds(w, " + a + ", -top_, n);", "Exp(t, w, n);", "ReduceSum(s, t, scratch, n);", read_s("sum_ += s.GetValue(0);")});
      m.after.push_back("Duplicate(s, sum_, 8);\n    Ln(s, s, 8);\n    " + read_s("lse_ = s.GetValue(0);"));
      m.final_whole = {"Adds($o, w, -lse_, n);"};
      m.final_chunked = {"Adds(w, " + a + ", -top_, n);", "Adds($o, w, -lse_, n);"};
    }
  } else {
    const std::string rstd = "Duplicate(s, sq_ / " + count + " + " + float_literal(r.epsilon) + ", 8);\n    Sqrt(s, s, 8);\n    " + read_s("rstd_ = 1.0f / s.GetValue(0);");
    std::vector<std::string> scale;
    if (r.scale != ir::kNone) scale.push_back("Mul($o, w, sc, n);");
    if (r.bias != ir::kNone) scale.push_back("Add($o, w, bi, n);");
    if (r.kind == ir::OpKind::layer_norm) {  // the mean, then the variance of x - mean (nothing cancels)
      m.init = "sum_ = 0.0f, sq_ = 0.0f;";
      m.passes.push_back(reduce_into("ReduceSum", a, "sum_ += s.GetValue(0);"));
      m.after.push_back("mean_ = sum_ / " + count + ";");
      m.passes.push_back({"Adds(w, " + a + ", -mean_, n);", "Mul(t, w, w, n);", "ReduceSum(s, t, scratch, n);", read_s("sq_ += s.GetValue(0);")});
      m.after.push_back(rstd);
      m.final_whole = {"Muls($o, w, rstd_, n);"};
      m.final_chunked = {"Adds(w, " + a + ", -mean_, n);", "Muls($o, w, rstd_, n);"};
    } else {
      m.init = "sq_ = 0.0f;";
      m.passes.push_back({"Mul(t, " + a + ", " + a + ", n);", "ReduceSum(s, t, scratch, n);", read_s("sq_ += s.GetValue(0);")});
      m.after.push_back(rstd);
      m.final_whole = m.final_chunked = {"Muls($o, " + a + ", rstd_, n);"};
    }
    for (auto* f : {&m.final_whole, &m.final_chunked}) f->insert(f->end(), scale.begin(), scale.end());
  }
  // Only the last statement of a final writes y; those before it write w.
  for (auto* f : {&m.final_whole, &m.final_chunked}) {
    for (size_t i = 0; i < f->size(); ++i) {
      std::string& st = (*f)[i];
      if (const size_t at = st.find("$o"); at != std::string::npos) st.replace(at, 2, i + 1 == f->size() && f32 ? "y" : "w");
    }
    if (!f32) f->push_back("Cast(y, w, RoundMode::CAST_RINT, n);");
  }
  return m;
}

std::string lines(const std::vector<std::string>& statements) {
  std::string out;
  for (const std::string& st : statements) out += "    " + st + "\n";
  return out;
}

}  // namespace

KernelSource generate_row_kernel(const ir::Graph& g, const ir::Node& n) {
  const std::string refusal = row_kernel_refusal(g, n);
  if (!refusal.empty()) throw Error(ErrorCode::Unsupported, std::string("ascend: ") + n.op->name + " as a row kernel: " + refusal);
  const RowOp r = describe(g, n);
  const bool f32 = r.dtype == ir::DType::F32;
  const bool has_mask = r.mask != ir::kNone, has_scale = r.scale != ir::kNone, has_bias = r.bias != ir::kNone;
  const uint32_t row = capacity(r);
  const RowMath math = row_math(r, f32);

  // Parameters: x, the present optional inputs, y, the tiling.
  std::ostringstream params, args, members, init, copy_in, head, tail, residents;
  auto param = [&](const std::string& name) { params << "GM_ADDR " << name << ", ", args << name << ", "; };
  param("x");
  members << "  GlobalTensor<V> gx_, gy_;\n  TQue<QuePosition::VECIN, 2> qx_;\n  TQue<QuePosition::VECOUT, 2> qy_;\n";
  init << "    gx_.SetGlobalBuffer((__gm__ V*)x, rows_ * length_);\n    pipe_.InitBuffer(qx_, 2, kRow * sizeof(V));\n";
  copy_in << "    LocalTensor<V> x = qx_.AllocTensor<V>();\n    Load(x, gx_[r * length_ + c], n);\n    qx_.EnQue(x);\n";
  head << "    LocalTensor<V> x = qx_.DeQue<V>();\n";
  tail << "    qx_.FreeTensor(x);\n";
  if (has_mask) {
    param("mask");
    members << "  GlobalTensor<V> gm_;\n  TQue<QuePosition::VECIN, 2> qm_;\n";
    init << "    gm_.SetGlobalBuffer((__gm__ V*)mask, t.GetValue(3) * length_);\n    pipe_.InitBuffer(qm_, 2, kRow * sizeof(V));\n"
         << "    lead_rank_ = t.GetValue(4);\n"
         << "    for (uint64_t d = 0; d < lead_rank_; ++d) lead_[d] = t.GetValue(5 + d), mask_stride_[d] = t.GetValue(5 + kLeadDims + d);\n";
    copy_in << "    LocalTensor<V> m = qm_.AllocTensor<V>();\n    Load(m, gm_[MaskRow(r) * length_ + c], n);\n    qm_.EnQue(m);\n";
    head << "    LocalTensor<V> m = qm_.DeQue<V>();\n";
    tail << "    qm_.FreeTensor(m);\n";
  }
  // The scale and bias: f32 rows in the Unified Buffer, loaded once for rows that fit, chunk by
  // chunk for longer ones. The copy pipe and the vector pipe are ordered through queues both
  // ways (CANN documents copies from global memory into VECIN/VECOUT buffers only, on Atlas A2):
  // an f32 row is its own queue's buffer, dequeued once loaded and held until the next chunk's
  // load frees it (so that load waits for the vector reads of the last); an f16 or bf16 row
  // goes through x's queue and is converted into a vector buffer.
  auto resident = [&](const char* name, const char* local) {
    param(name);
    members << "  GlobalTensor<V> g" << local << "_;\n";
    init << "    g" << local << "_.SetGlobalBuffer((__gm__ V*)" << name << ", length_);\n";
    if (f32) {
      members << "  TQue<QuePosition::VECIN, 1> q" << local << "_;\n  LocalTensor<float> " << local << "_;  // dequeued, held until the next load\n";
      init << "    pipe_.InitBuffer(q" << local << "_, 1, kRow * sizeof(float));\n";
      residents << "    if (residents_) q" << local << "_.FreeTensor(" << local << "_);\n    " << local << "_ = q" << local
                << "_.AllocTensor<float>();\n    Load(" << local << "_, g" << local << "_[c], n);\n    q" << local << "_.EnQue(" << local
                << "_);\n    " << local << "_ = q" << local << "_.DeQue<float>();\n";
      head << "    LocalTensor<float> " << local << " = " << local << "_;\n";
    } else {
      members << "  TBuf<TPosition::VECCALC> " << local << "_;\n";
      init << "    pipe_.InitBuffer(" << local << "_, kRow * sizeof(float));\n";
      residents << "    {\n      LocalTensor<V> raw = qx_.AllocTensor<V>();\n      Load(raw, g" << local << "_[c], n);\n      qx_.EnQue(raw);\n"
                << "      raw = qx_.DeQue<V>();\n      Cast(" << local << "_.Get<float>(), raw, RoundMode::CAST_NONE, n);\n      qx_.FreeTensor(raw);\n    }\n";
      head << "    LocalTensor<float> " << local << " = " << local << "_.Get<float>();\n";
    }
  };
  init << "    gy_.SetGlobalBuffer((__gm__ V*)y, rows_ * length_);\n    pipe_.InitBuffer(qy_, 2, kRow * sizeof(V));\n"
       << "    pipe_.InitBuffer(work_, (2 * kRow + kScratch + 8) * sizeof(float));\n";
  if (has_scale) resident("scale", "sc");
  if (has_bias) resident("bias", "bi");
  if (has_scale || has_bias) init << "    if (length_ <= kRow) LoadResidents(0, static_cast<uint32_t>(length_));\n";
  params << "GM_ADDR y, ";
  args << "y, ";
  head << "    LocalTensor<float> w = work_.Get<float>();\n    LocalTensor<float> t = w[kRow];\n"
       << "    LocalTensor<float> s = w[2 * kRow];  // one block: the reductions' result\n"
       << "    LocalTensor<float> scratch = w[2 * kRow + 8];  // to the buffer's end: kScratch elements\n";
  const std::string with_y_head = head.str() + "    LocalTensor<V> y = qy_.AllocTensor<V>();\n";
  const std::string with_y_tail = tail.str() + "    qy_.EnQue(y);\n";
  const std::string prologue = lines(math.prologue);

  std::ostringstream code;
  code << "// Generated by esgraph: " << n.op->name << " over rows" << (has_mask ? ", with a mask" : "") << (has_scale ? ", with a scale" : "")
       << (has_bias ? ", with a bias" : "") << ", " << ir::dtype_name(r.dtype) << " (computed in f32),\n"
       << "// rows of any length (the tiling argument): up to kRow in the Unified Buffer at once, longer ones chunk by chunk.\n"
       << "#include \"kernel_operator.h\"\nusing namespace AscendC;\n\nnamespace {\n"
       << "using V = " << element_type(r.dtype) << ";  // the values' type in global memory\n"
       << "constexpr uint32_t kRow = " << row << ";  // the longest row the Unified Buffer holds; a longer row's chunk\n"
       << "constexpr uint32_t kScratch = " << reduce_scratch(row) << ";  // ReduceMax/ReduceSum's work, for kRow elements\n"
       << (has_mask ? "constexpr uint64_t kLeadDims = " + std::to_string(kMaxRowLeadDims) + ";\n" : "") << "\n"
       << "class Kernel {\n public:\n"
       << "  __aicore__ inline void Init(" << params.str() << "GM_ADDR tiling) {\n"
       << "    GlobalTensor<uint64_t> t;\n    t.SetGlobalBuffer((__gm__ uint64_t*)tiling, " << sizeof(RowTiling) / sizeof(uint64_t) << ");\n"
       << "    rows_ = t.GetValue(0);\n    const uint64_t per_block = t.GetValue(1);\n    length_ = t.GetValue(2);\n"
       << "    begin_ = GetBlockIdx() * per_block;\n    end_ = begin_ + per_block < rows_ ? begin_ + per_block : rows_;\n"
       << init.str() << "  }\n\n"
       << "  __aicore__ inline void Process() {\n"
       << "    for (uint64_t r = begin_; r < end_; ++r) {\n      " << math.init << "\n"
       << "      if (length_ <= kRow) {\n        const uint32_t n = static_cast<uint32_t>(length_);\n"
       << "        CopyIn(r, 0, n);\n        Whole(n);\n        CopyOut(r, 0, n);\n      } else {\n        Chunked(r);\n      }\n    }\n  }\n\n"
       << " private:\n"
       << "  __aicore__ inline void CopyIn(uint64_t r, uint64_t c, uint32_t n) {\n" << copy_in.str() << "  }\n\n"
       << "  // A row in the Unified Buffer: every pass on the one tile.\n"
       << "  __aicore__ inline void Whole(uint32_t n) {\n" << with_y_head << prologue;
  for (size_t k = 0; k < math.passes.size(); ++k) code << lines(math.passes[k]) << (math.after[k].empty() ? "" : "    " + math.after[k] + "\n");
  code << lines(math.final_whole) << with_y_tail << "  }\n\n"
       << "  // A longer row: each pass over its chunks, then the result chunk by chunk.\n"
       << "  __aicore__ inline void Chunked(uint64_t r) {\n";
  if (std::any_of(math.after.begin(), math.after.end(), [](const std::string& a) { return !a.empty(); }))
    code << "    LocalTensor<float> s = work_.Get<float>()[2 * kRow];  // the block the scalar math between passes goes through\n";
  for (size_t k = 0; k < math.passes.size(); ++k) {
    code << "    for (uint64_t c = 0; c < length_; c += kRow) {\n      const uint32_t n = static_cast<uint32_t>(length_ - c < kRow ? length_ - c : kRow);\n"
         << "      CopyIn(r, c, n);\n      Pass" << k << "(n);\n    }\n" << (math.after[k].empty() ? "" : "    " + math.after[k] + "\n");
  }
  code << "    for (uint64_t c = 0; c < length_; c += kRow) {\n      const uint32_t n = static_cast<uint32_t>(length_ - c < kRow ? length_ - c : kRow);\n"
       << (has_scale || has_bias ? "      LoadResidents(c, n);\n" : "") << "      CopyIn(r, c, n);\n      Final(n);\n      CopyOut(r, c, n);\n    }\n  }\n\n";
  for (size_t k = 0; k < math.passes.size(); ++k)
    code << "  __aicore__ inline void Pass" << k << "(uint32_t n) {\n" << head.str() << prologue << lines(math.passes[k]) << tail.str() << "  }\n\n";
  code << "  __aicore__ inline void Final(uint32_t n) {\n" << with_y_head << prologue << lines(math.final_chunked) << with_y_tail << "  }\n\n"
       << "  __aicore__ inline void CopyOut(uint64_t r, uint64_t c, uint32_t n) {\n"
       << "    LocalTensor<V> y = qy_.DeQue<V>();\n    Store(gy_[r * length_ + c], y, n);\n    qy_.FreeTensor(y);\n  }\n\n";
  if (has_scale || has_bias)
    code << "  __aicore__ inline void LoadResidents(uint64_t c, uint32_t n) {\n" << residents.str() << (f32 ? "    residents_ = true;\n" : "")
         << "  }\n\n";
  if (has_mask)
    code << "  // The mask's row for x's row r: r's index along each leading dim times the mask's stride there.\n"
         << "  __aicore__ inline uint64_t MaskRow(uint64_t r) const {\n    uint64_t at = 0;\n"
         << "    for (uint64_t d = lead_rank_; d-- > 0;) {\n      at += r % lead_[d] * mask_stride_[d];\n      r /= lead_[d];\n    }\n"
         << "    return at;\n  }\n\n";
  code << copy_helpers() << "\n"
       << "  TPipe pipe_;\n" << members.str() << "  TBuf<TPosition::VECCALC> work_;\n"
       << "  uint64_t rows_ = 0, length_ = 0, begin_ = 0, end_ = 0;\n"
       << "  float top_ = 0, sum_ = 0, sq_ = 0, mean_ = 0, rstd_ = 0, lse_ = 0;  // a row's reductions, as the passes leave them\n"
       << (has_mask ? "  uint64_t lead_rank_ = 0, lead_[kLeadDims] = {}, mask_stride_[kLeadDims] = {};\n" : "")
       << (f32 && (has_scale || has_bias) ? "  bool residents_ = false;  // the scale and bias rows are held (dequeued)\n" : "") << "};\n}  // namespace\n\n";
  return finish_kernel(code.str(), params.str(), args.str(), row, 1 + has_mask + has_scale + has_bias + 1 + 1);
}

}  // namespace esg::ascend
