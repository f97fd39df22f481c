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
  int64_t max_loop_iterations = 0;  // per loop node and run; 0: no cap
  // The model's cancel counter and its value when this run began: a cancel moves the counter,
  // which stops the runs under way then and none that start after.
  const std::atomic<uint64_t>* cancels = nullptr;
  uint64_t started_at = 0;

  void check() const {
    if (cancels && cancels->load(std::memory_order_relaxed) != started_at)
      throw ir::Error(ir::ErrorCode::Cancelled, "run: cancelled (Model::cancel) before it finished");
  }
  // Before a loop's body runs for the `iteration`th time (from 0).
  void check_iteration(const char* op, int64_t iteration) const {
    check();
    if (max_loop_iterations > 0 && iteration >= max_loop_iterations)
      throw ir::Error(ir::ErrorCode::Limit, std::string("run: `") + op + "` reached max_loop_iterations (" +
                                                std::to_string(max_loop_iterations) + ") without its condition turning false");
  }
};

}  // namespace esg::eval
