// What may stop a run before its end: a loop past the model's iteration cap, or a cancel from
// another thread. Programs check it between launches and loops on every iteration, so a stop
// takes effect within one kernel's time.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>

#include "ir/error.hpp"

namespace esg::eval {

struct RunControl {
  int64_t max_loop_iterations = 0;  // of all loops of a run together; 0: no cap
  // Iterations so far in this run: loops nested in loops count every inner iteration, so no
  // nesting multiplies the cap. Atomic: streams may run loops at once.
  mutable std::atomic<int64_t> iterations{0};
  // The model's cancel counter and its value when this run began: a cancel moves the counter,
  // which stops the runs under way then and none that start after.
  const std::atomic<uint64_t>* cancels = nullptr;
  uint64_t started_at = 0;
  // The most bytes a tensor whose size the run reads from data may take; 0: no cap.
  int64_t max_memory_bytes = 0;

  void check() const {
    if (cancels && cancels->load(std::memory_order_relaxed) != started_at)
      throw ir::Error(ir::ErrorCode::Cancelled, "run: cancelled (Model::cancel) before it finished");
  }
  // Before `op` allocates `bytes` at a size read from data.
  void check_bytes(const char* op, int64_t bytes) const {
    if (max_memory_bytes > 0 && bytes > max_memory_bytes)
      throw ir::Error(ir::ErrorCode::Limit, std::string("run: `") + op + "` would allocate " + std::to_string(bytes) +
                                                " bytes for the sizes its data gives, more than max_memory_bytes (" +
                                                std::to_string(max_memory_bytes) + ")");
  }
  // Before a loop body runs once more.
  void check_iteration(const char* op) const {
    check();
    if (max_loop_iterations > 0 && iterations.fetch_add(1, std::memory_order_relaxed) >= max_loop_iterations)
      throw ir::Error(ir::ErrorCode::Limit, std::string("run: `") + op + "` would take the run's loops past max_loop_iterations (" +
                                                std::to_string(max_loop_iterations) + " iterations in all)");
  }
};

}  // namespace esg::eval
