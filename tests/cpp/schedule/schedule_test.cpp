// Scheduling and memory planning on chains, residual graphs, a transformer block and random
// DAGs; every plan is checked by the independent checker.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <string>

#include "schedule/memory_plan.hpp"
#include "schedule/order.hpp"
#include "schedule/streams.hpp"

using namespace esg::schedule;

namespace {

int add_value(Dag& d, int64_t bytes) {
  d.value_bytes.push_back(bytes);
  return d.num_values() - 1;
}
// An op over `in`; an elementwise one may write its output over a same-size input in place.
int add_op(Dag& d, std::vector<int> in, int64_t out_bytes, bool elementwise = true) {
  const int out = add_value(d, out_bytes);
  std::vector<int> reusable;
  if (elementwise)
    for (int v : in)
      if (d.value_bytes[static_cast<size_t>(v)] == out_bytes) reusable.push_back(v);
  d.ops.push_back({std::move(in), {out}, reusable});
  return out;
}

Dag chain(int n, int64_t bytes) {
  Dag d;
  int v = add_value(d, bytes);
  d.graph_inputs = {v};
  for (int i = 0; i < n; ++i) v = add_op(d, {v}, bytes, i % 3 != 0);
  d.graph_outputs = {v};
  return d;
}

// Residual blocks: y = x + f(g(x)), the shape of a transformer layer's skip connections.
Dag residual(int blocks, int64_t bytes) {
  Dag d;
  int x = add_value(d, bytes);
  d.graph_inputs = {x};
  for (int b = 0; b < blocks; ++b) {
    const int h = add_op(d, {x}, 4 * bytes, false);  // widen (a matmul)
    const int a = add_op(d, {h}, 4 * bytes);         // activation
    const int f = add_op(d, {a}, bytes, false);      // narrow
    x = add_op(d, {x, f}, bytes);                    // residual add
  }
  d.graph_outputs = {x};
  return d;
}

// Random DAGs. Tensor sizes come from a few classes, as in networks (activations of a few
// widths), unless `uniform`: then any multiple of 64 bytes up to 128 KiB, which fragments the
// arena far more than real graphs do.
Dag random_dag(int ops, uint32_t seed, bool uniform = false) {
  std::mt19937 rng(seed);
  Dag d;
  auto size = [&] {
    if (uniform) return 64 * (1 + static_cast<int64_t>(rng() % 2048));
    static const int64_t classes[] = {4096, 16384, 16384, 65536, 65536, 65536, 262144};
    return classes[rng() % 7];
  };
  for (int i = 0; i < 3; ++i) d.graph_inputs.push_back(add_value(d, size()));
  for (int o = 0; o < ops; ++o) {
    std::vector<int> in;
    const int n_in = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < n_in; ++k) {
      // Mostly recent values, sometimes far back (long-lived values, as skip connections).
      const int span = rng() % 8 == 0 ? d.num_values() : std::min(d.num_values(), 6);
      in.push_back(d.num_values() - 1 - static_cast<int>(rng() % static_cast<uint32_t>(span)));
    }
    add_op(d, in, size(), rng() % 2 == 0);
  }
  d.graph_outputs = {d.num_values() - 1};
  return d;
}

MemoryPlan checked_plan(const Dag& d, const std::vector<int>& order, MemoryPlanOptions o = {}) {
  REQUIRE(is_topological(d, order));
  const MemoryPlan p = plan_memory(d, order, o);
  CHECK(check_plan(d, order, p) == "");
  CHECK(p.arena_bytes >= p.lower_bound);
  CHECK(p.arena_bytes <= p.no_reuse_bytes);
  return p;
}

}  // namespace

TEST_CASE("chains and residual graphs reach the lower bound exactly") {
  for (int n : {1, 2, 7, 50}) {
    const Dag d = chain(n, 1000);
    const MemoryPlan p = checked_plan(d, memory_aware_order(d));
    CHECK(p.arena_bytes == p.lower_bound);
  }
  for (int blocks : {1, 4, 24}) {
    const Dag d = residual(blocks, 4096);
    const MemoryPlan p = checked_plan(d, memory_aware_order(d));
    CHECK(p.arena_bytes == p.lower_bound);
  }
}

TEST_CASE("in-place reuse: an elementwise chain runs in at most two buffers") {
  Dag d = chain(40, 4096);
  for (auto& op : d.ops) op.reusable = op.inputs;
  const MemoryPlan p = checked_plan(d, memory_aware_order(d));
  CHECK(p.arena_bytes <= 2 * 4096);
  MemoryPlanOptions no_in_place;
  no_in_place.in_place = false;
  CHECK(checked_plan(d, memory_aware_order(d), no_in_place).arena_bytes == 2 * 4096);
  MemoryPlanOptions no_reuse;
  no_reuse.reuse = false;
  const MemoryPlan flat = checked_plan(d, memory_aware_order(d), no_reuse);
  CHECK(flat.arena_bytes == flat.no_reuse_bytes);
  CHECK(flat.no_reuse_bytes == 39 * 4096);  // 41 values, less the graph's input and output
}

// The lower bound (the largest live set) is not always reachable: when lifetimes interlock, no
// placement packs them that tightly. So the plans must come close on average and never far.
void check_random_plans(bool uniform, double mean_bound, double max_bound) {
  double sum = 0, worst = 0;
  int count = 0;
  for (int ops : {10, 100, 1000, 10000}) {
    for (uint32_t seed = 1; seed <= (ops >= 10000 ? 1u : 10u); ++seed) {
      CAPTURE(ops);
      CAPTURE(seed);
      const Dag d = random_dag(ops, seed, uniform);
      const MemoryPlan p = checked_plan(d, memory_aware_order(d));
      const double ratio = static_cast<double>(p.arena_bytes) / static_cast<double>(p.lower_bound);
      CHECK(ratio <= max_bound);
      sum += ratio, worst = std::max(worst, ratio), ++count;
    }
  }
  MESSAGE("planned / lower bound over " << count << " random DAGs: mean " << sum / count << ", worst " << worst);
  CHECK(sum / count <= mean_bound);
}

TEST_CASE("random DAGs of up to 10k values: within 1% of the lower bound on average, 8% at worst") {
  check_random_plans(false, 1.01, 1.08);  // measured: mean 1.004, worst 1.078
}

TEST_CASE("random DAGs with sizes of every multiple of 64 bytes: within 5% on average, 15% at worst") {
  check_random_plans(true, 1.05, 1.15);  // measured: mean 1.037, worst 1.121
}

namespace {
// The smallest peak of any topological order, by trying them all (small DAGs only).
int64_t best_peak(const Dag& d) {
  const std::vector<int> producer = d.producers();
  std::vector<int> order, missing(static_cast<size_t>(d.num_ops()), 0);
  for (int o = 0; o < d.num_ops(); ++o)
    for (int v : d.ops[static_cast<size_t>(o)].inputs) missing[static_cast<size_t>(o)] += producer[static_cast<size_t>(v)] >= 0;
  int64_t best = INT64_MAX;
  std::vector<char> done(static_cast<size_t>(d.num_ops()), 0);
  auto extend = [&](auto&& self) -> void {
    if (order.size() == static_cast<size_t>(d.num_ops())) return void(best = std::min(best, peak_bytes(d, order)));
    for (int o = 0; o < d.num_ops(); ++o) {
      if (done[static_cast<size_t>(o)] || missing[static_cast<size_t>(o)]) continue;
      auto release = [&](int delta) {
        for (int v : d.ops[static_cast<size_t>(o)].outputs)
          for (int c = 0; c < d.num_ops(); ++c)
            for (int in : d.ops[static_cast<size_t>(c)].inputs) missing[static_cast<size_t>(c)] -= delta * (in == v);
      };
      done[static_cast<size_t>(o)] = 1, order.push_back(o), release(1);
      self(self);
      release(-1), order.pop_back(), done[static_cast<size_t>(o)] = 0;
    }
  };
  extend(extend);
  return best;
}
}  // namespace

TEST_CASE("slack: every buffer keeps the bytes after its end free, which the checker verifies") {
  // CANN's rule for carving one allocation (Ascend's buffer_slack): 32 bytes after each buffer.
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    const Dag d = random_dag(300, seed, true);
    const std::vector<int> order = memory_aware_order(d);
    MemoryPlanOptions o;
    o.slack = 32;
    const MemoryPlan with = plan_memory(d, order, o);
    CHECK(check_plan(d, order, with, 64, {}, 32) == "");
    CHECK(with.arena_bytes >= with.lower_bound);
    // Without it, buffers of multiples of 64 bytes lie end to end: the checker sees it.
    CHECK(check_plan(d, order, plan_memory(d, order), 64, {}, 32) != "");
  }
}

TEST_CASE("the memory-aware order is a topological order that comes close to the best of all orders") {
  double sum = 0, worst = 0;
  int count = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    CAPTURE(seed);
    const Dag d = random_dag(8, seed);
    const std::vector<int> order = memory_aware_order(d);
    CHECK(is_topological(d, order));
    const double ratio = static_cast<double>(peak_bytes(d, order)) / static_cast<double>(best_peak(d));
    CHECK(ratio >= 1.0);
    sum += ratio, worst = std::max(worst, ratio), ++count;
  }
  MESSAGE("memory-aware peak / best peak over " << count << " DAGs of 8 ops: mean " << sum / count << ", worst " << worst);
  // Measured: mean 1.032, worst 1.293; breadth-first alone gives 1.154 and 1.624, depth-first
  // alone 1.299 and 2.077, so a regression of the greedy choice fails here.
  CHECK(sum / count <= 1.05);
  CHECK(worst <= 1.35);
}

TEST_CASE("the checker catches two live values sharing bytes") {
  const Dag d = residual(2, 4096);
  const std::vector<int> order = memory_aware_order(d);
  MemoryPlan p = plan_memory(d, order);
  REQUIRE(check_plan(d, order, p) == "");
  // Move the widened value of the first block onto the block's activation.
  p.offset[2] = p.offset[1];
  p.in_place_of.assign(p.in_place_of.size(), -1);
  CHECK(check_plan(d, order, p) != "");
}

namespace {

// A view of `in` (a reshape): its output is `in`'s bytes under another shape.
int add_view(Dag& d, int in) {
  const int out = add_value(d, d.value_bytes[static_cast<size_t>(in)]);
  d.ops.push_back({{in}, {out}, {in}, in});
  return out;
}

}  // namespace

TEST_CASE("a view is its input's bytes, which live as long as either; nothing writes over them in place before") {
  // x -> a -> view v of a; b = relu(a) could take a's buffer in place when a dies, but v (read
  // at the end) still shows a's bytes: b must go elsewhere.
  Dag d;
  const int x = add_value(d, 4096);
  d.graph_inputs = {x};
  const int a = add_op(d, {x}, 4096, false);
  const int v = add_view(d, a);
  const int b = add_op(d, {a}, 4096);
  const int y = add_op(d, {b, v}, 4096, false);
  const int xv = add_view(d, x);  // a view of the caller's bytes takes none of the arena
  const int z = add_op(d, {xv, y}, 4096, false);
  d.graph_outputs = {z};
  const std::vector<int> order = {0, 1, 2, 3, 4, 5};
  const MemoryPlan p = checked_plan(d, order);
  CHECK(p.alias_of[static_cast<size_t>(v)] == a);
  CHECK(p.offset[static_cast<size_t>(v)] == p.offset[static_cast<size_t>(a)]);
  CHECK(p.in_place_of[static_cast<size_t>(b)] == -1);
  CHECK(p.offset[static_cast<size_t>(b)] != p.offset[static_cast<size_t>(a)]);
  CHECK(p.alias_of[static_cast<size_t>(xv)] == x);
  CHECK(p.offset[static_cast<size_t>(xv)] == -1);
  // A view placed elsewhere than what it views, or a value called a view that is none, is caught.
  MemoryPlan moved = p;
  moved.offset[static_cast<size_t>(v)] = moved.offset[static_cast<size_t>(b)];
  CHECK(check_plan(d, order, moved).find("lies elsewhere") != std::string::npos);
  MemoryPlan wrong = p;
  wrong.alias_of[static_cast<size_t>(b)] = a;
  CHECK(check_plan(d, order, wrong).find("which its op is not") != std::string::npos);
}

TEST_CASE("an op that reads a view whole never writes over the viewed bytes in place") {
  // x2 views x; G reads x2 whole (a convolution's input) and x elementwise (its residual add):
  // its output must not take x's buffer, which x2 shows while G reads it.
  Dag d;
  const int v0 = add_value(d, 4096);
  d.graph_inputs = {v0};
  const int x = add_op(d, {v0}, 4096, false);
  const int x2 = add_view(d, x);
  const int o = add_value(d, 4096);
  d.ops.push_back({{x2, x}, {o}, {x}});
  const int out = add_op(d, {o}, 4096, false);
  d.graph_outputs = {out};
  const std::vector<int> order = {0, 1, 2, 3};
  MemoryPlan p = checked_plan(d, order);
  CHECK(p.in_place_of[static_cast<size_t>(o)] == -1);
  CHECK(p.offset[static_cast<size_t>(o)] != p.offset[static_cast<size_t>(x)]);
  // The same takeover forced into the plan is caught.
  p.in_place_of[static_cast<size_t>(o)] = x;
  p.offset[static_cast<size_t>(o)] = p.offset[static_cast<size_t>(x)];
  CHECK(check_plan(d, order, p) != "");
}

TEST_CASE("random DAGs with views among their ops plan and check") {
  for (uint32_t seed = 0; seed < 40; ++seed) {
    CAPTURE(seed);
    std::mt19937 rng(seed);
    Dag d = random_dag(120, seed);
    // Views of random values, read by later ops (and by each other: chains of views).
    for (int k = 0; k < 40; ++k) {
      const int viewed = static_cast<int>(rng() % static_cast<uint32_t>(d.num_values()));
      const int v = add_view(d, viewed);
      if (rng() % 2) add_op(d, {v, d.num_values() - 2}, d.value_bytes[static_cast<size_t>(v)], true);
    }
    d.graph_outputs = {d.num_values() - 1};
    const std::vector<int> order = memory_aware_order(d);
    const MemoryPlan p = checked_plan(d, order);
    int views = 0;
    for (const Dag::Op& op : d.ops)
      if (op.alias >= 0 && p.alias_of[static_cast<size_t>(op.outputs[0])] >= 0) {
        ++views;
        CHECK(p.offset[static_cast<size_t>(op.outputs[0])] == p.offset[static_cast<size_t>(op.alias)]);
      }
    CHECK(views >= 30);  // all but views that are the graph's outputs
  }
}

TEST_CASE("on several streams, bytes are shared only among values of one stream") {
  int cross_stream_values = 0;
  for (uint32_t seed = 0; seed < 60; ++seed) {
    CAPTURE(seed);
    const Dag d = random_dag(200, seed);
    const std::vector<int> order = memory_aware_order(d);
    const StreamPlan streams = assign_streams(d, order, 2 + static_cast<int>(seed % 3));
    MemoryPlanOptions o;
    o.op_stream = streams.stream;
    const MemoryPlan p = plan_memory(d, order, o);
    CHECK(check_plan(d, order, p, 64, streams.stream) == "");
    CHECK(p.arena_bytes >= p.lower_bound);
    // The same DAG planned as if it ran on one stream shares bytes across streams: the checker
    // must see it (this is what the stream-aware plan exists for).
    const MemoryPlan single = plan_memory(d, order);
    cross_stream_values += check_plan(d, order, single, 64, streams.stream) != "";
  }
  CHECK(cross_stream_values > 30);
}

TEST_CASE("independent branches on their own streams keep their own in-place reuse") {
  // Four equal chains from one input, joined at the end: each chain on its stream reuses its
  // two buffers; only the values read across streams (the chains' ends) stay whole-run.
  Dag d;
  const int x = add_value(d, 4096);
  d.graph_inputs = {x};
  std::vector<int> ends;
  for (int b = 0; b < 4; ++b) {
    int v = x;
    for (int i = 0; i < 6; ++i) v = add_op(d, {v}, 4096);
    ends.push_back(v);
  }
  const int y = add_op(d, ends, 4096, false);
  d.graph_outputs = {y};
  const std::vector<int> order = memory_aware_order(d);
  const StreamPlan streams = assign_streams(d, order, 4);
  MemoryPlanOptions o;
  o.op_stream = streams.stream;
  const MemoryPlan p = plan_memory(d, order, o);
  CHECK(check_plan(d, order, p, 64, streams.stream) == "");
  CHECK(p.arena_bytes <= 4 * 2 * 4096);
}

TEST_CASE("keep_in_sequence: the sequence's ops run in its order, the rest as the memory order has them") {
  // Random DAGs; every third op joins the sequence in op-index order (creation order, which the
  // DAG respects, as node ids do for a graph's collectives).
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    const Dag d = random_dag(300, seed);
    const std::vector<int> order = memory_aware_order(d);
    std::vector<int> sequence;
    for (int op = 0; op < d.num_ops(); op += 3) sequence.push_back(op);
    const std::vector<int> kept = keep_in_sequence(d, order, sequence);
    REQUIRE(kept.size() == order.size());
    CHECK(is_topological(d, kept));
    std::vector<int> seen;
    for (int op : kept)
      if (op % 3 == 0) seen.push_back(op);
    CHECK(seen == sequence);
    checked_plan(d, kept);
  }
  // Already in sequence: nothing moves.
  const Dag c = chain(10, 4096);
  const std::vector<int> order = memory_aware_order(c);
  CHECK(keep_in_sequence(c, order, {2, 5, 7}) == order);
}

TEST_CASE("assign_streams: ops that communicate get a stream of their own after the compute streams") {
  Dag d;
  const int x = add_value(d, 4096);
  d.graph_inputs = {x};
  const int a = add_op(d, {x}, 4096), b = add_op(d, {a}, 4096), c = add_op(d, {x}, 4096);
  const int e = add_op(d, {b, c}, 4096, false);
  d.graph_outputs = {e};
  // op 1 (b) communicates: stream 1 of 1 + 1, with events from a and to e.
  const std::vector<int> order = {0, 1, 2, 3};
  const StreamPlan s = assign_streams(d, order, 1, {0, 1, 0, 0});
  CHECK(s.num_streams == 2);
  CHECK(s.communication_stream == 1);
  CHECK(s.stream == std::vector<int>{0, 1, 0, 0});
  CHECK(s.events.size() == 2);
  CHECK(assign_streams(d, order, 2).communication_stream == -1);
}
