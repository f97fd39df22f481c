// A compiled model: a graph specialized to concrete shapes, ordered, assigned to streams and
// planned into one arena, as a flat launch list bound to arena offsets and the caller's buffers.
// A run walks the list; nothing is looked up or allocated per op.
//
// Graphs with symbolic dimensions compile once per set of input shapes: bound in the options,
// or on the first run with new shapes (each set of shapes is its own plan, kept).
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "eval/host_tensor.hpp"
#include "eval/kernels.hpp"
#include "ir/graph.hpp"
#include "plan/memory_plan.hpp"
#include "plan/streams.hpp"
#include "runtime/fusion.hpp"
#include "runtime/stats.hpp"
#include "runtime/thread_pool.hpp"

namespace esg::ascend {
class DeviceProgram;
}

namespace esg::runtime {

struct CompileOptions {
  int streams = 1;             // 1..16; each on its own thread of the pool when free (threads >= streams)
  int threads = 0;             // 0: the machine's cores; at most 256; large elementwise kernels split over them
  bool fusion = true;          // fuse connected elementwise ops into one tiled kernel
  bool memory_reuse = true;
  bool verify_each_pass = false;
  std::vector<std::pair<std::string, int64_t>> symbols;  // sizes of symbolic dimensions
  // Where the model runs: the host CPU, an Ascend NPU through AscendCL, or the simulated
  // Ascend device (the same backend code against a stand-in AscendCL).
  enum class Backend { Cpu, Ascend, AscendSim } backend = Backend::Cpu;
  int device = 0;    // the Ascend device id
  int ai_cores = 0;  // Ascend: blocks per kernel at most (0: the device's default)
  bool host_fallback = false;  // Ascend: ops with no device lowering run on the host (else refused)
};

// One plan: the graph at concrete shapes and everything needed to run it.
// One kernel of a profiled run: what ran, on which stream, when (microseconds from the start).
struct TraceEvent {
  std::string name;
  int stream;
  double start_us, duration_us;
};

class Plan {
 public:
  Plan(const ir::Graph& g, const std::vector<ir::Shape>& input_shapes, const CompileOptions& options,
       const GroupingOptions& grouping = {});
  // Runs with the caller's inputs and outputs (already checked against the plan's types); with
  // `trace`, also records every kernel's time. Kernels that split their work use `parallel`.
  void run(const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs,
           std::vector<TraceEvent>* trace = nullptr, const eval::Parallel* parallel = nullptr) const;
  std::string report() const;
  void add_stats(Stats& s) const;  // the launch list's, memory's and streams' numbers
  // The launch list as Graphviz DOT: one box per kernel (a fused group lists its ops), one row
  // per stream, edges where a kernel reads what another wrote, dashed for events.
  std::string to_dot() const;
  const ir::Graph& graph() const { return *graph_; }

  // The launch list, for a device backend to translate (the CPU runs it as it is).
  // Where a tensor lives during a run.
  struct Slot {
    enum Kind : uint8_t { Arena, Input, Output, Constant } kind;
    int64_t at;  // arena offset, input/output index, or node id of the constant; an absent optional input: Arena, -1
  };
  struct Launch {
    ir::NodeId node;            // the op, or a fused group's last member
    int group;                  // the fused group it runs, or -1
    eval::Kernel fast;          // the CPU backend's kernel for it, or nullptr (reference)
    std::vector<Slot> in, out;  // operands (captures included) and results; a group's inputs and outputs
    int stream;
  };
  const std::vector<Launch>& launches() const { return launches_; }
  const std::vector<FusedGroup>& groups() const { return groups_; }
  const std::vector<std::vector<int>>& waits() const { return waits_; }  // per launch: launches of other streams first
  int num_streams() const { return streams_.num_streams; }
  int64_t arena_bytes() const { return arena_bytes_; }
  // Outputs that are inputs, constants or repeated outputs, copied once the outputs are filled.
  void fill_output_copies(const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs) const;

 private:
  eval::TensorRef ref(const Slot& s, ir::ValueId v, uint8_t* arena, const std::vector<eval::TensorRef>& in,
                      const std::vector<eval::TensorRef>& out) const;
  // A launch's operand refs, kept by each thread between launches so a run allocates nothing.
  struct LaunchScratch {
    std::vector<eval::TensorRef> in_refs, out_refs;
    std::vector<const eval::TensorRef*> in_ptrs, out_ptrs;
  };
  void launch(const Launch& l, uint8_t* arena, const std::vector<eval::TensorRef>& in, const std::vector<eval::TensorRef>& out,
              const eval::Parallel* parallel, LaunchScratch& scratch) const;

  std::unique_ptr<ir::Graph> graph_;
  std::vector<FusedGroup> groups_;
  std::vector<Launch> launches_;
  std::vector<std::vector<int>> waits_;            // per launch: launches of other streams it waits for
  std::vector<std::vector<int>> stream_launches_;  // per stream: its launches in order
  plan::MemoryPlan memory_;
  plan::StreamPlan streams_;
  std::vector<std::string> log_;
  std::vector<std::pair<int, ir::ValueId>> output_copies_;  // outputs to fill from another slot
  int64_t arena_bytes_ = 0;

  mutable std::mutex pool_mu_;  // arenas of finished runs, so concurrent runs each have one
  mutable std::vector<std::unique_ptr<uint8_t[]>> pool_;
};

class Model {
 public:
  Model(std::unique_ptr<ir::Graph> graph, CompileOptions options);
  ~Model();

  const ir::Graph& graph() const { return *graph_; }
  // Checks the inputs and outputs against the graph's types, then runs the plan for their shapes.
  void run(const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs,
           std::vector<TraceEvent>* trace = nullptr) const;
  // The same, writing the kernels' times as a Chrome trace (one row per stream; Perfetto and
  // chrome://tracing open it).
  void profile(const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs,
               const std::string& path) const;
  // The output shapes for these input shapes (compiling their plan if needed).
  std::vector<ir::Shape> output_shapes(const std::vector<ir::Shape>& input_shapes) const;
  std::string report() const;
  Stats stats() const;  // the plan compiled last (Stats::plans counts them all)
  std::string to_dot() const;  // of every plan compiled so far

 private:
  // A plan, and its device program when the backend is not the CPU.
  struct Compiled {
    std::unique_ptr<Plan> plan;
    std::unique_ptr<ascend::DeviceProgram> device;
  };
  const Compiled& plan_for(const std::vector<ir::Shape>& input_shapes) const;

  std::unique_ptr<ir::Graph> graph_;
  CompileOptions options_;
  mutable std::mutex mu_;
  mutable std::map<std::vector<std::vector<int64_t>>, Compiled> plans_;
  mutable const Compiled* latest_ = nullptr;
  std::unique_ptr<ThreadPool> pool_;  // none with one thread
};

}  // namespace esg::runtime
