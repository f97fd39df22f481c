// Memory formats in the plan: each value's physical format chosen by the backend's rules, and
// reorders inserted where a producer's format differs from what a consumer reads. Runs on the
// dependency graph before ordering, so reorders are ops like any other (ordered, on streams,
// their results planned in the arena at their blocked sizes, padding included).
#pragma once
#include <utility>
#include <vector>

#include "schedule/dag.hpp"
#include "schedule/format.hpp"
#include "runtime/backend.hpp"
#include "runtime/grouping.hpp"

namespace esg::runtime {

struct FormatPlan {
  std::vector<schedule::Format> format;  // per DAG value
  // Per DAG op: the DAG value a graph value it reads or writes is bound to, where that is not
  // the value's own (a reordered copy, or a blocked result that a reorder turns into an output).
  std::vector<std::vector<std::pair<ir::ValueId, int>>> bound;
  std::vector<ir::ValueId> reordered;  // per DAG op: the graph value a reorder copies, else kNone
  int reorders = 0;

  int dag_value(const schedule::GraphDag& gd, int op, ir::ValueId v) const;
};

// Assigns formats to `gd`'s values under `rules` and adds the reorders to it (ops with node
// kNone). With no format_of rule, every value is row-major and nothing changes.
FormatPlan assign_formats(const ir::Graph& g, const std::vector<FusedGroup>& groups, const FormatRules& rules, schedule::GraphDag& gd);

}  // namespace esg::runtime
