// What the structured fuzzers share: values at and beyond the edges, and a program of ops drawn
// from the registry (operands drawn from the values made so far, attributes of the schema's kinds
// with chosen values). Each add_op either adds a node or refuses with an ir::Error and changes
// nothing.
#pragma once
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "fuzz_run.hpp"
#include "ir/builder.hpp"
#include "ir/op_schema.hpp"

namespace esg::fuzz {

inline int64_t some_int(FuzzedDataProvider& p) {
  static constexpr int64_t kEdges[] = {0, 1, 2, 3, -1, -2, 4, 7, 64, int64_t{1} << 31, int64_t{1} << 40,
                                       std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
  return p.ConsumeBool() ? p.PickValueInArray(kEdges) : p.ConsumeIntegralInRange<int64_t>(-8, 8);
}

inline double some_float(FuzzedDataProvider& p) {
  static constexpr double kEdges[] = {0.0, 1.0, -1.0, 0.5, 1e-30, 1e30, 5e307, std::numeric_limits<double>::infinity(),
                                      -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()};
  return p.ConsumeBool() ? p.PickValueInArray(kEdges) : p.ConsumeFloatingPointInRange<double>(-4.0, 4.0);
}

inline ir::DType some_dtype(FuzzedDataProvider& p) { return static_cast<ir::DType>(p.ConsumeIntegralInRange<int>(0, 13)); }

// Up to `most` ops drawn from `ops` (none with bodies or constants), each output added to `values`.
inline void add_some_ops(FuzzedDataProvider& p, ir::Builder& b, std::vector<ir::ValueId>& values, ir::Span<const ir::OpSchema*> ops,
                         int most) {
  // Storage the attribute arguments point into, kept until the node is added.
  std::vector<std::vector<int64_t>> int_lists;
  std::vector<std::vector<double>> float_lists;
  const int steps = p.ConsumeIntegralInRange(1, most);
  for (int step = 0; step < steps && p.remaining_bytes() > 0; ++step) {
    const ir::OpSchema& op = *ops[p.ConsumeIntegralInRange<size_t>(0, ops.size() - 1)];
    if (!op.subgraphs.empty() || op.kind == ir::OpKind::constant) continue;  // bodies take their own program
    std::vector<ir::ValueId> in;
    for (const ir::InputSchema& s : op.inputs) {
      const int count = s.variadic ? p.ConsumeIntegralInRange(0, 3) : s.optional && p.ConsumeBool() ? 0 : 1;
      for (int k = 0; k < count; ++k) in.push_back(values[p.ConsumeIntegralInRange<size_t>(0, values.size() - 1)]);
      if (!s.variadic && count == 0) in.push_back(ir::kNone);
    }
    int_lists.clear();
    float_lists.clear();
    std::vector<ir::AttrArg> attrs(op.attrs.size());
    for (size_t a = 0; a < op.attrs.size(); ++a) {
      if (!op.attrs[a].required && p.ConsumeBool()) continue;  // the default
      switch (op.attrs[a].kind) {
        case ir::AttrKind::Int: attrs[a] = ir::AttrArg::of_int(some_int(p)); break;
        case ir::AttrKind::Float: attrs[a] = ir::AttrArg::of_float(some_float(p)); break;
        case ir::AttrKind::Bool: attrs[a] = ir::AttrArg::of_bool(p.ConsumeBool()); break;
        case ir::AttrKind::DType: attrs[a] = ir::AttrArg::of_dtype(some_dtype(p)); break;
        case ir::AttrKind::Enum: attrs[a] = ir::AttrArg::of_enum(p.ConsumeIntegralInRange<int64_t>(-1, 4)); break;
        case ir::AttrKind::String: attrs[a] = ir::AttrArg::of_string(p.ConsumeBool() ? "" : "s"); break;
        case ir::AttrKind::IntList: {
          int_lists.emplace_back(p.ConsumeIntegralInRange<size_t>(0, 6));
          for (int64_t& v : int_lists.back()) v = some_int(p);
          attrs[a] = ir::AttrArg::of_ints(int_lists.back().data(), int_lists.back().size());
          break;
        }
        case ir::AttrKind::FloatList: {
          float_lists.emplace_back(p.ConsumeIntegralInRange<size_t>(0, 6));
          for (double& v : float_lists.back()) v = some_float(p);
          attrs[a] = ir::AttrArg::of_floats(float_lists.back().data(), float_lists.back().size());
          break;
        }
      }
    }
    refused_or_done("add_op", [&] {
      const ir::Node& n = b.graph().nodes[b.add_op(op, {in.data(), in.size()}, {attrs.data(), attrs.size()})];
      for (uint32_t k = 0; k < n.num_outputs; ++k) values.push_back(n.first_output + k);
    });
  }
}

// The last value made, and maybe one more, as the outputs of a graph exercised like any
// (fuzz_run.hpp), its inputs filled by `fill` (null: zeros).
inline void finish_and_exercise(FuzzedDataProvider& p, ir::Builder& b, const std::vector<ir::ValueId>& values,
                                const InputFill& fill = nullptr) {
  std::vector<ir::ValueId> outputs = {values.back()};
  if (p.ConsumeBool()) outputs.push_back(values[p.ConsumeIntegralInRange<size_t>(0, values.size() - 1)]);
  std::unique_ptr<ir::Graph> g;
  if (refused_or_done("finish", [&] { g = b.finish({outputs.data(), outputs.size()}); })) exercise(*g, fill);
}

}  // namespace esg::fuzz
