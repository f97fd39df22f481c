// The collectives of a plan (op_defs/collective.yaml), bound once per plan: what a backend runs
// for each such launch, the check every rank makes before its first run, and their part of the
// record of facts.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "eval/collective.hpp"
#include "runtime/facts.hpp"

namespace esg::runtime {

class Plan;

class PlanCollectives {
 public:
  explicit PlanCollectives(const Plan& plan);
  bool empty() const { return entries_.empty(); }
  // Whether a run communicates at all: a launch here, or a collective inside a control-flow
  // body (run by the evaluator, not listed here). Such a run takes the process's turn.
  bool communicates() const { return communicates_; }
  // The bound collective of launch `index`, or nullptr.
  const eval::Collective* at(size_t index) const {
    return index < by_launch_.size() && by_launch_[index] >= 0 ? entries_[static_cast<size_t>(by_launch_[index])].call.get() : nullptr;
  }
  // Every rank checks, before its first run, that the ranks of each group run the same
  // collectives in the same order (a hash of each one's op, attributes, dtype and shape), and
  // that each send matches its peer's receive: otherwise ir::Error(Communication) on every rank
  // naming the first difference, not a hang. Once per plan; a failed check is made again.
  void agree() const;
  // Each collective: its bytes, its stream, and the compute it may overlap with.
  void add_facts(const Plan& plan, Facts& f) const;

 private:
  struct Entry {
    size_t launch;
    std::shared_ptr<const eval::Collective> call;
  };
  std::vector<Entry> entries_;  // in launch order
  std::vector<int> by_launch_;
  bool communicates_ = false;
  mutable std::mutex mu_;
  mutable std::atomic<bool> agreed_{false};
};

}  // namespace esg::runtime
