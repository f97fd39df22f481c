// Memory planning: every intermediate value gets an offset in one arena (graph inputs and
// outputs stay in the caller's buffers). Values whose lifetimes overlap never share bytes;
// the others are packed greedily by size into the smallest gap that fits (the approach of
// TFLite's arena planner), and an op's output may take over, in place, the buffer of one of
// its reusable inputs (Dag::Op::reusable) that dies at that op. A view's output (Dag::Op::alias)
// is its input's bytes for as long as either lives: that op need not run.
#pragma once
#include <string>
#include <vector>

#include "schedule/dag.hpp"

namespace esg::schedule {

// Offsets and sizes in every arena, host or device: a cache line, and the 32-byte alignment
// AscendCL's memory needs, twice over.
constexpr int64_t kArenaAlignment = 64;

struct MemoryPlanOptions {
  int64_t alignment = kArenaAlignment;  // every offset and size is a multiple
  // Bytes kept free after every value: CANN's rule for carving one allocation into buffers (32)
  // leaves room for a device copy that moves whole 32-byte blocks past a buffer's end.
  int64_t slack = 0;
  bool reuse = true;       // false: every value its own bytes (the "no reuse" baseline)
  bool in_place = true;
  // The stream of each op when the ops run on several streams (empty: one stream). Each stream's
  // values get their own part of the arena; a value used on two streams is never reused.
  std::vector<int> op_stream;
};

struct MemoryPlan {
  std::vector<int64_t> offset;  // per value; -1 for graph inputs and outputs
  std::vector<int> in_place_of;  // the input a value took over in place, or -1
  // The input a view's output is (the same bytes; the view need not run), or -1. Its offset is
  // its input's, or -1 when the input is a graph input, output or constant (the caller's or the
  // graph's bytes).
  std::vector<int> alias_of;
  int64_t arena_bytes = 0;       // the planned peak
  int64_t lower_bound = 0;       // the largest sum of (aligned) values alive at once
  int64_t no_reuse_bytes = 0;    // what the arena would take without reuse
};

MemoryPlan plan_memory(const Dag& d, const std::vector<int>& order, const MemoryPlanOptions& options = {});

// An independent check of a plan against the DAG and order: "" when no two values alive at the
// same step share a byte (except a legitimate in-place pair, or a view and what it views), nor
// the `slack` bytes after one, offsets are aligned and within the arena, and, given each op's
// stream, values that share bytes are used on one stream only; otherwise the first problem found.
std::string check_plan(const Dag& d, const std::vector<int>& order, const MemoryPlan& plan, int64_t alignment = 64,
                       const std::vector<int>& op_stream = {}, int64_t slack = 0);

}  // namespace esg::schedule
