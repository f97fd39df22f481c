// Events across streams, checked against a brute-force oracle on small random DAGs: with the
// events and each stream's order as the only synchronization, every data dependency must be
// ordered (no missing event), and dropping any one event must break one (no redundant event).
#include <doctest/doctest.h>

#include <random>

#include "schedule/order.hpp"
#include "schedule/streams.hpp"

using namespace esg::schedule;

namespace {

Dag small_dag(int ops, std::mt19937& rng) {
  Dag d;
  d.value_bytes.push_back(64);
  d.graph_inputs = {0};
  for (int o = 0; o < ops; ++o) {
    std::vector<int> in;
    for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k) in.push_back(static_cast<int>(rng() % static_cast<uint32_t>(d.num_values())));
    d.value_bytes.push_back(64);
    d.ops.push_back({in, {d.num_values() - 1}, {}});
  }
  d.graph_outputs = {d.num_values() - 1};
  return d;
}

// happens[a][b]: a is ordered before b by stream order and `events` (transitively).
std::vector<std::vector<bool>> happens_before(const Dag& d, const std::vector<int>& order, const std::vector<int>& stream,
                                              const std::vector<Event>& events) {
  const size_t n = static_cast<size_t>(d.num_ops());
  std::vector<std::vector<bool>> hb(n, std::vector<bool>(n, false));
  std::vector<int> last_on(16, -1);
  for (int op : order) {
    const int s = stream[static_cast<size_t>(op)];
    if (last_on[static_cast<size_t>(s)] >= 0) hb[static_cast<size_t>(last_on[static_cast<size_t>(s)])][static_cast<size_t>(op)] = true;
    last_on[static_cast<size_t>(s)] = op;
  }
  for (const Event& e : events) hb[static_cast<size_t>(e.after)][static_cast<size_t>(e.before)] = true;
  for (size_t k = 0; k < n; ++k)
    for (size_t i = 0; i < n; ++i)
      if (hb[i][k])
        for (size_t j = 0; j < n; ++j)
          if (hb[k][j]) hb[i][j] = true;
  return hb;
}

bool all_dependencies_ordered(const Dag& d, const std::vector<std::vector<bool>>& hb) {
  const auto prod = d.producers();
  for (int o = 0; o < d.num_ops(); ++o)
    for (int v : d.ops[static_cast<size_t>(o)].inputs) {
      const int p = prod[static_cast<size_t>(v)];
      if (p >= 0 && !hb[static_cast<size_t>(p)][static_cast<size_t>(o)]) return false;
    }
  return true;
}

}  // namespace

TEST_CASE("events: none missing and none redundant, on 300 random DAGs and assignments") {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    CAPTURE(trial);
    const Dag d = small_dag(2 + static_cast<int>(rng() % 14), rng);
    const std::vector<int> order = bfs_order(d);
    const int streams = 1 + static_cast<int>(rng() % 4);
    // Random assignments exercise more event patterns than the assigner's choices.
    std::vector<int> stream(static_cast<size_t>(d.num_ops()));
    for (int& s : stream) s = static_cast<int>(rng() % static_cast<uint32_t>(streams));
    const std::vector<Event> events = place_events(d, order, stream, streams);
    CHECK(all_dependencies_ordered(d, happens_before(d, order, stream, events)));
    for (size_t drop = 0; drop < events.size(); ++drop) {
      std::vector<Event> fewer = events;
      fewer.erase(fewer.begin() + static_cast<std::ptrdiff_t>(drop));
      CHECK_FALSE(all_dependencies_ordered(d, happens_before(d, order, stream, fewer)));
    }
  }
}

TEST_CASE("independent branches go to different streams, joined by one event each") {
  // x -> four independent chains of three ops -> a final op over all four.
  Dag d;
  d.value_bytes.push_back(64);
  d.graph_inputs = {0};
  std::vector<int> ends;
  for (int b = 0; b < 4; ++b) {
    int v = 0;
    for (int i = 0; i < 3; ++i) {
      d.value_bytes.push_back(64);
      d.ops.push_back({{v}, {d.num_values() - 1}, {}});
      v = d.num_values() - 1;
    }
    ends.push_back(v);
  }
  d.value_bytes.push_back(64);
  d.ops.push_back({ends, {d.num_values() - 1}, {}});
  d.graph_outputs = {d.num_values() - 1};
  // Branch by branch (depth-first), as the memory-aware order runs them.
  const std::vector<int> order = dfs_order(d);
  const StreamPlan p = assign_streams(d, order, 2);
  CHECK(p.sequence[0].size() + p.sequence[1].size() == 13);
  CHECK(p.sequence[1].size() >= 3);  // the second stream got whole branches
  CHECK(p.events.size() >= 1);
  CHECK(all_dependencies_ordered(d, happens_before(d, order, p.stream, p.events)));
  const StreamPlan one = assign_streams(d, order, 1);
  CHECK(one.events.empty());
}
