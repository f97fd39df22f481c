// What every fuzzer does with a graph it made: checks it, prints it, round-trips it through the
// file format, and compiles and runs it on the CPU when that stays small (on zeros, or on the
// values the fuzzer fills in). An ir::Error is the expected answer to bad input; an internal
// error or anything else is a finding (abort).
#pragma once
#include <cstdlib>
#include <cstdio>
#include <functional>
#include <memory>
#include <vector>

#include "backends/registry.hpp"
#include "eval/host_tensor.hpp"
#include "ir/cut.hpp"
#include "ir/error.hpp"
#include "ir/graph.hpp"
#include "ir/printer.hpp"
#include "ir/serialize.hpp"
#include "ir/verify.hpp"
#include "runtime/model.hpp"

namespace esg::fuzz {

[[noreturn]] inline void finding(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz finding: %s: %s\n", what, detail.c_str());
  std::abort();
}

// Runs `f`; ir::Error other than Internal is a refusal, fine; the rest is a finding.
template <class F>
bool refused_or_done(const char* what, F&& f) {
  try {
    f();
    return true;
  } catch (const ir::Error& e) {
    if (e.code() == ir::ErrorCode::Internal) finding(what, e.what());
    return false;
  }
}

// Small enough to run on: small inputs, and values in bodies (which the evaluator allocates
// outside the arena, once per loop iteration) of known, modest sizes. Loops run capped.
inline bool small_enough_to_run(const ir::Graph& g) {
  int64_t total = 0;
  for (ir::ValueId v : g.inputs()) {
    const int64_t n = g.shape(v).num_elements();
    if (n < 0 || n > (1 << 12)) return false;
    total += n;
  }
  for (ir::ValueId v = 0; v < g.values.size(); ++v) {
    if (g.values[v].region == 0) continue;
    const int64_t n = g.shape(v).num_elements();
    if (n < 0 || n > (1 << 16)) return false;
  }
  return total <= (1 << 14);
}

// Fills input `index` of a run (its dtype and shape set, its bytes zeros).
using InputFill = std::function<void(size_t index, eval::HostTensor& input)>;

inline void exercise(const ir::Graph& g, const InputFill& fill = nullptr) {
  refused_or_done("verify", [&] { ir::verify(g); });
  (void)ir::to_text(g);
  const std::vector<uint8_t> bytes = ir::serialize(g);
  std::unique_ptr<ir::Graph> again;
  if (!refused_or_done("reload", [&] { again = ir::deserialize(bytes.data(), bytes.size()); }))
    finding("reload", "a graph the builder made does not load back from its own file");
  if (ir::to_text(*again) != ir::to_text(g)) finding("reload", "the graph changed through its file");
  if (!small_enough_to_run(g)) return;
  refused_or_done("compile and run", [&] {
    runtime::CompileOptions o;
    o.backend = backends::find("cpu");
    o.threads = 1;
    o.max_loop_iterations = 64;  // a loop that spins is a refusal (ir::Error Limit), not a timeout
    // A legitimately large graph is not run here (a refusal, ir::Error Limit): the instrumented
    // reference kernels take seconds over a few MiB (a softmax of 256 MiB passed the 20 s
    // timeout), and sizes read from computed values reach 2^40.
    o.max_memory_bytes = int64_t{1} << 24;
    runtime::Model m(std::make_unique<ir::Graph>(g), o);
    std::vector<ir::Shape> shapes;
    std::vector<eval::HostTensor> in, out;
    for (ir::ValueId v : g.inputs()) {
      in.emplace_back(g.values[v].dtype, g.shape(v)), shapes.push_back(g.shape(v));
      if (fill) fill(in.size() - 1, in.back());
    }
    const std::vector<ir::Shape> out_shapes = m.output_shapes(shapes);  // compiles the plan
    std::vector<eval::TensorRef> in_refs, out_refs;
    for (eval::HostTensor& t : in) in_refs.push_back(t.ref());
    // A model run in stages (an op sized by data) plans each stage, and checks its memory, as
    // the run reaches it: its outputs are allocated by the run, at the sizes it comes to.
    if (ir::has_sized_by_data(g)) {
      (void)m.run(in_refs);
      return;
    }
    for (size_t i = 0; i < out_shapes.size(); ++i) out.emplace_back(g.values[g.outputs()[i]].dtype, out_shapes[i]);
    for (eval::HostTensor& t : out) out_refs.push_back(t.ref());
    m.run(in_refs, out_refs);
  });
}

}  // namespace esg::fuzz
