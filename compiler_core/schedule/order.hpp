// Execution order: a topological order of the DAG's ops chosen to keep the bytes alive at once
// low. The result is never worse than plain depth-first or breadth-first order, which are
// computed too and taken when they happen to be better.
#pragma once
#include <vector>

#include "schedule/dag.hpp"

namespace esg::schedule {

std::vector<int> dfs_order(const Dag& d);  // from the outputs back, inputs first
std::vector<int> bfs_order(const Dag& d);  // Kahn's algorithm, lowest op index first
// Greedy: among ready ops, the one whose run grows the live bytes least (frees most).
std::vector<int> greedy_memory_order(const Dag& d);
// The best of the three by peak_bytes.
std::vector<int> memory_aware_order(const Dag& d);

// `order` (a topological order) changed as little as possible so that the ops of `sequence` run
// in that sequence: of the ops ready at each step, the earliest in `order`, an op of `sequence`
// only when those before it in the sequence have run. The collectives keep the order their
// graph built them in this way, the same on every rank however the rest is ordered.
// `sequence` must agree with the DAG (no op depends on one later in it).
std::vector<int> keep_in_sequence(const Dag& d, const std::vector<int>& order, const std::vector<int>& sequence);

// The largest sum of sizes of values alive together when running in `order` (values live from
// their producer to their last consumer; graph inputs from the start, outputs to the end).
int64_t peak_bytes(const Dag& d, const std::vector<int>& order);
bool is_topological(const Dag& d, const std::vector<int>& order);

}  // namespace esg::schedule
