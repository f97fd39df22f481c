// The numbers a compile report prints, as data: what tools and tests assert on (the report's
// text is for people and may change).
#pragma once
#include <cstdint>

namespace esg::runtime {

struct Stats {
  int64_t plans = 0;     // compiled so far: one per size class of a symbolic plan, else per set of input shapes
  int64_t bindings = 0;  // symbolic plans bound to a new set of sizes (no compile: shapes inferred, kernels bound)
  int64_t plans_loaded = 0;  // read from a compiled-model file (no compile)
  // The compile cache (compile_cache.hpp): the compile found its model there, compiled and
  // stored it, and replaced a damaged entry.
  int64_t cache_hits = 0, cache_misses = 0, cache_replaced = 0;
  // Launch lists one run goes through: 1, or one per stage when ops whose output sizes the data
  // decides cut the graph (ir/cut.hpp); the numbers below then add up every stage's.
  int64_t stages = 1;
  int64_t sized_ops = 0;  // such ops, run on the host between stages
  // The rest describe the plan run latest.
  // The launch list, as the pipeline built it.
  int64_t launches = 0;           // kernels one run launches
  int64_t fused_groups = 0;       // launches that run a group of ops as one kernel
  int64_t fused_ops = 0;          // ops inside those groups
  int64_t epilogue_groups = 0;    // groups headed by a matmul or convolution
  int64_t f32_rows = 0;           // f32 row passes of the groups (scalar stages fold into rows)
  int64_t fast_kernels = 0;       // single-op launches on a backend kernel
  int64_t reference_kernels = 0;  // single-op launches on the reference evaluator
  // Memory and concurrency.
  int64_t arena_bytes = 0;        // the planned peak
  int64_t lower_bound_bytes = 0;  // the largest live set of the chosen order
  int64_t no_reuse_bytes = 0;     // every value its own bytes
  int64_t in_place_values = 0;    // values that reuse a dying input's buffer
  int64_t streams = 0;  // the collectives' stream included
  int64_t events = 0;
  int64_t collectives = 0;       // collectives, sends and receives (op_defs/collective.yaml)
  int64_t collective_bytes = 0;  // what this rank gives them, each tensor once
  // A device backend's program (zero on the CPU but library_calls).
  int64_t device_kernels = 0;          // distinct generated kernel binaries
  // Of those, found built in the kernel cache, and taken from a compiled-model file; the rest
  // were built by the kernel compiler for this model.
  int64_t device_kernels_cached = 0, device_kernels_loaded = 0;
  int64_t device_kernel_launches = 0;  // launches of them
  int64_t library_calls = 0;           // ops run by the vendor's operator library (aclnn; oneDNN primitives on the CPU)
  // Constant weights packed into those primitives' layouts while lowering, and taken packed from
  // a compiled-model file instead (runtime::Artifacts).
  int64_t weights_packed = 0, weights_loaded = 0;
  int64_t device_copies = 0;
  int64_t host_launches = 0;           // ops run on the host between copies (host_fallback)
  int64_t device_bytes = 0;            // the one device allocation
  int64_t device_events = 0;           // events made on the device (they may be shared)
  int64_t captured = 0;                // 1: a run replays one captured device model
  int64_t reorders = 0;  // launches that copy a value into another memory format
};

}  // namespace esg::runtime
