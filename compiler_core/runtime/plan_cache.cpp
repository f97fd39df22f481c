#include "runtime/plan_cache.hpp"

#include <algorithm>

#include "ir/error.hpp"

namespace esg::runtime {
namespace {

using ir::Error;
using ir::ErrorCode;

// Drops the least recently run entry of `cache` but `keep` while it holds more than `limit` (0:
// no limit).
template <class Map>
void drop_oldest(Map& cache, typename Map::iterator keep, int64_t limit) {
  if (limit <= 0 || static_cast<int64_t>(cache.size()) <= limit) return;
  auto oldest = cache.end();
  for (auto it = cache.begin(); it != cache.end(); ++it)
    if (it != keep && (oldest == cache.end() || it->second.last_run < oldest->second.last_run)) oldest = it;
  cache.erase(oldest);
}

bool same_key(const std::vector<std::vector<int64_t>>& key, const std::vector<ir::Shape>& shapes) {
  if (key.size() != shapes.size()) return false;
  for (size_t i = 0; i < key.size(); ++i)
    if (!std::equal(key[i].begin(), key[i].end(), shapes[i].begin(), shapes[i].end())) return false;
  return true;
}

std::vector<std::vector<int64_t>> key_of(const std::vector<ir::Shape>& shapes) {
  std::vector<std::vector<int64_t>> key;
  key.reserve(shapes.size());
  for (const ir::Shape& s : shapes) key.emplace_back(s.begin(), s.end());
  return key;
}

}  // namespace

std::shared_ptr<const CompiledPlan> PlanCache::find(const std::vector<ir::Shape>& shapes) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (latest_ != plans_.end() && same_key(latest_->first, shapes)) {
      latest_->second.last_run = ++clock_;
      return latest_->second.compiled;
    }
  }
  const Key key = key_of(shapes);
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = plans_.find(key);
  if (it == plans_.end()) return nullptr;
  it->second.last_run = ++clock_;
  latest_ = it;
  return it->second.compiled;
}

PlanCache::Symbolic PlanCache::symbolic(const std::vector<int64_t>& key, const std::function<std::shared_ptr<const Plan>()>& compile,
                                        int64_t max_arena_bytes) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!no_symbolic_.empty()) return {};
  auto it = classes_.find(key);
  if (it == classes_.end()) {
    Class made;
    try {
      made.plan = compile();
      ++compiled_;
      // Memory planned for the class's largest sizes beyond the cap: each size gets a plan of
      // its own, checked at its own sizes, rather than every size of the class refused.
      if (max_arena_bytes > 0 && made.plan->arena_bytes() > max_arena_bytes)
        throw Error(ErrorCode::Limit, "the class's largest sizes need more working memory than max_memory_bytes");
    } catch (const Error& e) {
      // A plan per set of shapes instead, whose compile reports any error that is the graph's
      // or the sizes' own: for every class when the graph is one no symbolic plan follows, for
      // this class when its largest sizes are ones the graph cannot take (a reshape to [4, 3]
      // of an [n, m] planned at n = m = 4) or beyond the limits. Anything else is a fault.
      if (e.code() != ErrorCode::Unsupported && e.code() != ErrorCode::Shape && e.code() != ErrorCode::Limit) throw;
      if (e.code() == ErrorCode::Unsupported) no_symbolic_ = e.what();
      made.plan = nullptr;
      made.refused = e.what();
    }
    it = classes_.emplace(key, std::move(made)).first;
    drop_oldest(classes_, it, max_plans_);
  }
  it->second.last_run = ++clock_;
  return {it->second.plan, it->second.latest, key};
}

std::shared_ptr<const CompiledPlan> PlanCache::keep(const std::vector<ir::Shape>& shapes, std::shared_ptr<const CompiledPlan> made,
                                                    const Symbolic* from) const {
  Key key = key_of(shapes);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = plans_.find(key); it != plans_.end()) {  // another run kept one meanwhile: one is kept
    it->second.last_run = ++clock_;
    latest_ = it;
    return it->second.compiled;
  }
  if (from) {
    ++bindings_;
    if (auto c = classes_.find(from->key); c != classes_.end() && c->second.plan == from->plan) c->second.latest = made;
  } else {
    ++compiled_;
  }
  latest_ = plans_.insert_or_assign(std::move(key), Kept{made, ++clock_}).first;
  drop_oldest(plans_, latest_, max_plans_);
  return made;
}

PlanCache::Saved PlanCache::saved() const {
  std::lock_guard<std::mutex> lock(mu_);
  Saved out;
  for (const auto& [key, c] : classes_)
    if (c.plan) out.symbolic.push_back({key, c.plan});
  for (const auto& [key, kept] : plans_) {
    if (kept.compiled->plan->bound()) continue;
    std::vector<ir::Shape> shapes;
    for (const std::vector<int64_t>& dims : key) shapes.push_back(ir::Shape::from(dims.data(), dims.size()));
    out.exact.push_back({std::move(shapes), kept.compiled});
  }
  return out;
}

void PlanCache::restore(const Saved& plans) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, plan] : plans.symbolic) classes_[key] = Class{plan, nullptr, ++clock_, ""};
  for (const auto& [shapes, compiled] : plans.exact) latest_ = plans_.insert_or_assign(key_of(shapes), Kept{compiled, ++clock_}).first;
  loaded_ += static_cast<int64_t>(plans.symbolic.size() + plans.exact.size());
}

void PlanCache::add_facts(Facts& f, bool open) const {
  std::lock_guard<std::mutex> lock(mu_);
  f.count("plans", compiled_);  // symbolic or per set of shapes, dropped ones included
  f.count("bindings", bindings_);  // symbolic plans bound to new sizes: shapes inferred, kernels bound, no compile
  f.count("plans_loaded", loaded_);  // read from a compiled-model file
  f.count("plans_kept", static_cast<int64_t>(plans_.size()));
  f.level("max_plans", max_plans_);  // 0: no limit
  if (open) {
    f.count("symbolic_plans_kept", static_cast<int64_t>(classes_.size()));
    // Why the graph has a plan per set of input shapes instead.
    if (!no_symbolic_.empty()) f.text("no_symbolic_plan", no_symbolic_);
  }
  if (plans_.empty() && classes_.empty()) f.text("plan", "none yet: the graph has symbolic sizes; the first run compiles one for its shapes");
  // The plan run last: its figures are the model's.
  const CompiledPlan* latest = latest_ != plans_.end() ? latest_->second.compiled.get() : nullptr;
  if (latest) latest->plan->add_facts(f), latest->program->add_facts(f);
  // The others: each symbolic plan with the backend's part of its latest binding, and each
  // plan compiled for its shapes alone.
  if (open)
    for (const auto& [key, c] : classes_) {
      Facts& row = f.row("size_classes");
      std::string name;
      for (int64_t k : key) name += (name.empty() ? "" : ",") + std::to_string(k);
      row.text("size_class", name);
      if (!c.plan) row.text("planned_per_shapes", c.refused);  // why no symbolic plan
      if (c.plan) c.plan->add_facts(row);
      if (c.plan && c.latest) c.latest->program->add_facts(row);
    }
  for (const auto& [key, kept] : plans_)
    if (!kept.compiled->plan->bound() && kept.compiled.get() != latest) {
      Facts& row = f.row("other_plans");
      kept.compiled->plan->add_facts(row);
      kept.compiled->program->add_facts(row);
    }
}

std::string PlanCache::to_dot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& [key, kept] : plans_) out += kept.compiled->plan->to_dot(*kept.compiled->program);
  return out;
}

}  // namespace esg::runtime
