#include "ascend/row_kernel_source.hpp"

#include <algorithm>
#include <sstream>
#include <vector>

#include "eval/kernels.hpp"
#include "ir/error.hpp"

namespace esg::ascend {
namespace {

using ir::Error;
using ir::ErrorCode;

constexpr uint32_t kReserveBytes = 1024;  // left to the runtime
constexpr uint32_t kRowAlign = 64;        // elements: whole 256-byte repeats of f32

// What a row kernel reads and computes, from the node.
struct RowOp {
  std::string op;
  ir::DType dtype = ir::DType::F32;
  int64_t rows = 0, length = 0;
  size_t lead_rank = 0;  // x's dims before the row
  ir::ValueId x = ir::kNone, mask = ir::kNone, scale = ir::kNone, bias = ir::kNone;
  double softmax_scale = 1.0, epsilon = 0.0;
};

ir::ValueId input(const ir::Graph& g, const ir::Node& n, uint32_t i) { return i < n.num_inputs ? g.operands[n.first_input + i] : ir::kNone; }

RowOp describe(const ir::Graph& g, const ir::Node& n) {
  RowOp r;
  r.op = n.op->name;
  r.x = input(g, n, 0);
  r.dtype = g.values[r.x].dtype;
  const ir::Shape& s = g.shape(r.x);
  const eval::KernelCall a{g, n, {}, {}, nullptr};
  int64_t axis = a.attr_int("axis");
  if (axis < 0) axis += static_cast<int64_t>(s.rank());
  r.lead_rank = static_cast<size_t>(std::clamp<int64_t>(axis, 0, static_cast<int64_t>(s.rank())));
  r.rows = 1, r.length = 1;
  for (size_t d = 0; d < s.rank(); ++d) (d < r.lead_rank ? r.rows : r.length) *= s[d];
  if (r.op == "softmax") {
    r.mask = input(g, n, 1);
    r.softmax_scale = a.attr_float("scale");
  } else if (r.op == "layer_norm" || r.op == "rms_norm") {
    r.scale = input(g, n, 1);
    if (r.op == "layer_norm") r.bias = input(g, n, 2);
    r.epsilon = a.attr_float("epsilon");
  }
  return r;
}

// The longest row whose buffers fit the Unified Buffer: x, the mask and y double-buffered in
// their type; two f32 rows to work in; the scale and bias resident in f32; ReduceMax/ReduceSum's
// scratch (whole blocks of 8 floats, at most two per 64-element repeat: under a byte per element).
uint32_t capacity(const RowOp& r) {
  const uint64_t e = ir::dtype_size(r.dtype);
  const uint64_t bytes_per_element = 2 * e * (2 + (r.mask != ir::kNone)) + 4 * (2 + (r.scale != ir::kNone) + (r.bias != ir::kNone)) + 1;
  const uint64_t fit = (kUnifiedBufferBytes - kReserveBytes - 64) / bytes_per_element;
  return static_cast<uint32_t>(fit / kRowAlign * kRowAlign);
}

// ReduceMax/ReduceSum's scratch for `count` f32 elements (CANN's formula for the count form:
// one result per 256-byte repeat, two with an index, rounded up to whole 32-byte blocks).
uint32_t reduce_scratch(uint32_t count) { return ((count + 63) / 64 * 2 + 7) / 8 * 8; }

// The mask's row stride along each of x's leading dims (0 where it broadcasts), or an empty
// vector when the mask does not broadcast that way (then the row kernel does not take it).
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
  const std::string name = op.name;
  return name == "softmax" || name == "log_softmax" || name == "layer_norm" || name == "rms_norm";
}

std::string row_kernel_refusal(const ir::Graph& g, const ir::Node& n) {
  if (!is_row_op(*n.op)) return "not a row normalization";
  const RowOp r = describe(g, n);
  const ir::Shape& x = g.shape(r.x);
  if (r.dtype != ir::DType::F32 && r.dtype != ir::DType::F16 && r.dtype != ir::DType::BF16) return "f32, f16 and bf16 only";
  if (x.rank() == 0) return "a rank-0 tensor";
  if ((r.op == "softmax" || r.op == "log_softmax") && r.lead_rank + 1 != x.rank()) return "a softmax over another axis than the last";
  if (const uint32_t most = capacity(r); r.length > most)
    return "rows of " + std::to_string(r.length) + " elements (a row kernel holds at most " + std::to_string(most) + " in the Unified Buffer)";
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

KernelSource generate_row_kernel(const ir::Graph& g, const ir::Node& n) {
  const std::string refusal = row_kernel_refusal(g, n);
  if (!refusal.empty()) throw Error(ErrorCode::Unsupported, std::string("ascend: ") + n.op->name + " as a row kernel: " + refusal);
  const RowOp r = describe(g, n);
  const bool f32 = r.dtype == ir::DType::F32;
  const bool has_mask = r.mask != ir::kNone, has_scale = r.scale != ir::kNone, has_bias = r.bias != ir::kNone;
  const uint32_t row = capacity(r);
  const std::string e = element_type(r.dtype);

  // The math on the row, in f32: `a` is the row (x itself, or converted into w); each op ends
  // in one statement writing `$o`, y itself when it is f32, else w, converted into y after.
  std::vector<std::string> math;
  std::string a = "x";
  if (!f32) math.push_back("Cast(w, x, RoundMode::CAST_NONE, n);"), a = "w";
  if (r.op == "softmax" || r.op == "log_softmax") {
    if (r.softmax_scale != 1.0) math.push_back("Muls(w, " + a + ", " + float_literal(r.softmax_scale) + ", n);"), a = "w";
    if (has_mask) {
      if (!f32) math.push_back("Cast(t, m, RoundMode::CAST_NONE, n);");
      math.push_back("Add(w, " + a + ", " + (f32 ? "m" : "t") + ", n);"), a = "w";
    }
    math.push_back("ReduceMax(s, " + a + ", scratch, n);");
    math.push_back("Adds(w, " + a + ", -s.GetValue(0), n);");
    if (r.op == "softmax") {
      math.push_back("Exp(w, w, n);");
      math.push_back("ReduceSum(s, w, scratch, n);");
      math.push_back("Muls($o, w, 1.0f / s.GetValue(0), n);");
    } else {  // x - max - log(sum(exp(x - max)))
      math.push_back("Exp(t, w, n);");
      math.push_back("ReduceSum(s, t, scratch, n);");
      math.push_back("Duplicate(s, s.GetValue(0), 8);");
      math.push_back("Ln(s, s, 8);");
      math.push_back("Adds($o, w, -s.GetValue(0), n);");
    }
  } else {
    const std::string eps = float_literal(r.epsilon);
    if (r.op == "layer_norm") {  // the mean, then the variance of x - mean (nothing cancels)
      math.push_back("ReduceSum(s, " + a + ", scratch, n);");
      math.push_back("Adds(w, " + a + ", -(s.GetValue(0) / static_cast<float>(n)), n);");
      math.push_back("Mul(t, w, w, n);");
      a = "w";
    } else {
      math.push_back("Mul(t, " + a + ", " + a + ", n);");
    }
    math.push_back("ReduceSum(s, t, scratch, n);");
    math.push_back("Duplicate(s, s.GetValue(0) / static_cast<float>(n) + " + eps + ", 8);");
    math.push_back("Sqrt(s, s, 8);");
    math.push_back("Muls($o, " + a + ", 1.0f / s.GetValue(0), n);");
    if (has_scale) math.push_back("Mul($o, w, sc, n);");
    if (has_bias) math.push_back("Add($o, w, bi, n);");
  }
  // Only the last statement writes y; those before it write w.
  for (size_t i = 0; i < math.size(); ++i) {
    const size_t at = math[i].find("$o");
    if (at != std::string::npos) math[i].replace(at, 2, i + 1 == math.size() && f32 ? "y" : "w");
  }
  if (!f32) math.push_back("Cast(y, w, RoundMode::CAST_RINT, n);");

  // Parameters: x, the present optional inputs, y, the tiling.
  std::ostringstream params, args, members, init, copy_in, compute_head, compute_tail;
  auto param = [&](const std::string& name) { params << "GM_ADDR " << name << ", ", args << name << ", "; };
  param("x");
  members << "  GlobalTensor<V> gx_, gy_;\n  TQue<QuePosition::VECIN, 2> qx_;\n  TQue<QuePosition::VECOUT, 2> qy_;\n";
  init << "    gx_.SetGlobalBuffer((__gm__ V*)x, rows_ * length_);\n    pipe_.InitBuffer(qx_, 2, kRow * sizeof(V));\n";
  copy_in << "    LocalTensor<V> x = qx_.AllocTensor<V>();\n    Load(x, gx_[r * length_], n);\n    qx_.EnQue(x);\n";
  compute_head << "    LocalTensor<V> x = qx_.DeQue<V>();\n    LocalTensor<V> y = qy_.AllocTensor<V>();\n";
  compute_tail << "    qx_.FreeTensor(x);\n    qy_.EnQue(y);\n";
  if (has_mask) {
    param("mask");
    members << "  GlobalTensor<V> gm_;\n  TQue<QuePosition::VECIN, 2> qm_;\n";
    init << "    gm_.SetGlobalBuffer((__gm__ V*)mask, t.GetValue(3) * length_);\n    pipe_.InitBuffer(qm_, 2, kRow * sizeof(V));\n"
         << "    lead_rank_ = t.GetValue(4);\n"
         << "    for (uint64_t d = 0; d < lead_rank_; ++d) lead_[d] = t.GetValue(5 + d), mask_stride_[d] = t.GetValue(5 + kLeadDims + d);\n";
    copy_in << "    LocalTensor<V> m = qm_.AllocTensor<V>();\n    Load(m, gm_[MaskRow(r) * length_], n);\n    qm_.EnQue(m);\n";
    compute_head << "    LocalTensor<V> m = qm_.DeQue<V>();\n";
    compute_tail << "    qm_.FreeTensor(m);\n";
  }
  // The scale and bias: loaded once into f32 rows (through x's queue when they are converted).
  auto resident = [&](const char* name, const char* local) {
    param(name);
    members << "  TBuf<TPosition::VECCALC> " << local << "_;\n";
    init << "    pipe_.InitBuffer(" << local << "_, kRow * sizeof(float));\n    {\n      GlobalTensor<V> g;\n"
         << "      g.SetGlobalBuffer((__gm__ V*)" << name << ", length_);\n      LocalTensor<float> row = " << local << "_.Get<float>();\n";
    if (f32)
      init << "      Load(row, g, static_cast<uint32_t>(length_));\n";
    else
      init << "      LocalTensor<V> raw = qx_.AllocTensor<V>();\n      Load(raw, g, static_cast<uint32_t>(length_));\n      qx_.EnQue(raw);\n"
           << "      raw = qx_.DeQue<V>();\n      Cast(row, raw, RoundMode::CAST_NONE, static_cast<uint32_t>(length_));\n      qx_.FreeTensor(raw);\n";
    init << "    }\n";
    compute_head << "    LocalTensor<float> " << local << " = " << local << "_.Get<float>();\n";
  };
  init << "    gy_.SetGlobalBuffer((__gm__ V*)y, rows_ * length_);\n    pipe_.InitBuffer(qy_, 2, kRow * sizeof(V));\n"
       << "    pipe_.InitBuffer(work_, (2 * kRow + kScratch + 8) * sizeof(float));\n";
  if (has_scale) resident("scale", "sc");
  if (has_bias) resident("bias", "bi");
  params << "GM_ADDR y, ";
  args << "y, ";
  compute_head << "    LocalTensor<float> w = work_.Get<float>();\n    LocalTensor<float> t = w[kRow];\n"
               << "    LocalTensor<float> s = w[2 * kRow];  // one block: the reductions' result\n"
               << "    LocalTensor<float> scratch = w[2 * kRow + 8];  // to the buffer's end: kScratch elements\n";

  std::ostringstream code;
  code << "// Generated by esgraph: " << r.op << " over rows" << (has_mask ? ", with a mask" : "") << (has_scale ? ", with a scale" : "")
       << (has_bias ? ", with a bias" : "") << ", " << ir::dtype_name(r.dtype) << " (computed in f32),\n"
       << "// rows of any length up to kRow (the tiling argument).\n"
       << "#include \"kernel_operator.h\"\nusing namespace AscendC;\n\nnamespace {\n"
       << "using V = " << e << ";  // the values' type in global memory\n"
       << "constexpr uint32_t kRow = " << row << ";  // the longest row the Unified Buffer holds\n"
       << "constexpr uint32_t kScratch = " << reduce_scratch(row) << ";  // ReduceMax/ReduceSum's work, for kRow elements\n"
       << (has_mask ? "constexpr uint64_t kLeadDims = " + std::to_string(kMaxRowLeadDims) + ";\n" : "") << "\n"
       << "class Kernel {\n public:\n"
       << "  __aicore__ inline void Init(" << params.str() << "GM_ADDR tiling) {\n"
       << "    GlobalTensor<uint64_t> t;\n    t.SetGlobalBuffer((__gm__ uint64_t*)tiling, " << sizeof(RowTiling) / sizeof(uint64_t) << ");\n"
       << "    rows_ = t.GetValue(0);\n    const uint64_t per_block = t.GetValue(1);\n    length_ = t.GetValue(2);\n"
       << "    begin_ = GetBlockIdx() * per_block;\n    end_ = begin_ + per_block < rows_ ? begin_ + per_block : rows_;\n"
       << init.str() << "  }\n\n"
       << "  __aicore__ inline void Process() {\n"
       << "    const uint32_t n = static_cast<uint32_t>(length_);\n"
       << "    for (uint64_t r = begin_; r < end_; ++r) {\n      CopyIn(r, n);\n      Compute(n);\n      CopyOut(r, n);\n    }\n  }\n\n private:\n"
       << "  __aicore__ inline void CopyIn(uint64_t r, uint32_t n) {\n" << copy_in.str() << "  }\n\n"
       << "  __aicore__ inline void Compute(uint32_t n) {\n" << compute_head.str();
  for (const std::string& s : math) code << "    " << s << "\n";
  code << compute_tail.str() << "  }\n\n"
       << "  __aicore__ inline void CopyOut(uint64_t r, uint32_t n) {\n"
       << "    LocalTensor<V> y = qy_.DeQue<V>();\n    Store(gy_[r * length_], y, n);\n    qy_.FreeTensor(y);\n  }\n\n";
  if (has_mask)
    code << "  // The mask's row for x's row r: r's index along each leading dim times the mask's stride there.\n"
         << "  __aicore__ inline uint64_t MaskRow(uint64_t r) const {\n    uint64_t at = 0;\n"
         << "    for (uint64_t d = lead_rank_; d-- > 0;) {\n      at += r % lead_[d] * mask_stride_[d];\n      r /= lead_[d];\n    }\n"
         << "    return at;\n  }\n\n";
  code << copy_helpers() << "\n"
       << "  TPipe pipe_;\n" << members.str() << "  TBuf<TPosition::VECCALC> work_;\n"
       << "  uint64_t rows_ = 0, length_ = 0, begin_ = 0, end_ = 0;\n"
       << (has_mask ? "  uint64_t lead_rank_ = 0, lead_[kLeadDims] = {}, mask_stride_[kLeadDims] = {};\n" : "") << "};\n}  // namespace\n\n";
  return finish_kernel(code.str(), params.str(), args.str(), row, 1 + has_mask + has_scale + has_bias + 1 + 1);
}

}  // namespace esg::ascend
