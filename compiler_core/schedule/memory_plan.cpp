#include "schedule/memory_plan.hpp"

#include <algorithm>
#include <functional>
#include <numeric>
#include <utility>

namespace esg::schedule {
namespace {

int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

struct Lifetime {
  int first = 0, last = -1;  // steps of the order
};

// When each value is born and last used, as steps of `order`.
std::vector<Lifetime> lifetimes(const Dag& d, const std::vector<int>& order) {
  std::vector<Lifetime> life(static_cast<size_t>(d.num_values()));
  for (int t = 0; t < static_cast<int>(order.size()); ++t) {
    const Dag::Op& op = d.ops[static_cast<size_t>(order[static_cast<size_t>(t)])];
    for (int v : op.outputs) life[static_cast<size_t>(v)] = {t, t};
    for (int v : op.inputs) life[static_cast<size_t>(v)].last = std::max(life[static_cast<size_t>(v)].last, t);
  }
  return life;
}

std::vector<char> in_arena(const Dag& d) {
  std::vector<char> a(static_cast<size_t>(d.num_values()), 1);
  for (int v : d.graph_inputs) a[static_cast<size_t>(v)] = 0;
  for (int v : d.graph_outputs) a[static_cast<size_t>(v)] = 0;
  return a;
}

// Buffers: a value, or a value with the inputs it took over in place and the views of them
// (one group, a union-find: a view's group may itself join another later), each with its bytes
// and the steps it lives.
struct Buffers {
  std::vector<int> group;
  std::vector<int64_t> bytes;
  std::vector<Lifetime> span;

  Buffers(const Dag& d, std::vector<Lifetime> life, const MemoryPlanOptions& options) : group(life.size()), bytes(life.size()), span(std::move(life)) {
    std::iota(group.begin(), group.end(), 0);
    for (size_t v = 0; v < bytes.size(); ++v) bytes[v] = align_up(d.value_bytes[v] + options.slack, options.alignment);
  }
  size_t root(int v) {
    while (group[static_cast<size_t>(v)] != v) v = group[static_cast<size_t>(v)] = group[static_cast<size_t>(group[static_cast<size_t>(v)])];
    return static_cast<size_t>(v);
  }
  // Groups `from` (a root) into the group of root `into`, which then lives as long as both.
  void join(size_t from, size_t into) {
    group[from] = static_cast<int>(into);
    span[into].last = std::max(span[into].last, span[from].last);
  }
};

// With several streams, a value whose producer and consumers are not all on one stream is
// alive for the whole run: only one stream's order is known to hold, so its bytes are never
// reused (nor taken over in place). Every other value lives within its stream.
struct ValueStreams {
  std::vector<int> stream;  // per value: the stream that first touches it
  std::vector<char> shared;  // per value: touched by more than one
};
ValueStreams value_streams(const Dag& d, const std::vector<int>& order, const std::vector<int>& op_stream, Buffers& buffers) {
  const size_t nv = static_cast<size_t>(d.num_values());
  ValueStreams vs{std::vector<int>(nv, 0), std::vector<char>(nv, 0)};
  if (op_stream.empty()) return vs;
  std::vector<int> seen(nv, -1);
  auto touch = [&](int v, int op) {
    const int s = op_stream[static_cast<size_t>(op)];
    if (seen[static_cast<size_t>(v)] < 0) seen[static_cast<size_t>(v)] = s, vs.stream[static_cast<size_t>(v)] = s;
    else if (seen[static_cast<size_t>(v)] != s) vs.shared[static_cast<size_t>(v)] = 1;
  };
  for (int op : order) {
    for (int v : d.ops[static_cast<size_t>(op)].outputs) touch(v, op);
    for (int v : d.ops[static_cast<size_t>(op)].inputs) touch(v, op);
  }
  for (size_t v = 0; v < nv; ++v)
    if (vs.shared[v]) buffers.span[v] = {0, static_cast<int>(order.size()) - 1};
  return vs;
}

// Views first: a view's output joins its input's buffer, which then lives as long as either (a
// view of a graph input, output or constant is the caller's or the graph's bytes: not placed).
// On several streams views stay copies: events name the ops they order.
void join_views(const Dag& d, const std::vector<int>& order, const std::vector<char>& arena, Buffers& buffers, std::vector<char>& placed,
                MemoryPlan& plan) {
  for (int t = 0; t < static_cast<int>(order.size()); ++t) {
    const Dag::Op& op = d.ops[static_cast<size_t>(order[static_cast<size_t>(t)])];
    const int i = op.alias;
    if (i < 0 || !arena[static_cast<size_t>(op.outputs[0])] || d.value_bytes[static_cast<size_t>(i)] != d.value_bytes[static_cast<size_t>(op.outputs[0])])
      continue;
    const size_t o = static_cast<size_t>(op.outputs[0]);
    plan.alias_of[o] = i;
    placed[o] = placed[static_cast<size_t>(i)];
    if (!placed[o]) continue;
    buffers.join(o, buffers.root(i));
  }
}

// In place: an output over a reusable input whose buffer (every view of it too) dies there.
void join_in_place(const Dag& d, const std::vector<int>& order, const std::vector<char>& shared, const std::vector<char>& placed,
                   Buffers& buffers, MemoryPlan& plan) {
  for (int t = 0; t < static_cast<int>(order.size()); ++t) {
    const Dag::Op& op = d.ops[static_cast<size_t>(order[static_cast<size_t>(t)])];
    std::vector<int> taken;
    for (int o : op.outputs) {
      if (!placed[static_cast<size_t>(o)] || plan.alias_of[static_cast<size_t>(o)] >= 0) continue;
      for (int i : op.reusable) {
        const size_t g = buffers.root(i);
        // An input the op reads whole (not at the index it writes) that views these bytes
        // would see them overwritten under it.
        const bool read_whole = std::any_of(op.inputs.begin(), op.inputs.end(), [&](int v) {
          return buffers.root(v) == g && std::find(op.reusable.begin(), op.reusable.end(), v) == op.reusable.end();
        });
        if (read_whole || !placed[static_cast<size_t>(i)] || shared[static_cast<size_t>(i)] || buffers.span[g].last != t ||
            d.value_bytes[static_cast<size_t>(i)] != d.value_bytes[static_cast<size_t>(o)] ||
            buffers.bytes[g] != buffers.bytes[static_cast<size_t>(o)] || std::find(taken.begin(), taken.end(), i) != taken.end())
          continue;
        taken.push_back(i);
        plan.in_place_of[static_cast<size_t>(o)] = i;
        buffers.join(buffers.root(o), g);  // o with its views
        break;
      }
    }
  }
}

// The lower bound, the most bytes of buffers alive at one step, and the bytes without reuse.
void note_bounds(const std::vector<int>& roots, size_t steps, const std::vector<char>& placed, Buffers& buffers, MemoryPlan& plan) {
  std::vector<int64_t> delta(steps + 2, 0);
  for (int r : roots) {
    plan.no_reuse_bytes += buffers.bytes[static_cast<size_t>(r)];
    delta[static_cast<size_t>(buffers.span[static_cast<size_t>(r)].first)] += buffers.bytes[static_cast<size_t>(r)];
    delta[static_cast<size_t>(buffers.span[static_cast<size_t>(r)].last) + 1] -= buffers.bytes[static_cast<size_t>(r)];
  }
  int64_t live = 0;
  for (int64_t x : delta) plan.lower_bound = std::max(plan.lower_bound, live += x);
  for (size_t v = 0; v < placed.size(); ++v)
    if (placed[v] && buffers.root(static_cast<int>(v)) != v) plan.no_reuse_bytes += buffers.bytes[v];
}

// Greedy placement: buffers one by one, each into a gap among the buffers already placed
// whose lifetimes overlap it. Which order and which gap work best depends on the graph, so a
// few classic variants run (each O(n^2) at worst, on lifetimes only) and the smallest wins:
// by size (TFLite's greedy-by-size), by size x lifetime, by lifetime length, and by birth;
// each with best fit (the smallest gap that fits) and first fit (the lowest offset).
class GreedyPlacer {
 public:
  explicit GreedyPlacer(const Buffers& buffers) : buffers_(buffers), overlapping_(buffers.bytes.size()) {}

  // Places `roots` from `base` up, writing their offsets into `offsets`; returns their bytes.
  int64_t place(const std::vector<int>& roots, int64_t base, std::vector<int64_t>& offsets) {
    find_overlaps(roots);
    const std::vector<Lifetime>& span = buffers_.span;
    auto length = [&](int v) { return static_cast<int64_t>(span[static_cast<size_t>(v)].last - span[static_cast<size_t>(v)].first + 1); };
    auto size = [&](int v) { return buffers_.bytes[static_cast<size_t>(v)]; };
    const std::vector<std::function<std::pair<int64_t, int64_t>(int)>> keys = {
        [&](int v) { return std::make_pair(-size(v), static_cast<int64_t>(span[static_cast<size_t>(v)].first)); },
        [&](int v) { return std::make_pair(-size(v) * length(v), -size(v)); },
        [&](int v) { return std::make_pair(-length(v), -size(v)); },
        [&](int v) { return std::make_pair(static_cast<int64_t>(span[static_cast<size_t>(v)].first), -size(v)); },
        [&](int v) { return std::make_pair(-static_cast<int64_t>(span[static_cast<size_t>(v)].last), -size(v)); },
        [&](int v) { return std::make_pair(-static_cast<int64_t>(std::min<int64_t>(length(v), 8)) * size(v), -size(v)); },
    };
    int64_t best = INT64_MAX;
    std::vector<int64_t> offset(buffers_.bytes.size(), -1);
    // Large graphs try the first three orders only: each placement costs O(pairs log pairs).
    for (size_t k = 0; k < (roots.size() > 4000 ? 3 : keys.size()); ++k) {
      std::vector<int> sequence = roots;
      std::stable_sort(sequence.begin(), sequence.end(), [&](int a, int b) { return keys[k](a) < keys[k](b); });
      for (const bool best_fit : {true, false}) {
        const int64_t top = place_in(sequence, best_fit, offset);
        if (top < best) {
          best = top;
          for (int r : roots) offsets[static_cast<size_t>(r)] = base + offset[static_cast<size_t>(r)];
        }
      }
    }
    return roots.empty() ? 0 : best;
  }

 private:
  // Which buffers overlap in time, found once by a sweep over births: O(n log n + pairs), so a
  // placement looks only at its own neighbours rather than at every placed buffer.
  void find_overlaps(const std::vector<int>& roots) {
    const std::vector<Lifetime>& span = buffers_.span;
    std::vector<int> by_birth = roots;
    std::sort(by_birth.begin(), by_birth.end(), [&](int a, int b) { return span[static_cast<size_t>(a)].first < span[static_cast<size_t>(b)].first; });
    for (size_t x = 0; x < by_birth.size(); ++x)
      for (size_t y = x + 1; y < by_birth.size() && span[static_cast<size_t>(by_birth[y])].first <= span[static_cast<size_t>(by_birth[x])].last; ++y) {
        overlapping_[static_cast<size_t>(by_birth[x])].push_back(by_birth[y]);
        overlapping_[static_cast<size_t>(by_birth[y])].push_back(by_birth[x]);
      }
  }
  // The offset for buffer r given the buffers placed so far (offset >= 0): the lowest (first
  // fit) or the tightest (best fit) gap that holds it, else above them all.
  int64_t fit(size_t r, const std::vector<int64_t>& offset, bool best_fit) {
    busy_.clear();
    for (int p : overlapping_[r])
      if (offset[static_cast<size_t>(p)] >= 0)
        busy_.push_back({offset[static_cast<size_t>(p)], offset[static_cast<size_t>(p)] + buffers_.bytes[static_cast<size_t>(p)]});
    std::sort(busy_.begin(), busy_.end());
    int64_t best = -1, best_gap = INT64_MAX, at = 0;
    for (const auto& [off, end] : busy_) {
      if (off - at >= buffers_.bytes[r] && off - at < best_gap) {
        best = at, best_gap = off - at;
        if (!best_fit) break;
      }
      at = std::max(at, end);
    }
    return best >= 0 ? best : at;
  }
  int64_t place_in(const std::vector<int>& sequence, bool best_fit, std::vector<int64_t>& offset) {
    std::fill(offset.begin(), offset.end(), -1);
    int64_t top = 0;
    for (int r : sequence) {
      offset[static_cast<size_t>(r)] = fit(static_cast<size_t>(r), offset, best_fit);
      top = std::max(top, offset[static_cast<size_t>(r)] + buffers_.bytes[static_cast<size_t>(r)]);
    }
    return top;
  }

  const Buffers& buffers_;
  std::vector<std::vector<int>> overlapping_;
  std::vector<std::pair<int64_t, int64_t>> busy_;
};

}  // namespace

MemoryPlan plan_memory(const Dag& d, const std::vector<int>& order, const MemoryPlanOptions& options) {
  const size_t nv = static_cast<size_t>(d.num_values());
  const std::vector<char> arena = in_arena(d);
  MemoryPlan plan;
  plan.offset.assign(nv, -1);
  plan.in_place_of.assign(nv, -1);
  plan.alias_of.assign(nv, -1);
  Buffers buffers(d, lifetimes(d, order), options);
  const bool streams = !options.op_stream.empty();
  const ValueStreams vs = value_streams(d, order, options.op_stream, buffers);
  // Which values get arena bytes of their own (or share a group's): not the caller's nor the
  // graph's, nor views of those.
  std::vector<char> placed = arena;
  if (options.reuse && options.in_place) {
    if (!streams) join_views(d, order, arena, buffers, placed, plan);
    join_in_place(d, order, vs.shared, placed, buffers, plan);
  }
  std::vector<int> roots;
  for (size_t v = 0; v < nv; ++v)
    if (placed[v] && buffers.root(static_cast<int>(v)) == v) roots.push_back(static_cast<int>(v));
  note_bounds(roots, order.size(), placed, buffers, plan);
  // Streams place their buffers in disjoint parts of the arena, one after the other.
  const int num_parts = streams ? 1 + *std::max_element(options.op_stream.begin(), options.op_stream.end()) : 1;
  GreedyPlacer placer(buffers);
  for (int part = 0; part < num_parts; ++part) {
    std::vector<int> in_part;
    for (int r : roots)
      if (vs.stream[static_cast<size_t>(r)] == part) in_part.push_back(r);
    if (!options.reuse) {
      for (int r : in_part) plan.offset[static_cast<size_t>(r)] = plan.arena_bytes, plan.arena_bytes += buffers.bytes[static_cast<size_t>(r)];
    } else {
      plan.arena_bytes += placer.place(in_part, plan.arena_bytes, plan.offset);
    }
  }
  for (size_t v = 0; v < nv; ++v)
    if (placed[v] && buffers.root(static_cast<int>(v)) != v) plan.offset[v] = plan.offset[buffers.root(static_cast<int>(v))];
  return plan;
}

std::string check_plan(const Dag& d, const std::vector<int>& order, const MemoryPlan& plan, int64_t alignment,
                       const std::vector<int>& op_stream, int64_t slack) {
  const std::vector<Lifetime> life = lifetimes(d, order);
  const std::vector<char> arena = in_arena(d);
  const size_t nv = static_cast<size_t>(d.num_values());
  // Views: a value a view's op made its input's bytes (its alias root: what it finally views).
  // The op must be a view of that input, and the two the same bytes at the same place.
  const auto producer = d.producers();
  std::vector<size_t> root(nv);
  for (size_t v = 0; v < nv; ++v) {
    const int i = plan.alias_of[v];
    root[v] = v;
    if (i < 0) continue;
    if (producer[v] < 0 || d.ops[static_cast<size_t>(producer[v])].alias != i || d.value_bytes[static_cast<size_t>(i)] != d.value_bytes[v])
      return "value " + std::to_string(v) + " is planned as a view of " + std::to_string(i) + ", which its op is not";
    if (arena[v] && (plan.offset[v] != plan.offset[static_cast<size_t>(i)] || (!arena[static_cast<size_t>(i)] && plan.offset[v] != -1)))
      return "value " + std::to_string(v) + " views " + std::to_string(i) + " but lies elsewhere";
  }
  for (size_t v = 0; v < nv; ++v)  // a chain of views ends (each view's input was made before it)
    while (plan.alias_of[root[v]] >= 0) root[v] = static_cast<size_t>(plan.alias_of[root[v]]);
  std::vector<int> root_last(nv, -1);  // the last use of any view of a root
  for (size_t v = 0; v < nv; ++v) root_last[root[v]] = std::max(root_last[root[v]], life[v].last);
  // A legitimate in-place pair: an op's output over one of its reusable inputs (or a view of
  // it), dying there with every view of its bytes.
  auto legit = [&](size_t o, size_t i) {
    const int taken = plan.in_place_of[o];
    if (taken < 0 || root[static_cast<size_t>(taken)] != root[i]) return false;
    for (const Dag::Op& op : d.ops)
      if (std::count(op.outputs.begin(), op.outputs.end(), static_cast<int>(o)) &&
          std::count(op.reusable.begin(), op.reusable.end(), taken)) {
        for (int v : op.inputs)  // no input the op reads whole may show these bytes
          if (root[static_cast<size_t>(v)] == root[i] && !std::count(op.reusable.begin(), op.reusable.end(), v)) return false;
        return life[static_cast<size_t>(taken)].last == life[o].first && root_last[root[i]] <= life[o].first &&
               d.value_bytes[static_cast<size_t>(taken)] == d.value_bytes[o];
      }
    return false;
  };
  // Values sharing bytes through a chain of in-place pairs form one buffer over time.
  std::vector<size_t> values;
  for (size_t v = 0; v < nv; ++v) {
    if (!arena[v] || (root[v] != v && !arena[root[v]])) continue;  // a view of the caller's or the graph's bytes
    if (plan.offset[v] < 0 || plan.offset[v] % alignment) return "value " + std::to_string(v) + " has a bad offset";
    if (plan.offset[v] + d.value_bytes[v] + slack > plan.arena_bytes) return "value " + std::to_string(v) + " ends past the arena";
    values.push_back(v);
  }
  std::sort(values.begin(), values.end(), [&](size_t a, size_t b) { return life[a].first < life[b].first; });
  for (size_t x = 0; x < values.size(); ++x)
    for (size_t y = x + 1; y < values.size(); ++y) {
      const size_t a = values[x], b = values[y];
      if (life[b].first > life[a].last) break;  // sorted by birth: no later value overlaps a either
      const bool bytes_overlap =
          plan.offset[a] < plan.offset[b] + d.value_bytes[b] + slack && plan.offset[b] < plan.offset[a] + d.value_bytes[a] + slack;
      if (bytes_overlap && root[a] != root[b] && !legit(a, b) && !legit(b, a))
        return "values " + std::to_string(a) + " and " + std::to_string(b) + " are alive together and share bytes";
    }
  if (op_stream.empty()) return "";
  // On several streams, only the order of one stream is known to hold: when a value's bytes are
  // written again later, every use of it must be on the stream of the op writing them.
  std::vector<int> users(nv, -1), writer(nv, -1);  // users: -2 when on several streams
  for (int op = 0; op < d.num_ops(); ++op) {
    const int s = op_stream[static_cast<size_t>(op)];
    auto use = [&](int v) { users[static_cast<size_t>(v)] = users[static_cast<size_t>(v)] == -1 || users[static_cast<size_t>(v)] == s ? s : -2; };
    for (int v : d.ops[static_cast<size_t>(op)].inputs) use(v);
    for (int v : d.ops[static_cast<size_t>(op)].outputs) use(v), writer[static_cast<size_t>(v)] = s;
  }
  std::sort(values.begin(), values.end(), [&](size_t a, size_t b) { return plan.offset[a] < plan.offset[b]; });
  for (size_t x = 0; x < values.size(); ++x)
    for (size_t y = x + 1; y < values.size() && plan.offset[values[y]] < plan.offset[values[x]] + d.value_bytes[values[x]]; ++y) {
      size_t a = values[x], b = values[y];
      if (d.value_bytes[a] == 0 || d.value_bytes[b] == 0) continue;
      if (life[b].first < life[a].first) std::swap(a, b);  // a first, b writes the bytes later
      if (users[a] != writer[b])
        return "values " + std::to_string(a) + " and " + std::to_string(b) + " share bytes, but " + std::to_string(a) +
               " is used on a stream other than the one writing " + std::to_string(b);
    }
  return "";
}

}  // namespace esg::schedule
