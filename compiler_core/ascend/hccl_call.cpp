#include "ascend/hccl_call.hpp"

#include "ir/op_attrs.gen.hpp"

namespace esg::ascend {
namespace {

using K = ir::OpKind;

bool reduces(K k) { return k == K::all_reduce || k == K::reduce_scatter; }

// HCCL's type for moving `t`: its own, or (bool) the integer of its width; false if none.
bool moved_as(ir::DType t, hccl::DataType* out) {
  switch (t) {
    case ir::DType::I8: case ir::DType::Bool: *out = hccl::kInt8; return true;
    case ir::DType::I16: *out = hccl::kInt16; return true;
    case ir::DType::I32: *out = hccl::kInt32; return true;
    case ir::DType::I64: *out = hccl::kInt64; return true;
    case ir::DType::U8: *out = hccl::kUint8; return true;
    case ir::DType::U16: *out = hccl::kUint16; return true;
    case ir::DType::U32: *out = hccl::kUint32; return true;
    case ir::DType::U64: *out = hccl::kUint64; return true;
    case ir::DType::F16: *out = hccl::kFp16; return true;
    case ir::DType::BF16: *out = hccl::kBf16; return true;
    case ir::DType::F32: *out = hccl::kFp32; return true;
    case ir::DType::F64: *out = hccl::kFp64; return true;
    default: return false;
  }
}

int64_t before(const ir::Shape& s, size_t axis) {
  int64_t n = 1;
  for (size_t i = 0; i < axis; ++i) n *= s[i];
  return n;
}

// The reduction an op asks for (its `op` attribute: sum, max, min, prod, avg).
int64_t reduction(const ir::Graph& g, const ir::Node& n) {
  return n.op->kind == K::all_reduce ? static_cast<int64_t>(ir::AllReduceAttrs(g, n).op) : static_cast<int64_t>(ir::ReduceScatterAttrs(g, n).op);
}

}  // namespace

const char* hccl_function(ir::OpKind kind) {
  switch (kind) {
    case K::all_reduce: return "HcclAllReduce";
    case K::all_gather: return "HcclAllGather";
    case K::reduce_scatter: return "HcclReduceScatter";
    case K::broadcast: return "HcclBroadcast";
    case K::all_to_all: return "HcclAlltoAll";
    case K::send: return "HcclSend";
    case K::recv: return "HcclRecv";
    default: return "?";
  }
}

std::string hccl_refusal(const ir::Graph& g, const ir::Node& n) {
  const K k = n.op->kind;
  const bool has_input = n.num_inputs > 0;
  const ir::DType t = has_input ? g.values[g.operands[n.first_input]].dtype : g.values[n.first_output].dtype;
  const std::string what = std::string(ir::dtype_name(t));
  if (reduces(k)) {
    // Atlas A2's reductions: int8, int16, int32, int64, fp16, fp32, bf16; prod not on int16 or bf16.
    const bool typed = t == ir::DType::I8 || t == ir::DType::I16 || t == ir::DType::I32 || t == ir::DType::I64 || t == ir::DType::F16 ||
                       t == ir::DType::F32 || t == ir::DType::BF16;
    if (!typed) return "HCCL reduces int8, int16, int32, int64, fp16, fp32 and bf16 on Atlas A2, not " + what;
    const dist::Reduce op = static_cast<dist::Reduce>(reduction(g, n));
    if (op == dist::Reduce::Avg) return "HCCL has no average (HcclReduceOp: sum, prod, max, min)";
    if (op == dist::Reduce::Prod && (t == ir::DType::I16 || t == ir::DType::BF16)) return "HCCL's prod takes no " + what;
  }
  hccl::DataType moved;
  if (!moved_as(t, &moved)) return "HCCL has no type for " + what;
  const ir::Shape in = has_input ? g.shape(g.operands[n.first_input]) : ir::Shape{}, out = g.shape(n.first_output);
  auto whole = [&](const ir::Shape& s, size_t axis, const char* which) -> std::string {
    if (before(s, axis) == 1) return "";
    return std::string("HCCL moves whole pieces in rank order: ") + n.op->name + " along axis " + std::to_string(axis) + " of " + what +
           g.shape_str(s) + " cuts its " + which + " into pieces that do not lie whole (move the axis first)";
  };
  if (k == K::all_gather) return whole(out, ir::AllGatherAttrs(g, n).axis, "result");
  if (k == K::reduce_scatter) return whole(in, ir::ReduceScatterAttrs(g, n).axis, "input");
  if (k == K::all_to_all) {
    const ir::AllToAllAttrs a(g, n);
    std::string why = whole(in, a.split_axis, "input");
    return why.empty() ? whole(out, a.concat_axis, "result") : why;
  }
  return "";
}

HcclCall hccl_call(const eval::Collective& collective) {
  HcclCall c;
  c.kind = collective.kind();
  moved_as(collective.dtype(), &c.type);
  const hccl::ReduceOp ops[] = {hccl::kSum, hccl::kMax, hccl::kMin, hccl::kProd, hccl::kSum};  // dist::Reduce's order (no avg)
  c.op = ops[static_cast<int>(collective.reduction())];
  c.bytes = static_cast<uint64_t>(collective.bytes());
  const uint64_t elements = c.bytes / ir::dtype_size(collective.dtype());  // of the input, or of a recv's result
  switch (c.kind) {
    case K::all_reduce: case K::reduce_scatter: c.count = static_cast<uint64_t>(collective.count()); break;
    case K::all_to_all: c.count = elements / collective.ranks().size(); break;
    default: c.count = elements; break;  // all_gather's sent, broadcast's, send's and recv's
  }
  if (c.kind == K::broadcast) c.rank = static_cast<uint32_t>(collective.root());
  if (c.kind == K::send || c.kind == K::recv) c.rank = static_cast<uint32_t>(collective.peer());  // a place in the world's group
  return c;
}

}  // namespace esg::ascend
