// What a compile is asked for (CompileOptions) and the check that refuses options no model can
// honour, before anything is planned. The symbols' sizes and ranges are checked against the
// graph where they are resolved (input_symbols.hpp).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.hpp"
#include "runtime/backend.hpp"

namespace esg::runtime {

constexpr int64_t kDefaultMaxLoopIterations = 10'000'000;
constexpr int64_t kDefaultMaxNodes = int64_t{1} << 22;  // 4,194,304
constexpr int64_t kDefaultMaxPlans = 16;
constexpr int64_t kDefaultCacheMaxBytes = int64_t{2} << 30;  // 2 GiB

// The precision of convolutions' and constant-weight matmuls' multiplications: f32, or operands
// rounded to bfloat16 with the products summed in f32.
enum class Precision : uint8_t { F32, BF16 };

struct CompileOptions {
  int streams = 1;             // 1..16; each on its own thread of the pool when free (threads >= streams)
  int threads = 0;             // 0: the machine's cores; at most 256; large elementwise kernels split over them
  bool fusion = true;          // fuse connected elementwise ops into one kernel
  bool memory_reuse = true;
  bool verify_each_pass = false;
  std::vector<std::pair<std::string, int64_t>> symbols;  // sizes of symbolic dimensions
  struct Range {
    std::string symbol;
    int64_t min, max;
  };
  std::vector<Range> ranges;  // symbolic dimensions' allowed sizes, checked at every run
  // A range's memory planned for its largest size (false), or grown on demand (true): a ranged
  // symbol's sizes then fall in power-of-two classes up to the range's end, as an unranged one's,
  // each class planned for its own largest size.
  bool grow_memory = false;
  const Backend* backend = nullptr;  // where the model runs (backends/registry.hpp names them)
  BackendOptions backend_options;    // the backend's own, checked against what it declares
  // Limits against hostile models (docs/reliability.md); 0: none.
  int64_t max_loop_iterations = kDefaultMaxLoopIterations;  // of all loops of a run together
  int64_t max_nodes = kDefaultMaxNodes;                      // of the graph, bodies included
  Precision precision = Precision::F32;  // a backend refuses one it cannot honour
  // Bindings (or plans per set of input shapes) kept, and as many symbolic plans, least recently
  // run dropped; 0: no limit.
  int64_t max_plans = kDefaultMaxPlans;
  // The most bytes a plan's working memory and outputs, or a tensor sized by data, may take: a
  // model whose sizes need more is not compiled, a run whose sizes do fails (ir::Error Limit).
  // 0 (default): no cap.
  int64_t max_memory_bytes = 0;
  // The compile cache (compile_cache.hpp): its directory ("": ESG_CACHE_DIR, else none) and the
  // most bytes its entries take, the least recently used dropped beyond it (0: no bound).
  std::string cache_dir;
  int64_t cache_max_bytes = kDefaultCacheMaxBytes;

  // The model's threads: `threads`, or the machine's cores when 0.
  int pool_threads() const;
};

// Refuses (ir::Error, naming the option) streams, threads or limits out of range, a missing
// backend, a graph over max_nodes, backend options the backend does not declare or takes
// another range of, and what the backend itself cannot honour (Backend::check).
void check_compile_options(const CompileOptions& options, const ir::Graph& graph);

}  // namespace esg::runtime
