// A model's compiled plans, kept for the runs to come: the bounded, thread-safe cache of
// model.hpp. It holds a plan per set of input shapes (a binding of a symbolic plan, or a plan
// compiled for those shapes alone) and a symbolic plan per size class, drops the least recently
// run beyond max_plans of each (a run under way keeps its plan alive until it ends), counts what
// was compiled and bound, and reports on what it holds. How a plan is made is the model's:
// the cache is told what to keep.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "runtime/backend.hpp"
#include "runtime/facts.hpp"
#include "runtime/plan.hpp"

namespace esg::runtime {

// A plan, and the backend's program for it, which refers to the plan: declared after it, so
// destroyed first.
struct CompiledPlan {
  std::unique_ptr<Plan> plan;
  std::unique_ptr<Program> program;
};

class PlanCache {
 public:
  // At most `max_plans` plans per set of shapes and as many symbolic plans (0: no limit).
  explicit PlanCache(int64_t max_plans) : max_plans_(max_plans) {}

  // The plan kept for these shapes, else nullptr. The shapes of the run before are found
  // without building a key (a small model's run is a microsecond or less, of which a key's
  // allocations were a tenth).
  std::shared_ptr<const CompiledPlan> find(const std::vector<ir::Shape>& input_shapes) const;

  // A size class's symbolic plan (null when refused), with its binding made last (the donor of
  // the next binding, whose kernels it may share).
  struct Symbolic {
    std::shared_ptr<const Plan> plan;
    std::shared_ptr<const CompiledPlan> donor;
    std::vector<int64_t> key;
  };
  // The symbolic plan of the class `key`, made by `compile` the first time (under the cache's
  // lock: once). A plan whose arena exceeds `max_arena_bytes` (0: no cap) is refused, as is one
  // whose compile throws ir::Error Shape or Limit: that class's sizes then get plans of their
  // own. Unsupported refuses symbolic plans for every class (the graph is one no symbolic plan
  // follows). Other errors propagate.
  // Once they were refused for every class, it returns none.
  Symbolic symbolic(const std::vector<int64_t>& key, const std::function<std::shared_ptr<const Plan>()>& compile,
                    int64_t max_arena_bytes) const;

  // Keeps `made`, the plan for these shapes: a binding of `from`'s plan, or (from null) a plan
  // compiled for them alone. Returns the plan kept, which is another run's when one kept a plan
  // for these shapes meanwhile.
  std::shared_ptr<const CompiledPlan> keep(const std::vector<ir::Shape>& input_shapes, std::shared_ptr<const CompiledPlan> made,
                                           const Symbolic* from) const;

  // What a compiled-model file keeps (model_file.hpp): each size class's symbolic plan, and
  // each plan compiled for its shapes alone (bindings are made again from their class's plan).
  struct Saved {
    std::vector<std::pair<std::vector<int64_t>, std::shared_ptr<const Plan>>> symbolic;
    std::vector<std::pair<std::vector<ir::Shape>, std::shared_ptr<const CompiledPlan>>> exact;
  };
  Saved saved() const;
  // Keeps plans read from a file, as saved() gave them; counted as loaded, not compiled.
  void restore(const Saved& plans);

  // Plans compiled and bindings made so far, the facts of the plan run last, and a row for each
  // other plan it holds: each symbolic plan (`open`: the model has open symbols) with the
  // backend's part of its latest binding, and each plan compiled for its shapes alone.
  void add_facts(Facts& f, bool open) const;
  std::string to_dot() const;  // of every plan kept per set of shapes

 private:
  using Key = std::vector<std::vector<int64_t>>;
  struct Kept {
    std::shared_ptr<const CompiledPlan> compiled;
    uint64_t last_run = 0;  // the clock when it was last asked for
  };
  struct Class {
    std::shared_ptr<const Plan> plan;              // null: refused (`refused` says why)
    std::shared_ptr<const CompiledPlan> latest;    // its binding made last, whose kernels the next shares
    uint64_t last_run = 0;
    std::string refused;
  };
  using Plans = std::map<Key, Kept>;

  const int64_t max_plans_;
  mutable std::mutex mu_;
  mutable Plans plans_;
  // The plan run last (end: none yet): a run of the same shapes finds it without building a
  // key. Never dropped: the cache drops the oldest but the one it just kept.
  mutable Plans::iterator latest_ = plans_.end();
  mutable std::map<std::vector<int64_t>, Class> classes_;
  mutable std::string no_symbolic_;  // why symbolic plans were refused for every class, once they were
  mutable uint64_t clock_ = 0;       // counts lookups, for least-recently-run eviction
  mutable int64_t compiled_ = 0;     // plans compiled so far (symbolic or per shapes), dropped ones included
  mutable int64_t bindings_ = 0;     // symbolic plans bound to new sizes so far
  int64_t loaded_ = 0;               // plans read from a compiled-model file
};

}  // namespace esg::runtime
