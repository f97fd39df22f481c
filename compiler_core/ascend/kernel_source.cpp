#include "ascend/kernel_source.hpp"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <sstream>

#include "ascend/ascendc_ops.hpp"
#include "ascend/math_scratch.hpp"
#include "ir/error.hpp"

namespace esg::ascend {
namespace {

using ir::Error;
using ir::ErrorCode;

constexpr uint32_t kReserveBytes = 1024;  // left to the runtime
constexpr uint32_t kSelectScratchBytes = 8 * 1024;
constexpr uint32_t kTileAlign = 64;       // elements: whole 256-byte vector repeats of f32
// With masks: a tile's mask (a bit per element) is whole 32-byte blocks, and the mask
// instructions' rounded counts ($N: whole 256 bytes of T) stay within the tile.
constexpr uint32_t kMaskTileAlign = 256;
constexpr uint32_t kMaxTile = 16 * 1024;

// Replaces each `$<letter><digits>` (and `$y`, `$n`) through `name`.
template <class F>
std::string substitute(const std::string& text, F name) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '$') {
      out += text[i];
      continue;
    }
    const char kind = text[++i];
    size_t j = i + 1;
    while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
    const int index = j > i + 1 ? std::stoi(text.substr(i + 1, j - i - 1)) : -1;
    out += name(kind, index);
    i = j - 1;
  }
  return out;
}

}  // namespace





bool kernel_computes(const ir::Graph& g, const ir::Node& n) {
  for (ir::ValueId v : g.inputs(n))
    if (v != ir::kNone && !element_type(g.values[v].dtype)) return false;
  for (uint32_t i = 0; i < n.num_outputs; ++i)
    if (!element_type(g.values[n.first_output + i].dtype)) return false;
  return true;
}

namespace {

// What a fused group's kernel is made of, decided before any code is written: the type it
// computes in, how each input arrives, each member's lowering and the tiles it needs, and the
// tile size the Unified Buffer allows.
struct GroupKernel {
  GroupKernel(const ir::Graph& graph, const runtime::FusedGroup& group) : g(graph), grp(group) {}
  const ir::Graph& g;
  const runtime::FusedGroup& grp;
  ir::DType dtype = ir::DType::F32;  // T
  size_t t_size = 4;
  // Per input: 0 when streamed tile by tile, else the period its elements repeat with (resident:
  // it fills one tile at the start), its slot among the residents, and its conversion tile.
  std::vector<uint64_t> period;
  std::vector<int> resident_slot, converted;
  int residents = 0, conversions = 0;
  uint64_t tile_multiple = kTileAlign;
  std::vector<const AscendCOp*> lowered;  // per step
  int temps = 0, masks = 0, work = 0;
  std::vector<int> work_of;  // per step: its work tile, or -1 (it writes its output's queue tile)
  bool half_scratch = false, bf16_scratch = false;
  std::vector<const MathScratch*> math;
  uint64_t bits_per_element = 0;
  uint32_t tile = 0;

  ir::DType type_of(ir::ValueId v) const { return g.values[v].dtype; }
  bool is_cast(size_t s) const { return lowered[s]->op->kind == ir::OpKind::cast; }
  std::string in_name(size_t k) const {
    return period[k] ? "c[" + std::to_string(resident_slot[k]) + " * kTile]"
           : converted[k] >= 0 ? "v[" + std::to_string(converted[k]) + " * kTile]"
                               : "x" + std::to_string(k);
  }
  std::string result_name(size_t s) const {
    return work_of[s] < 0 ? "y" + std::to_string(grp.steps[s].output) : "w[" + std::to_string(work_of[s]) + " * kTile]";
  }
};

// The group computes in one type T: f32 if any value of it is f32 or bf16 (which has no vector
// math of its own), else f16 (bool-only groups too). Values of other types are converted where
// they enter and leave, and results of f16 and bf16 members are rounded to their type when T
// is f32, so the group computes what its ops would one by one, as the CPU's fused groups do.
void choose_type(GroupKernel& k) {
  const ir::Graph& g = k.g;
  auto unsupported_type = [&](ir::ValueId v) {
    return Error(ErrorCode::Unsupported, std::string("ascend: generated kernels compute f32, f16, bf16 and bool so far; ") + g.value_name(v) +
                                             " is " + ir::dtype_name(g.values[v].dtype));
  };
  bool any_f32 = false;
  auto note = [&](ir::ValueId v) {
    if (!element_type(g.values[v].dtype)) throw unsupported_type(v);
    any_f32 = any_f32 || g.values[v].dtype == ir::DType::F32 || g.values[v].dtype == ir::DType::BF16;
  };
  for (ir::ValueId v : k.grp.inputs) note(v);
  for (ir::NodeId m : k.grp.members) note(g.nodes[m].first_output);
  k.dtype = any_f32 ? ir::DType::F32 : ir::DType::F16;
  k.t_size = ir::dtype_size(k.dtype);
}

// Each input is streamed tile by tile, or is resident: a broadcast input whose elements repeat
// with a period (1 for a single element, C for a row [C] over [..., C]) fills one tile at the
// start, and tiles, a multiple of every period, all start at a period's start. Streamed inputs
// of another type are converted into a tile of T.
void place_inputs(GroupKernel& k) {
  const ir::Graph& g = k.g;
  const runtime::FusedGroup& grp = k.grp;
  k.period.assign(grp.inputs.size(), 0);
  k.resident_slot.assign(grp.inputs.size(), -1);
  k.converted.assign(grp.inputs.size(), -1);
  for (size_t i = 0; i < grp.inputs.size(); ++i) {
    const ir::Shape& s = g.shape(grp.inputs[i]);
    // As many elements as the group (only leading 1s differ, since it broadcasts): streamed.
    if (s == grp.shape || s.num_elements() == grp.shape.num_elements()) continue;
    // A suffix of the group's dims after leading 1s: elements repeat every s.num_elements().
    if (!kernel_reads_broadcast(s, k.type_of(grp.inputs[i]), grp.shape))
      throw Error(ErrorCode::Unsupported, "ascend: " + g.value_name(grp.inputs[i]) + " " + g.shape_str(s) + " broadcast to " +
                                              g.shape_str(grp.shape) + " (generated kernels broadcast single elements and trailing rows)");
    k.period[i] = static_cast<uint64_t>(std::max<int64_t>(1, s.num_elements()));
    if (k.period[i] > 1 && k.type_of(grp.inputs[i]) != k.dtype)
      throw Error(ErrorCode::Unsupported, "ascend: the broadcast row " + g.value_name(grp.inputs[i]) + " is " +
                                              ir::dtype_name(k.type_of(grp.inputs[i])) + " in a group computing " + ir::dtype_name(k.dtype) +
                                              " (rows are not converted yet)");
    k.resident_slot[i] = k.residents++;
    k.tile_multiple = std::lcm(k.tile_multiple, k.period[i]);
  }
  for (size_t i = 0; i < grp.inputs.size(); ++i)
    if (!k.period[i] && k.type_of(grp.inputs[i]) != k.dtype) k.converted[i] = k.conversions++;
}

// Every member's lowering, and the tiles it needs.
void lower_members(GroupKernel& k) {
  const ir::Graph& g = k.g;
  const runtime::FusedGroup& grp = k.grp;
  k.work_of.assign(grp.steps.size(), -1);
  size_t member = 0;
  for (size_t s = 0; s < grp.steps.size(); ++s) {
    while (grp.members[member] == grp.head) ++member;
    const ir::Node& n = g.nodes[grp.members[member++]];
    const AscendCOp* op = find_ascendc_op(*n.op);
    if (!op || op->unsupported)
      throw Error(ErrorCode::Unsupported, std::string("ascend: ") + n.op->name + ": " + (op ? op->unsupported : "not elementwise"));
    k.lowered.push_back(op);
    k.temps = std::max(k.temps, op->temps);
    k.masks = std::max(k.masks, op->masks);
    // An output in T goes straight to its queue's tile; any other result to a tile of T first.
    const int o = grp.steps[s].output;
    if (o < 0 || k.type_of(grp.outputs[static_cast<size_t>(o)]) != k.dtype) k.work_of[s] = k.work++;
  }
  // A cast to bool gives 1 for any nonzero value: its result is normalized with a mask.
  for (size_t s = 0; s < grp.steps.size(); ++s)
    if (k.is_cast(s) && grp.steps[s].dtype == ir::DType::Bool) k.masks = std::max(k.masks, 1);
  // A tile of half for conversions through it: bool bytes to and from f32 go by way of f16, and
  // f16 results of an f32 group are rounded through it; a tile of bf16 rounds bf16 results.
  const bool f32 = k.dtype == ir::DType::F32;
  for (size_t i = 0; i < grp.inputs.size(); ++i) k.half_scratch = k.half_scratch || (!k.period[i] && f32 && k.type_of(grp.inputs[i]) == ir::DType::Bool);
  for (ir::ValueId v : grp.outputs) k.half_scratch = k.half_scratch || (f32 && k.type_of(v) == ir::DType::Bool);
  for (const runtime::GroupStep& st : grp.steps) {
    k.half_scratch = k.half_scratch || (f32 && st.dtype == ir::DType::F16);
    k.bf16_scratch = k.bf16_scratch || st.dtype == ir::DType::BF16;
  }
}

// Bytes of the Unified Buffer per element of a tile: two of each queue's type (double
// buffering); one of T per internal result, temporary, broadcast input and conversion; the
// half scratch; a bit per mask; what the higher-level math (Tanh, Floor, Power, …) takes as
// its temporary buffer to compute a tile in one pass, by CANN's rule for each function (its
// fixed part is reserved). Select keeps 8 KB of scratch (CANN's documentation of Select on
// Atlas A2), and every mask lowering ends in one.
void size_tile(GroupKernel& k, const std::string& where) {
  const runtime::FusedGroup& grp = k.grp;
  for (const AscendCOp* op : k.lowered)
    for (size_t i = 0; i < op->num_statements; ++i) {
      const std::string statement = op->statements[i];
      if (const MathScratch* rule = math_scratch(statement.substr(0, statement.find('(')), k.t_size)) k.math.push_back(rule);
    }
  uint32_t math_per_element = 0, math_fixed = 0;
  for (const MathScratch* rule : k.math)
    math_per_element = std::max(math_per_element, rule->per_element), math_fixed = std::max(math_fixed, rule->floor + rule->extra);
  k.bits_per_element = 8 * k.t_size * static_cast<uint64_t>(k.work + k.temps + k.residents + k.conversions) + 8 * uint64_t{math_per_element} +
                       (k.half_scratch ? 16 : 0) + (k.bf16_scratch ? 16 : 0) + static_cast<uint64_t>(k.masks);
  for (size_t i = 0; i < grp.inputs.size(); ++i)
    if (!k.period[i]) k.bits_per_element += 2 * 8 * ir::dtype_size(k.type_of(grp.inputs[i]));
  for (ir::ValueId v : grp.outputs) k.bits_per_element += 2 * 8 * ir::dtype_size(k.type_of(v));
  const uint32_t reserve = kReserveBytes + (k.masks ? kSelectScratchBytes : 0) + (k.math.empty() ? 0 : math_fixed + 32);
  // Tiles are whole 32-byte blocks of every type, and with masks whole 32-byte blocks of bits.
  k.tile_multiple = std::lcm<uint64_t>(k.tile_multiple, k.masks ? kMaskTileAlign : 32);
  const uint64_t fit = std::min<uint64_t>((kUnifiedBufferBytes - reserve) * 8 / k.bits_per_element,
                                          std::max<uint64_t>(kMaxTile, k.tile_multiple));
  k.tile = static_cast<uint32_t>(fit / k.tile_multiple * k.tile_multiple);
  if (k.tile == 0)
    throw Error(ErrorCode::Unsupported, "ascend: the " + where + " needs more Unified Buffer than it has (" +
                                            std::to_string(k.bits_per_element / 8) + " bytes per element, tiles of a multiple of " +
                                            std::to_string(k.tile_multiple) + " elements)");
}

// Compute's statements: conversions in, each member's lowering, conversions out.
std::string compute_body(const GroupKernel& k) {
  const runtime::FusedGroup& grp = k.grp;
  const ir::DType dtype = k.dtype;
  auto type_of = [&](ir::ValueId v) { return k.type_of(v); };
  auto in_name = [&](size_t i) { return k.in_name(i); };
  auto result_name = [&](size_t s) { return k.result_name(s); };
  auto is_cast = [&](size_t s) { return k.is_cast(s); };
  const auto& converted = k.converted;
  const auto& work_of = k.work_of;
  const auto& lowered = k.lowered;
  std::ostringstream body;
  // Conversions as they enter: f16 to f32 exactly; bool bytes to f16 (to f32 through it).
  for (size_t i = 0; i < grp.inputs.size(); ++i) {
    if (converted[i] < 0) continue;
    const std::string raw = "x" + std::to_string(i);
    if (type_of(grp.inputs[i]) == ir::DType::Bool && dtype == ir::DType::F32)
      body << "    Cast(h, " << raw << ", RoundMode::CAST_NONE, n);\n    Cast(" << in_name(i) << ", h, RoundMode::CAST_NONE, n);\n";
    else
      body << "    Cast(" << in_name(i) << ", " << raw << ", RoundMode::CAST_NONE, n);\n";
  }
  for (size_t s = 0; s < grp.steps.size(); ++s) {
    const runtime::GroupStep& st = grp.steps[s];
    const AscendCOp* op = lowered[s];
    body << "    // " << op->op->name << "\n";
    for (size_t i = 0; i < op->num_statements; ++i) {
      body << "    "
           << substitute(op->statements[i], [&](char kind, int index) -> std::string {
                switch (kind) {
                  case 'y': return result_name(s);
                  case 'n': return "n";
                  case 'N': return "N";
                  case 'm': return "m[" + std::to_string(index) + " * kMaskBytes]";
                  case 'w': return "mw[" + std::to_string(index) + " * kMaskBytes / 2]";
                  case 't': return "t[" + std::to_string(index) + " * kTile]";
                  case 'p': return float_literal(st.attrs.at(static_cast<size_t>(index)));
                  case 's': return "ms";
                  case 'i': {
                    const runtime::GroupStep::Operand& o = st.operands.at(static_cast<size_t>(index));
                    return o.from == runtime::GroupStep::From::Input ? in_name(o.index) : result_name(o.index);
                  }
                }
                throw Error(ErrorCode::Internal, std::string("ascend: placeholder $") + kind);
              })
           << "\n";
    }
    // The result in its own type: f16 in an f32 group rounds (to nearest even, as the CPU's
    // conversion); a cast to bool is 1 wherever its operand is not 0.
    const std::string y = result_name(s);
    if (st.dtype == ir::DType::F16 && dtype == ir::DType::F32)
      body << "    Cast(h, " << y << ", RoundMode::CAST_RINT, n);\n    Cast(" << y << ", h, RoundMode::CAST_NONE, n);\n";
    if (st.dtype == ir::DType::BF16)
      body << "    Cast(b, " << y << ", RoundMode::CAST_RINT, n);\n    Cast(" << y << ", b, RoundMode::CAST_NONE, n);\n";
    if (st.dtype == ir::DType::Bool && is_cast(s))
      body << "    CompareScalar(m[0], " << y << ", static_cast<T>(0), CMPMODE::NE, N);\n    Duplicate(" << y << ", static_cast<T>(1), N);\n"
           << "    Select(" << y << ", m[0], " << y << ", static_cast<T>(0), SELMODE::VSEL_TENSOR_SCALAR_MODE, N);\n";
  }
  // Conversions as they leave: to f16 rounding to nearest even; to bool bytes through f16.
  for (size_t s = 0; s < grp.steps.size(); ++s) {
    const int o = grp.steps[s].output;
    if (o < 0 || work_of[s] < 0) continue;
    const std::string out = "y" + std::to_string(o);
    if (type_of(grp.outputs[static_cast<size_t>(o)]) == ir::DType::Bool && dtype == ir::DType::F32)
      body << "    Cast(h, " << result_name(s) << ", RoundMode::CAST_RINT, n);\n    Cast(" << out << ", h, RoundMode::CAST_ROUND, n);\n";
    else
      body << "    Cast(" << out << ", " << result_name(s) << ", RoundMode::"
           << (type_of(grp.outputs[static_cast<size_t>(o)]) == ir::DType::Bool ? "CAST_ROUND" : "CAST_RINT") << ", n);\n";
  }

  return body.str();
}

}  // namespace

KernelSource generate_kernel(const ir::Graph& g, const runtime::FusedGroup& grp) {
  const std::string where = "fused group over " + g.shape_str(grp.shape);
  if (grp.head != ir::kNone) throw Error(ErrorCode::Unsupported, "ascend: a " + where + " with a head");
  GroupKernel plan(g, grp);
  choose_type(plan);
  place_inputs(plan);
  lower_members(plan);
  size_tile(plan, where);
  const std::string body = compute_body(plan);
  // The kernel class around it: its parameters, queues and buffers, and the copies in and out.
  const ir::DType dtype = plan.dtype;
  const size_t t_size = plan.t_size;
  const auto& period = plan.period;
  const int residents = plan.residents, masks = plan.masks, work = plan.work, temps = plan.temps, conversions = plan.conversions;
  const auto& math = plan.math;
  const uint32_t tile = plan.tile;
  const uint64_t bits_per_element = plan.bits_per_element;
  const int outputs = static_cast<int>(grp.outputs.size());
  auto type_of = [&](ir::ValueId v) { return plan.type_of(v); };
  auto in_name = [&](size_t k) { return plan.in_name(k); };
  std::ostringstream params, args, init, copy_in, compute_head, compute_tail, copy_out, members, row_loads, row_fills;
  for (size_t k = 0; k < grp.inputs.size(); ++k) {
    const char* e = element_type(type_of(grp.inputs[k]));
    params << "GM_ADDR in" << k << ", ";
    args << "in" << k << ", ";
    if (period[k] == 1) {
      init << "    GlobalTensor<" << e << "> s" << k << ";\n    s" << k << ".SetGlobalBuffer((__gm__ " << e << "*)in" << k << ", 1);\n"
           << "    Duplicate(" << in_name(k) << ", static_cast<T>(s" << k << ".GetValue(0)), static_cast<int32_t>(kTile));\n";
      continue;
    }
    if (period[k] > 1) {  // the row once, then repeated along the tile (after every row's copy)
      row_loads << "    {\n      GlobalTensor<T> r;\n      r.SetGlobalBuffer((__gm__ T*)in" << k << ", " << period[k] << ");\n"
                << "      LocalTensor<T> row = " << in_name(k) << ";\n      Load(row, r, " << period[k] << ");\n    }\n";
      row_fills << "    for (uint32_t i = " << period[k] << "; i < kTile; ++i) " << in_name(k) << ".SetValue(i, " << in_name(k)
                << ".GetValue(i - " << period[k] << "));\n";
      continue;
    }
    members << "  GlobalTensor<" << e << "> gx" << k << "_;\n  TQue<QuePosition::VECIN, 2> qx" << k << "_;\n";
    init << "    gx" << k << "_.SetGlobalBuffer((__gm__ " << e << "*)in" << k << ", total_);\n"
         << "    pipe_.InitBuffer(qx" << k << "_, 2, kTile * sizeof(" << e << "));\n";
    copy_in << "    LocalTensor<" << e << "> x" << k << " = qx" << k << "_.AllocTensor<" << e << ">();\n    Load(x" << k << ", gx" << k
            << "_[at], n);\n    qx" << k << "_.EnQue(x" << k << ");\n";
    compute_head << "    LocalTensor<" << e << "> x" << k << " = qx" << k << "_.DeQue<" << e << ">();\n";
    compute_tail << "    qx" << k << "_.FreeTensor(x" << k << ");\n";
  }
  for (int o = 0; o < outputs; ++o) {
    const char* e = element_type(type_of(grp.outputs[static_cast<size_t>(o)]));
    params << "GM_ADDR out" << o << ", ";
    args << "out" << o << ", ";
    members << "  GlobalTensor<" << e << "> gy" << o << "_;\n  TQue<QuePosition::VECOUT, 2> qy" << o << "_;\n";
    init << "    gy" << o << "_.SetGlobalBuffer((__gm__ " << e << "*)out" << o << ", total_);\n"
         << "    pipe_.InitBuffer(qy" << o << "_, 2, kTile * sizeof(" << e << "));\n";
    compute_head << "    LocalTensor<" << e << "> y" << o << " = qy" << o << "_.AllocTensor<" << e << ">();\n";
    compute_tail << "    qy" << o << "_.EnQue(y" << o << ");\n";
    copy_out << "    LocalTensor<" << e << "> y" << o << " = qy" << o << "_.DeQue<" << e << ">();\n    Store(gy" << o << "_[at], y" << o
             << ", n);\n    qy" << o << "_.FreeTensor(y" << o << ");\n";
  }
  if (work + temps + conversions > 0) {
    members << "  TBuf<TPosition::VECCALC> work_;\n";
    init << "    pipe_.InitBuffer(work_, " << work + temps + conversions << " * kTile * sizeof(T));\n";
    compute_head << "    LocalTensor<T> w = work_.Get<T>();\n";
    if (temps) compute_head << "    LocalTensor<T> t = w[" << work << " * kTile];\n";
    if (conversions) compute_head << "    LocalTensor<T> v = w[" << work + temps << " * kTile];\n";
  }
  if (!math.empty()) {  // for the largest need of a tile, in whole blocks (and never empty)
    uint64_t bytes = 32;
    for (const MathScratch* rule : math) bytes = std::max<uint64_t>(bytes, (rule->bytes(tile) + 31) / 32 * 32);
    members << "  TBuf<TPosition::VECCALC> math_;  // the higher-level math's temporary buffer\n";
    init << "    pipe_.InitBuffer(math_, " << bytes << ");\n";
    compute_head << "    LocalTensor<uint8_t> ms = math_.Get<uint8_t>();\n";
  }
  if (plan.half_scratch) {
    members << "  TBuf<TPosition::VECCALC> half_;\n";
    init << "    pipe_.InitBuffer(half_, kTile * sizeof(half));\n";
    compute_head << "    LocalTensor<half> h = half_.Get<half>();\n";
  }
  if (plan.bf16_scratch) {
    members << "  TBuf<TPosition::VECCALC> bf16_;\n";
    init << "    pipe_.InitBuffer(bf16_, kTile * sizeof(bfloat16_t));\n";
    compute_head << "    LocalTensor<bfloat16_t> b = bf16_.Get<bfloat16_t>();\n";
  }
  if (masks) {
    members << "  TBuf<TPosition::VECCALC> mask_;\n";
    init << "    pipe_.InitBuffer(mask_, " << masks << " * kMaskBytes);\n";
    compute_head << "    LocalTensor<uint8_t> m = mask_.Get<uint8_t>();\n"
                 << "    LocalTensor<uint16_t> mw = m.ReinterpretCast<uint16_t>();\n"
                 << "    // The mask instructions' count: whole 256 bytes of T (the tile has room).\n"
                 << "    const uint32_t N = (n + " << 256 / t_size << " - 1) / " << 256 / t_size << " * " << 256 / t_size << ";\n";
  }
  if (residents) {
    // VECIN: rows are copied into it from global memory (CANN documents such copies into VECIN
    // and VECOUT on Atlas A2), and no queue orders those copies before the vector instructions
    // that read the rows: a flag does.
    members << "  TBuf<TPosition::VECIN> resident_;\n";
    const std::string single = init.str();  // they need the buffer first
    init.str("");
    init << "    pipe_.InitBuffer(resident_, " << residents << " * kTile * sizeof(T));\n    LocalTensor<T> c = resident_.Get<T>();\n" << single;
    // The rows' copies, then the scalar unit's repeats of them, then the vector instructions:
    // no queue orders these pipes, two flags do (the scalar unit's wait orders what it issues
    // after, the vector instructions included).
    if (!row_loads.str().empty())
      init << row_loads.str() << "    " << pipe_flag("MTE2_S") << "\n" << row_fills.str() << "    " << pipe_flag("S_V") << "\n";
    compute_head << "    LocalTensor<T> c = resident_.Get<T>();\n";
  }

  std::ostringstream code;
  code << "// Generated by esgraph from the YAML compute expressions of:";
  for (ir::NodeId m : grp.members) code << " " << g.nodes[m].op->name;
  // No sizes in the source: the tiling argument carries them, so one binary serves every size.
  code << "\n// computing " << ir::dtype_name(dtype) << ", any number of elements (the tiling argument).\n"
       << "#include \"kernel_operator.h\"\nusing namespace AscendC;\n\nnamespace {\n"
       << "using T = " << element_type(dtype) << ";\n"
       << "constexpr uint32_t kTile = " << tile << ";  // elements: " << bits_per_element / 8 << (bits_per_element % 8 ? "+" : "")
       << " bytes of Unified Buffer each\n" << (masks ? "constexpr uint32_t kMaskBytes = kTile / 8;  // a bit per element\n" : "") << "\n"
       << "class Kernel {\n public:\n"
       << "  __aicore__ inline void Init(" << params.str() << "GM_ADDR tiling) {\n"
       << "    GlobalTensor<uint64_t> t;\n    t.SetGlobalBuffer((__gm__ uint64_t*)tiling, 2);\n"
       << "    total_ = t.GetValue(0);\n    const uint64_t per_block = t.GetValue(1);\n"
       << "    begin_ = GetBlockIdx() * per_block;\n    end_ = begin_ + per_block < total_ ? begin_ + per_block : total_;\n"
       << init.str() << "  }\n\n"
       << "  __aicore__ inline void Process() {\n"
       << "    for (uint64_t at = begin_; at < end_; at += kTile) {\n"
       << "      const uint32_t n = static_cast<uint32_t>(end_ - at < kTile ? end_ - at : kTile);\n"
       << "      CopyIn(at, n);\n      Compute(n);\n      CopyOut(at, n);\n    }\n  }\n\n private:\n"
       << "  __aicore__ inline void CopyIn(uint64_t at, uint32_t n) {\n" << copy_in.str() << "  }\n\n"
       << "  __aicore__ inline void Compute(uint32_t n) {\n" << compute_head.str() << body << compute_tail.str() << "  }\n\n"
       << "  __aicore__ inline void CopyOut(uint64_t at, uint32_t n) {\n" << copy_out.str() << "  }\n\n"
       << copy_helpers() << "\n"
       << "  TPipe pipe_;\n" << members.str() << "  uint64_t total_ = 0, begin_ = 0, end_ = 0;\n};\n}  // namespace\n\n";
  return finish_kernel(code.str(), params.str(), args.str(), tile, grp.inputs.size() + grp.outputs.size() + 1);
}


bool kernel_reads_broadcast(const ir::Shape& s, ir::DType dtype, const ir::Shape& group) {
  if (s.num_elements() == group.num_elements() || s.num_elements() == 1) return true;
  if (s.rank() > group.rank() || dtype != ir::DType::F32 || s.num_elements() > kMaxResidentRow) return false;
  const size_t lead = group.rank() - s.rank();
  size_t first = 0;
  while (first < s.rank() && s[first] == 1) ++first;
  for (size_t d = first; d < s.rank(); ++d)
    if (s[d] != group[lead + d]) return false;
  return true;
}



}  // namespace esg::ascend
