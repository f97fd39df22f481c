// libFuzzer target: a structured fuzzer of the builder. The bytes are a program: a few inputs of
// chosen dtypes and shapes, then ops drawn from the registry with operands drawn from the values
// made so far and attributes of the schema's kinds with chosen values (in range, at the edges and
// far beyond). Each add_op either adds a node or refuses with an ir::Error and changes nothing;
// the graph that results is exercised like any (fuzz_run.hpp).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "fuzz_run.hpp"
#include "ir/builder.hpp"
#include "ir/dtype.hpp"
#include "ir/op_schema.hpp"

namespace {

using namespace esg;

int64_t some_int(FuzzedDataProvider& p) {
  static constexpr int64_t kEdges[] = {0, 1, 2, 3, -1, -2, 4, 7, 64, int64_t{1} << 31, int64_t{1} << 40,
                                       std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
  return p.ConsumeBool() ? p.PickValueInArray(kEdges) : p.ConsumeIntegralInRange<int64_t>(-8, 8);
}

double some_float(FuzzedDataProvider& p) {
  static constexpr double kEdges[] = {0.0, 1.0, -1.0, 0.5, 1e-30, 1e30, 5e307, std::numeric_limits<double>::infinity(),
                                      -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()};
  return p.ConsumeBool() ? p.PickValueInArray(kEdges) : p.ConsumeFloatingPointInRange<double>(-4.0, 4.0);
}

ir::DType some_dtype(FuzzedDataProvider& p) { return static_cast<ir::DType>(p.ConsumeIntegralInRange<int>(0, 13)); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider p(data, size);
  ir::Builder b("fuzz");
  std::vector<ir::ValueId> values;
  const int inputs = p.ConsumeIntegralInRange(1, 3);
  for (int i = 0; i < inputs; ++i) {
    ir::Shape shape;
    const size_t rank = p.ConsumeIntegralInRange<size_t>(0, 4);
    for (size_t d = 0; d < rank; ++d) shape.push_back(p.ConsumeIntegralInRange<int64_t>(0, 5));
    esg::fuzz::refused_or_done("input", [&] { values.push_back(b.add_input("x" + std::to_string(i), some_dtype(p), shape)); });
  }
  if (values.empty()) return 0;
  const auto ops = ir::all_ops();
  // Storage the attribute arguments point into, kept until the node is added.
  std::vector<std::vector<int64_t>> int_lists;
  std::vector<std::vector<double>> float_lists;
  const int steps = p.ConsumeIntegralInRange(1, 8);
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
    esg::fuzz::refused_or_done("add_op", [&] {
      const ir::Node& n = b.graph().nodes[b.add_op(op, {in.data(), in.size()}, {attrs.data(), attrs.size()})];
      for (uint32_t k = 0; k < n.num_outputs; ++k) values.push_back(n.first_output + k);
    });
  }
  std::vector<ir::ValueId> outputs = {values.back()};
  if (p.ConsumeBool()) outputs.push_back(values[p.ConsumeIntegralInRange<size_t>(0, values.size() - 1)]);
  std::unique_ptr<ir::Graph> g;
  if (esg::fuzz::refused_or_done("finish", [&] { g = b.finish({outputs.data(), outputs.size()}); })) esg::fuzz::exercise(*g);
  return 0;
}
