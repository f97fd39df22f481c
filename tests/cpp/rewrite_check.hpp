// Checking a graph rewrite in the core suites (passes, Ascend legalizations): counting the ops it
// leaves and comparing the values the graph computes before and after with the reference evaluator.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "eval/evaluate.hpp"
#include "ir/graph.hpp"
#include "ir/verify.hpp"

namespace esg::test {

// How many nodes of `g` run `op`.
inline size_t count(const ir::Graph& g, const char* op) {
  size_t n = 0;
  for (const ir::Node& node : g.nodes) n += std::strcmp(node.op->name, op) == 0;
  return n;
}

// The graph's outputs on one fixed input (every input gets the same deterministic data).
inline std::vector<eval::HostTensor> outputs(const ir::Graph& g) {
  std::vector<eval::HostTensor> in;
  for (ir::ValueId v : g.inputs()) {
    eval::HostTensor t(g.values[v].dtype, g.shape(v));
    for (int64_t i = 0; i < t.size(); ++i) eval::store_f(t, i, std::sin(static_cast<double>(i)) * 3);
    in.push_back(t);
  }
  return eval::evaluate(g, in);
}

// `b` verifies and computes exactly what `a` does.
inline void same_values(const ir::Graph& a, const ir::Graph& b) {
  ir::verify(b);
  const auto x = outputs(a), y = outputs(b);
  REQUIRE(x.size() == y.size());
  for (size_t k = 0; k < x.size(); ++k) {
    CHECK(x[k].shape == y[k].shape);
    CHECK(x[k].bytes == y[k].bytes);
  }
}

// The same values but for rounding (a rewrite that rounds an intermediate once more).
inline void close_values(const ir::Graph& a, const ir::Graph& b, double epsilon) {
  ir::verify(b);
  const auto want = outputs(a), got = outputs(b);
  REQUIRE(want.size() == got.size());
  for (size_t k = 0; k < want.size(); ++k) {
    CHECK(got[k].shape == want[k].shape);
    REQUIRE(got[k].size() == want[k].size());
    for (int64_t i = 0; i < want[k].size(); ++i) CHECK(eval::load_f(got[k], i) == doctest::Approx(eval::load_f(want[k], i)).epsilon(epsilon));
  }
}

}  // namespace esg::test
