// libFuzzer target: a structured fuzzer of the builder. The bytes are a program: a few inputs of
// chosen dtypes and shapes, then ops drawn from the registry with operands drawn from the values
// made so far and attributes of the schema's kinds with chosen values (in range, at the edges and
// far beyond). Each add_op either adds a node or refuses with an ir::Error and changes nothing;
// the graph that results is exercised like any (fuzz_run.hpp).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz_program.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace esg;
  FuzzedDataProvider p(data, size);
  ir::Builder b("fuzz");
  std::vector<ir::ValueId> values;
  const int inputs = p.ConsumeIntegralInRange(1, 3);
  for (int i = 0; i < inputs; ++i) {
    ir::Shape shape;
    const size_t rank = p.ConsumeIntegralInRange<size_t>(0, 4);
    for (size_t d = 0; d < rank; ++d) shape.push_back(p.ConsumeIntegralInRange<int64_t>(0, 5));
    fuzz::refused_or_done("input", [&] { values.push_back(b.add_input("x" + std::to_string(i), fuzz::some_dtype(p), shape)); });
  }
  if (values.empty()) return 0;
  fuzz::add_some_ops(p, b, values, ir::all_ops(), 8);
  fuzz::finish_and_exercise(p, b, values);
  return 0;
}
