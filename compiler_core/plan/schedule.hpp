// Execution order: a topological order of the DAG's ops chosen to keep the bytes alive at once
// low. The result is never worse than plain depth-first or breadth-first order, which are
// computed too and taken when they happen to be better.
#pragma once
#include <vector>

#include "plan/dag.hpp"

namespace esg::plan {

std::vector<int> dfs_order(const Dag& d);  // from the outputs back, inputs first
std::vector<int> bfs_order(const Dag& d);  // Kahn's algorithm, lowest op index first
// Greedy: among ready ops, the one whose run grows the live bytes least (frees most).
std::vector<int> greedy_memory_order(const Dag& d);
// The best of the three by peak_bytes.
std::vector<int> memory_aware_order(const Dag& d);

// The largest sum of sizes of values alive together when running in `order` (values live from
// their producer to their last consumer; graph inputs from the start, outputs to the end).
int64_t peak_bytes(const Dag& d, const std::vector<int>& order);
bool is_topological(const Dag& d, const std::vector<int>& order);

}  // namespace esg::plan
