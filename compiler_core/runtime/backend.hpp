// The one interface every backend implements (the CPU, Ascend, the simulated Ascend). The
// pipeline (plan.hpp) asks a backend for its legalizations and its grouping rules, builds the
// target-independent plan (order, streams, events, memory), and has the backend lower that plan
// to its launch list (a Program) and run it. The pipeline knows no backend's internals, and
// backends know each other only through this interface (Ascend's host fallback asks the host
// backend for a Program). Backends are registered in one table: backends/registry.hpp.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "eval/host_tensor.hpp"
#include "eval/kernels.hpp"
#include "eval/run_control.hpp"
#include "ir/graph.hpp"
#include "schedule/format.hpp"
#include "runtime/facts.hpp"
#include "runtime/grouping.hpp"

namespace esg::runtime {

class Plan;
struct CompileOptions;

// One kernel of a profiled run: what ran, on which stream, when (microseconds from the start).
struct TraceEvent {
  std::string name;
  int stream;
  double start_us, duration_us;
};

// An option a backend takes: an integer (a flag is 0 or 1) within [min, max].
struct BackendOption {
  const char* name;
  int64_t min, max, default_value;
  const char* doc;
};

// The options for the chosen backend, as the caller named them: opaque to the pipeline. A
// backend declares the options it takes (Backend::options); the compile refuses any other name
// and any value out of range, so an option of a newer backend fails loudly on an older one.
class BackendOptions {
 public:
  void set(std::string name, int64_t value);
  // "name=value,name=value" (the C options' backend_options string); spaces around are ignored.
  void parse(const std::string& text);
  const std::vector<std::pair<std::string, int64_t>>& values() const { return values_; }
  // The value set last for `name`, else its declared default (a backend reads only what it declares).
  int64_t get(const char* name, const std::vector<BackendOption>& declared) const;

 private:
  std::vector<std::pair<std::string, int64_t>> values_;
};

// The memory formats a backend's kernels want (schedule/format.hpp). Unset `format_of`: every value
// row-major, and the pipeline assigns nothing.
struct FormatRules {
  // The format its kernel for `n` (an op outside the elementwise ones) writes its results in,
  // and reads the inputs reads_in_format names in. A group `n` heads computes in it too, with
  // elementwise_any_format, when its members' operands allow.
  std::function<schedule::Format(const ir::Graph&, const ir::Node&)> format_of;
  // Whether its elementwise kernels (groups and single ops) compute in any format when their
  // operands of the result's shape share one and the others are single elements or one value
  // per channel ([N or 1, C, 1, 1], then read in that format too): a chain then stays in its
  // producer's format instead of returning to row-major. They broadcast over each operand's
  // Format::physical_shape.
  bool elementwise_any_format = false;
  // Whether its kernel for `n`, writing format_of's format, reads input `i` in that format too
  // (else row-major). Unset: the first input only. A convolution over a few channels reads its
  // images row-major (blocks would mostly pad them); a concatenation reads every input blocked.
  std::function<bool(const ir::Graph&, const ir::Node&, size_t i)> reads_in_format;
};

// What a backend's lowering made that a compiled-model file keeps, by key (the CPU: constant
// weights packed into its primitives' layouts), so that lowering a loaded plan makes it no more.
// A program fills it while it is lowered; a load hands it back to the lowering.
class Artifacts {
 public:
  ir::Blob find(const std::string& key) const {
    const auto it = blobs_.find(key);
    return it == blobs_.end() ? nullptr : it->second;
  }
  void add(const std::string& key, ir::Blob bytes) { blobs_[key] = std::move(bytes); }
  const std::map<std::string, ir::Blob>& all() const { return blobs_; }

 private:
  std::map<std::string, ir::Blob> blobs_;
};

// A program's runs on buffers fixed once (Model::prepare): what the backend can settle before
// the first of them is settled once. One run at a time (PreparedModelRun sees to it).
class PreparedRun {
 public:
  virtual ~PreparedRun() = default;
  virtual void run(const eval::Parallel* parallel, const eval::RunControl& control) = 0;
};

// A plan lowered to a backend's launch list, ready to run.
class Program {
 public:
  virtual ~Program() = default;
  // Runs with the caller's inputs and outputs (already checked against the plan); with `trace`,
  // also records every launch's time. Kernels that split their work use `parallel`. The run
  // checks `control` between launches and in every loop iteration.
  virtual void run(const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs,
                   std::vector<TraceEvent>* trace, const eval::Parallel* parallel, const eval::RunControl& control) const = 0;
  // Runs to come on these buffers (checked against the plan), the program outliving them. By
  // default each is a run(); a backend settles what it can once (the CPU's: an arena of the
  // prepared run's own and every launch's operands).
  virtual std::unique_ptr<PreparedRun> prepare(std::vector<eval::TensorRef> inputs, std::vector<eval::TensorRef> outputs) const;
  // How the backend runs launch `index`, a word or two for the DOT export ("fast", "aclnnMatMul").
  virtual std::string describe_launch(size_t index) const = 0;
  // What its lowering made that a compiled-model file keeps (nullptr: nothing).
  virtual const Artifacts* artifacts() const { return nullptr; }
  // The backend's part of the model's record of facts, its own keys beside the plan's.
  virtual void add_facts(Facts& f) const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  virtual std::vector<BackendOption> options() const { return {}; }
  // Refuses, with ir::Error(Unsupported) naming what is missing, compile options it cannot
  // honour (a precision); called when a model is compiled, before any plan.
  virtual void check(const CompileOptions& options) const = 0;
  // The graph restated with what the backend runs (its legalization passes), or nullptr when
  // it needs no rewrite. Runs after the target-independent passes, before grouping.
  virtual std::unique_ptr<ir::Graph> legalize(const ir::Graph& g) const = 0;
  // Which elementwise ops it wants fused, and how.
  virtual GroupingRules grouping(const CompileOptions& options) const = 0;
  // Bytes its arena keeps free after every buffer (schedule::MemoryPlanOptions::slack); none unless
  // it says so.
  virtual int64_t buffer_slack() const { return 0; }
  // The memory formats it wants (none but row-major unless it says so).
  virtual FormatRules formats(const CompileOptions&) const { return {}; }
  // Why it cannot run launch `index` of `plan` (empty: it can), from the same decision its
  // lowering, refusal messages and host fallback take (a tool or a test asks it per launch).
  virtual std::string cannot_run(const Plan& plan, size_t index) const = 0;
  // The plan as the backend's launch list; throws ir::Error(Unsupported) naming what it cannot
  // run (unless its options send that to the host). `donor`, when not null, is this backend's
  // program for another binding of the same symbolic plan (Plan::bind): the backend may share
  // what it bound for launches whose sizes agree (the CPU shares kernels and arenas; Ascend
  // shares its device allocation, kernels and, with no aclnn op, its captured model).
  // `loaded`, when not null, holds what a program of this plan made before (Program::artifacts,
  // read back from a compiled-model file): the backend takes what it can instead of making it.
  virtual std::unique_ptr<Program> lower(const Plan& plan, const CompileOptions& options, const Program* donor,
                                         const Artifacts* loaded) const = 0;

  // For the compiled-model file (model_file.hpp). What plans compiled with `options` assume of
  // the machine, as words: an architecture, then the features their kernels and formats were
  // chosen for ("x86-64 avx2"). "": nothing.
  virtual std::string target(const CompileOptions&) const { return ""; }
  // Why a model compiled for `target` (a target() of this backend, written anywhere) cannot run
  // here, naming what it needs and what this machine has; "" when it can.
  virtual std::string cannot_run_target(const std::string& target) const;
};

}  // namespace esg::runtime
