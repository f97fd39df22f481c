#include "schedule/order.hpp"

#include <algorithm>
#include <functional>
#include <queue>
#include <set>

namespace esg::schedule {
namespace {

// Consumers of each value.
std::vector<std::vector<int>> consumers(const Dag& d) {
  std::vector<std::vector<int>> c(static_cast<size_t>(d.num_values()));
  for (int o = 0; o < d.num_ops(); ++o)
    for (int v : d.ops[static_cast<size_t>(o)].inputs) c[static_cast<size_t>(v)].push_back(o);
  return c;
}

// How many ops must run before each op (distinct producing ops of its inputs).
std::vector<int> in_degrees(const Dag& d, const std::vector<int>& prod) {
  std::vector<int> deg(static_cast<size_t>(d.num_ops()), 0);
  for (int o = 0; o < d.num_ops(); ++o) {
    std::vector<int> preds;
    for (int v : d.ops[static_cast<size_t>(o)].inputs)
      if (prod[static_cast<size_t>(v)] >= 0) preds.push_back(prod[static_cast<size_t>(v)]);
    std::sort(preds.begin(), preds.end());
    deg[static_cast<size_t>(o)] = static_cast<int>(std::unique(preds.begin(), preds.end()) - preds.begin());
  }
  return deg;
}

// The successor ops of each op, without duplicates.
std::vector<std::vector<int>> successors(const Dag& d) {
  const auto cons = consumers(d);
  std::vector<std::vector<int>> s(static_cast<size_t>(d.num_ops()));
  for (int o = 0; o < d.num_ops(); ++o) {
    for (int v : d.ops[static_cast<size_t>(o)].outputs)
      for (int c : cons[static_cast<size_t>(v)]) s[static_cast<size_t>(o)].push_back(c);
    std::sort(s[static_cast<size_t>(o)].begin(), s[static_cast<size_t>(o)].end());
    s[static_cast<size_t>(o)].erase(std::unique(s[static_cast<size_t>(o)].begin(), s[static_cast<size_t>(o)].end()), s[static_cast<size_t>(o)].end());
  }
  return s;
}

}  // namespace

bool is_topological(const Dag& d, const std::vector<int>& order) {
  if (static_cast<int>(order.size()) != d.num_ops()) return false;
  std::vector<int> pos(static_cast<size_t>(d.num_ops()), -1);
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i] < 0 || order[i] >= d.num_ops() || pos[static_cast<size_t>(order[i])] >= 0) return false;
    pos[static_cast<size_t>(order[i])] = static_cast<int>(i);
  }
  const auto prod = d.producers();
  for (int o = 0; o < d.num_ops(); ++o)
    for (int v : d.ops[static_cast<size_t>(o)].inputs) {
      const int p = prod[static_cast<size_t>(v)];
      if (p >= 0 && pos[static_cast<size_t>(p)] >= pos[static_cast<size_t>(o)]) return false;
    }
  return true;
}

int64_t peak_bytes(const Dag& d, const std::vector<int>& order) {
  const int n = d.num_ops();
  std::vector<int> pos(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) pos[static_cast<size_t>(order[static_cast<size_t>(i)])] = i;
  // Steps -1 (before the first op) .. n (after the last), shifted by one.
  std::vector<int> first(static_cast<size_t>(d.num_values()), -1), last(static_cast<size_t>(d.num_values()), -1);
  for (int o = 0; o < n; ++o) {
    const int t = pos[static_cast<size_t>(o)];
    for (int v : d.ops[static_cast<size_t>(o)].outputs) first[static_cast<size_t>(v)] = last[static_cast<size_t>(v)] = t;
    for (int v : d.ops[static_cast<size_t>(o)].inputs) last[static_cast<size_t>(v)] = std::max(last[static_cast<size_t>(v)], t);
  }
  for (int v : d.graph_inputs) first[static_cast<size_t>(v)] = -1, last[static_cast<size_t>(v)] = std::max(last[static_cast<size_t>(v)], -1);
  for (int v : d.graph_outputs) last[static_cast<size_t>(v)] = n;
  std::vector<int64_t> delta(static_cast<size_t>(n) + 3, 0);
  for (int v = 0; v < d.num_values(); ++v) {
    delta[static_cast<size_t>(first[static_cast<size_t>(v)] + 1)] += d.value_bytes[static_cast<size_t>(v)];
    delta[static_cast<size_t>(last[static_cast<size_t>(v)] + 2)] -= d.value_bytes[static_cast<size_t>(v)];
  }
  int64_t live = 0, peak = 0;
  for (int64_t x : delta) peak = std::max(peak, live += x);
  return peak;
}

std::vector<int> bfs_order(const Dag& d) {
  const auto prod = d.producers();
  std::vector<int> deg = in_degrees(d, prod);
  const auto succ = successors(d);
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int o = 0; o < d.num_ops(); ++o)
    if (deg[static_cast<size_t>(o)] == 0) ready.push(o);
  std::vector<int> order;
  while (!ready.empty()) {
    const int o = ready.top();
    ready.pop();
    order.push_back(o);
    for (int s : succ[static_cast<size_t>(o)])
      if (--deg[static_cast<size_t>(s)] == 0) ready.push(s);
  }
  return order;
}

std::vector<int> dfs_order(const Dag& d) {
  const auto prod = d.producers();
  std::vector<char> state(static_cast<size_t>(d.num_ops()), 0);  // 0 new, 1 open, 2 done
  std::vector<int> order;
  auto visit = [&](int root) {
    std::vector<std::pair<int, size_t>> stack{{root, 0}};
    state[static_cast<size_t>(root)] = 1;
    while (!stack.empty()) {
      auto& [o, next] = stack.back();
      const auto& ins = d.ops[static_cast<size_t>(o)].inputs;
      if (next < ins.size()) {
        const int p = prod[static_cast<size_t>(ins[next++])];
        if (p >= 0 && state[static_cast<size_t>(p)] == 0) {
          state[static_cast<size_t>(p)] = 1;
          stack.push_back({p, 0});
        }
        continue;
      }
      state[static_cast<size_t>(o)] = 2;
      order.push_back(o);
      stack.pop_back();
    }
  };
  for (int v : d.graph_outputs)
    if (const int p = prod[static_cast<size_t>(v)]; p >= 0 && !state[static_cast<size_t>(p)]) visit(p);
  for (int o = 0; o < d.num_ops(); ++o)
    if (!state[static_cast<size_t>(o)]) visit(o);
  return order;
}

std::vector<int> greedy_memory_order(const Dag& d) {
  const auto prod = d.producers();
  const auto cons = consumers(d);
  std::vector<int> deg = in_degrees(d, prod);
  const auto succ = successors(d);
  std::vector<int> remaining(static_cast<size_t>(d.num_values()));  // consumers yet to run
  for (int v = 0; v < d.num_values(); ++v) remaining[static_cast<size_t>(v)] = static_cast<int>(cons[static_cast<size_t>(v)].size());
  std::vector<char> kept(static_cast<size_t>(d.num_values()), 0);
  for (int v : d.graph_outputs) kept[static_cast<size_t>(v)] = 1;
  std::vector<int> ready, order;
  for (int o = 0; o < d.num_ops(); ++o)
    if (deg[static_cast<size_t>(o)] == 0) ready.push_back(o);
  // Bytes an op adds to the live set: its outputs, less the inputs it is the last consumer of.
  auto growth = [&](int o) {
    int64_t g = 0;
    for (int v : d.ops[static_cast<size_t>(o)].outputs) g += d.value_bytes[static_cast<size_t>(v)];
    const auto& ins = d.ops[static_cast<size_t>(o)].inputs;
    for (size_t i = 0; i < ins.size(); ++i) {
      const int v = ins[i];
      if (std::find(ins.begin(), ins.begin() + static_cast<std::ptrdiff_t>(i), v) != ins.begin() + static_cast<std::ptrdiff_t>(i)) continue;
      const int uses = static_cast<int>(std::count(ins.begin(), ins.end(), v));
      if (!kept[static_cast<size_t>(v)] && remaining[static_cast<size_t>(v)] == uses) g -= d.value_bytes[static_cast<size_t>(v)];
    }
    return g;
  };
  while (!ready.empty()) {
    size_t best = 0;
    int64_t best_g = growth(ready[0]);
    for (size_t i = 1; i < ready.size(); ++i) {
      const int64_t g = growth(ready[i]);
      if (g < best_g || (g == best_g && ready[i] < ready[best])) best = i, best_g = g;
    }
    const int o = ready[best];
    ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(best));
    order.push_back(o);
    for (int v : d.ops[static_cast<size_t>(o)].inputs) --remaining[static_cast<size_t>(v)];
    for (int s : succ[static_cast<size_t>(o)])
      if (--deg[static_cast<size_t>(s)] == 0) ready.push_back(s);
  }
  return order;
}

std::vector<int> memory_aware_order(const Dag& d) {
  std::vector<int> best = greedy_memory_order(d);
  int64_t best_peak = peak_bytes(d, best);
  for (auto other : {dfs_order(d), bfs_order(d)}) {
    const int64_t p = peak_bytes(d, other);
    if (p < best_peak) best = std::move(other), best_peak = p;
  }
  return best;
}

std::vector<int> keep_in_sequence(const Dag& d, const std::vector<int>& order, const std::vector<int>& sequence) {
  const size_t n = static_cast<size_t>(d.num_ops());
  const auto prod = d.producers();
  std::vector<int> position(n, 0), place(n, -1), waiting(n, 0);
  for (size_t i = 0; i < order.size(); ++i) position[static_cast<size_t>(order[i])] = static_cast<int>(i);
  for (size_t i = 0; i < sequence.size(); ++i) place[static_cast<size_t>(sequence[i])] = static_cast<int>(i);
  std::vector<std::vector<int>> users(n);
  for (size_t op = 0; op < n; ++op) {
    std::vector<int> from;
    for (int v : d.ops[op].inputs)
      if (prod[static_cast<size_t>(v)] >= 0) from.push_back(prod[static_cast<size_t>(v)]);
    std::sort(from.begin(), from.end());
    from.erase(std::unique(from.begin(), from.end()), from.end());
    for (int p : from) users[static_cast<size_t>(p)].push_back(static_cast<int>(op));
    waiting[op] = static_cast<int>(from.size());
  }
  // Ready ops by their position in `order`; an op of the sequence waits for its turn too.
  std::set<std::pair<int, int>> ready;
  size_t next = 0;  // the sequence's next op
  auto offer = [&](int op) {
    const int k = place[static_cast<size_t>(op)];
    if (waiting[static_cast<size_t>(op)] == 0 && (k < 0 || static_cast<size_t>(k) == next)) ready.insert({position[static_cast<size_t>(op)], op});
  };
  for (size_t op = 0; op < n; ++op) offer(static_cast<int>(op));
  std::vector<int> out;
  while (!ready.empty()) {
    const int op = ready.begin()->second;
    ready.erase(ready.begin());
    out.push_back(op);
    if (place[static_cast<size_t>(op)] >= 0 && ++next < sequence.size()) offer(sequence[next]);
    for (int u : users[static_cast<size_t>(op)]) {
      --waiting[static_cast<size_t>(u)];
      offer(u);
    }
  }
  return out;
}

}  // namespace esg::schedule
