// libFuzzer target: the compiled-model file's loader (runtime/model_file.hpp) on any bytes. The
// fuzz build reads past the checksums (FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION), so mutated
// files reach the section, graph and plan readers behind them. A model that loads is run on zeros
// of its inputs' shapes when those are static and small, and of the shapes of each plan the file
// held (a few): a plan the loader let through must run, or be refused with an ir::Error; anything
// else (a crash, a sanitizer report, an internal error) is a finding.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>

#include "fuzz_run.hpp"
#include "runtime/model_file.hpp"

namespace {

// Small enough to run on (fuzz_run.hpp's bounds): static, small inputs, and values in bodies
// (which the evaluator allocates outside the arena) of modest sizes at these inputs' sizes, every
// symbol of theirs one an input has.
bool small_enough(const esg::ir::Graph& g, const std::vector<esg::ir::Shape>& shapes) {
  if (shapes.size() != g.inputs().size()) return false;
  int64_t total = 0;
  std::map<esg::ir::Dim, int64_t> sizes;  // symbol -> size, from the inputs
  for (size_t i = 0; i < shapes.size(); ++i) {
    const esg::ir::Shape& s = shapes[i];
    if (!s.is_static()) return false;
    const int64_t n = s.num_elements();
    if (n < 0 || n > (1 << 12)) return false;
    total += n;
    const esg::ir::Shape& declared = g.shape(g.inputs()[i]);
    if (declared.rank() != s.rank()) return false;
    for (size_t k = 0; k < s.rank(); ++k)
      if (esg::ir::dim_is_symbolic(declared[k])) sizes[declared[k]] = s[k];
  }
  if (total > (1 << 14)) return false;
  for (esg::ir::ValueId v = 0; v < g.values.size(); ++v) {
    if (g.values[v].region == 0) continue;
    int64_t n = 1;
    for (esg::ir::Dim d : g.shape(v)) {
      const auto known = sizes.find(d);
      const int64_t size = !esg::ir::dim_is_symbolic(d) ? d : known != sizes.end() ? known->second : -1;
      if (size < 0 || __builtin_mul_overflow(n, size, &n) || n > (1 << 16)) return false;
    }
  }
  return true;
}

// Runs on zeros of these input shapes, twice: into outputs of the plan's types (Model::output_shapes),
// and into outputs of the types the model's graph declares, as a caller of the C API that knows
// its model's signature passes them. A plan the loader let through must run, or be refused with
// an ir::Error.
void run_once(const esg::runtime::Model& m, const std::vector<esg::ir::Shape>& shapes) {
  const esg::ir::Graph& g = m.graph();
  std::vector<esg::eval::HostTensor> in;
  std::vector<esg::eval::TensorRef> in_refs;
  for (size_t i = 0; i < shapes.size(); ++i) in.emplace_back(g.values[g.inputs()[i]].dtype, shapes[i]);
  for (esg::eval::HostTensor& t : in) in_refs.push_back(t.ref());
  std::vector<esg::ir::Shape> out_shapes;
  esg::fuzz::refused_or_done("run a loaded model", [&] {
    out_shapes = m.output_shapes(shapes);  // a loaded plan, a binding, or a compile
    std::vector<esg::eval::HostTensor> out;
    std::vector<esg::eval::TensorRef> out_refs;
    for (size_t i = 0; i < out_shapes.size(); ++i) out.emplace_back(g.values[g.outputs()[i]].dtype, out_shapes[i]);
    for (esg::eval::HostTensor& t : out) out_refs.push_back(t.ref());
    m.run(in_refs, out_refs);
  });
  esg::fuzz::refused_or_done("run a loaded model into its graph's outputs", [&] {
    std::vector<esg::eval::HostTensor> out;
    std::vector<esg::eval::TensorRef> out_refs;
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      const esg::ir::Shape& declared = g.shape(g.outputs()[i]);
      const esg::ir::Shape& s = declared.is_static() || i >= out_shapes.size() ? declared : out_shapes[i];
      if (!s.is_static() || s.num_elements() > (1 << 16)) return;
      out.emplace_back(g.values[g.outputs()[i]].dtype, s);
    }
    for (esg::eval::HostTensor& t : out) out_refs.push_back(t.ref());
    m.run(in_refs, out_refs);
  });
}

// The input shapes to run: the graph's when static, and those of the plans the file held (an
// exact plan's own shapes, a symbolic plan's largest sizes), each once, a few at most.
void run_loaded(const esg::runtime::Model& m) {
  const esg::ir::Graph& g = m.graph();
  // A file does not hold a graph run in stages (refused on save); one that says so is not run here.
  if (m.staged() || esg::ir::has_sized_by_data(g)) return;
  std::vector<std::vector<esg::ir::Shape>> tries;
  auto add = [&](std::vector<esg::ir::Shape> shapes) {
    if (tries.size() < 4 && small_enough(g, shapes) && std::find(tries.begin(), tries.end(), shapes) == tries.end())
      tries.push_back(std::move(shapes));
  };
  std::vector<esg::ir::Shape> own;
  for (esg::ir::ValueId v : g.inputs()) own.push_back(g.shape(v));
  add(own);
  const esg::runtime::PlanCache::Saved plans = m.saved_plans();
  for (const auto& [shapes, compiled] : plans.exact) add(shapes);
  for (const auto& [key, plan] : plans.symbolic) {
    const esg::ir::Graph& largest = plan->largest_graph();
    std::vector<esg::ir::Shape> shapes;
    for (esg::ir::ValueId v : largest.inputs()) shapes.push_back(largest.shape(v));
    add(shapes);
  }
  for (const std::vector<esg::ir::Shape>& shapes : tries) run_once(m, shapes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  esg::runtime::LoadOptions o;
  o.run.threads = 1;
  o.run.max_loop_iterations = 64;  // a loop that spins is a refusal (ir::Error Limit), not a timeout
  // As fuzz_run.hpp: a large model is refused (ir::Error Limit), not run by the instrumented kernels.
  o.run.max_memory_bytes = int64_t{1} << 24;
  std::unique_ptr<esg::runtime::Model> m;
  if (esg::fuzz::refused_or_done("load", [&] {
        m = esg::runtime::load_model(data, size, o, [](const std::string& name) { return esg::backends::find(name); });
      }))
    run_loaded(*m);
  return 0;
}
