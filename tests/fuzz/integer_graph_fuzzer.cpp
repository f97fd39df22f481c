// libFuzzer target: integer arithmetic at the edges of its types, under UBSan (the fuzz preset
// traps on any undefined behaviour). The bytes choose an integer dtype, one or two tensors of
// at most 4 elements holding that type's extremes (its minimum and maximum, -1, 0, 1, 2, its
// width and one past it, any value of it), each given either as a graph input, so that the
// kernels meet the values at run time, or as a constant, so that constant folding meets them at
// compile; then ops of integer arithmetic (elementwise, reductions, ranges, products, casts)
// drawn from the registry. Whatever the values, the graph computes them by docs/reliability.md's
// integer rules or refuses with an esgraph error: a division trap, a shift past the width, an
// out-of-range float-to-integer conversion or a signed overflow outside the evaluator is a
// finding. (The evaluator and the generated elementwise code are built with -fwrapv, so a signed
// overflow there is defined and wraps; UBSan does not see it, and the values are checked by tests.)
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string_view>
#include <vector>

#include "fuzz_program.hpp"
#include "ir/dtype.hpp"

namespace {

using namespace esg;

constexpr ir::DType kIntegers[] = {ir::DType::I8, ir::DType::I16, ir::DType::I32, ir::DType::I64,
                                   ir::DType::U8, ir::DType::U16, ir::DType::U32, ir::DType::U64};

// A value of `t` at or near its edges, as the low bytes of an int64 (two's complement).
int64_t edge_value(FuzzedDataProvider& p, ir::DType t) {
  const int bits = static_cast<int>(ir::dtype_size(t)) * 8;
  const bool is_unsigned = ir::dtype_is_unsigned(t);
  const int64_t max = bits == 64 ? (is_unsigned ? -1 : std::numeric_limits<int64_t>::max())
                                 : (is_unsigned ? (int64_t{1} << bits) - 1 : (int64_t{1} << (bits - 1)) - 1);
  const int64_t min = is_unsigned ? 0 : bits == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (bits - 1));
  const int64_t edges[] = {min, max, -1, 0, 1, 2, bits, bits + 1, min + 1, max - 1};
  return p.ConsumeBool() ? edges[p.ConsumeIntegralInRange<size_t>(0, std::size(edges) - 1)] : p.ConsumeIntegral<int64_t>();
}

// The element bytes of `count` values of `t`.
std::vector<uint8_t> edge_bytes(FuzzedDataProvider& p, ir::DType t, int64_t count) {
  const size_t width = ir::dtype_size(t);
  std::vector<uint8_t> bytes(static_cast<size_t>(count) * width);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t v = edge_value(p, t);
    std::memcpy(bytes.data() + static_cast<size_t>(i) * width, &v, width);  // the low bytes (little-endian)
  }
  return bytes;
}

// The ops that compute on integers: elementwise ones, reductions, arg-reductions, ranges, cumsum,
// products, casts, top-k and fill. Ops that only move values are left to builder_fuzzer.
std::vector<const ir::OpSchema*> arithmetic_ops() {
  std::vector<const ir::OpSchema*> ops;
  for (const ir::OpSchema* op : ir::all_ops()) {
    const std::string_view name = op->name;
    if (op->elementwise || name.rfind("reduce_", 0) == 0 || name.rfind("arg", 0) == 0 || name.find("range") != std::string_view::npos ||
        name == "cumsum" || name == "matmul" || name == "cast" || name == "top_k" || name == "fill")
      ops.push_back(op);
  }
  return ops;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<const ir::OpSchema*> ops = arithmetic_ops();
  FuzzedDataProvider p(data, size);
  const ir::DType t = kIntegers[p.ConsumeIntegralInRange<size_t>(0, std::size(kIntegers) - 1)];
  ir::Builder b("integers");
  std::vector<ir::ValueId> values;
  std::vector<std::vector<uint8_t>> input_bytes;  // what each graph input holds at the run
  const int tensors = p.ConsumeIntegralInRange(1, 2);
  for (int i = 0; i < tensors; ++i) {
    ir::Shape shape;
    const size_t rank = p.ConsumeIntegralInRange<size_t>(0, 2);
    for (size_t d = 0; d < rank; ++d) shape.push_back(p.ConsumeIntegralInRange<int64_t>(1, 4 / static_cast<int64_t>(rank)));
    std::vector<uint8_t> bytes = edge_bytes(p, t, shape.num_elements());
    if (p.ConsumeBool()) {
      values.push_back(b.add_input("x" + std::to_string(i), t, shape));
      input_bytes.push_back(std::move(bytes));
    } else {
      values.push_back(b.add_constant(t, shape, bytes.data(), bytes.size()));
    }
  }
  fuzz::add_some_ops(p, b, values, ops, 6);
  fuzz::finish_and_exercise(p, b, values, [&](size_t index, eval::HostTensor& input) {
    if (index < input_bytes.size() && input_bytes[index].size() == input.bytes.size())
      std::copy(input_bytes[index].begin(), input_bytes[index].end(), input.bytes.begin());
  });
  return 0;
}
