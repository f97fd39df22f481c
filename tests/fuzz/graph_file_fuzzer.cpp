// libFuzzer target: the graph-file loader on any bytes. A file that loads is then exercised
// like a built graph (fuzz_run.hpp): its own file must load back the same, and it compiles and
// runs when small.
#include <cstddef>
#include <cstdint>

#include "fuzz_run.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<esg::ir::Graph> g;
  if (esg::fuzz::refused_or_done("load", [&] { g = esg::ir::deserialize(data, size); })) esg::fuzz::exercise(*g);
  return 0;
}
