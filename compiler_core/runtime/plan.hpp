// The pipeline: a graph specialized to the sizes the options bind (the others stay symbolic),
// optimized, legalized and grouped for a backend, ordered, assigned to streams and planned into
// one arena, as a flat launch list bound to arena offsets and the caller's buffers; a symbolic
// plan is bound to each run's sizes (Plan::bind). Nothing here is specific to a backend: the
// backend's rules come through runtime::Backend, and the backend lowers the plan to what it runs.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "eval/host_tensor.hpp"
#include "ir/graph.hpp"
#include "schedule/format.hpp"
#include "schedule/memory_plan.hpp"
#include "schedule/streams.hpp"
#include "runtime/backend.hpp"
#include "runtime/collectives.hpp"
#include "runtime/compile_options.hpp"
#include "runtime/grouping.hpp"
#include "runtime/facts.hpp"

namespace esg::schedule {
struct GraphDag;
}  // namespace esg::schedule

namespace esg::runtime {

struct FormatPlan;

class Plan {
 public:
  // A plan for `input_shapes`. With `largest`, input_shapes may keep symbolic sizes: the plan is
  // then symbolic (passes, fusion, order, streams and formats decided once, for every size), its
  // memory planned for the sizes of `largest`, and bind() fixes it to a run's sizes. A graph
  // whose sizes such a plan cannot follow (a body, a size an `if` picks) is refused as
  // Unsupported.
  Plan(const ir::Graph& g, const std::vector<ir::Shape>& input_shapes, const CompileOptions& options,
       const std::vector<ir::Shape>* largest = nullptr);
  // Programs keep references into a plan (its graph, groups, launches): it never moves.
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  // Where a tensor lives during a run.
  struct Slot {
    enum Kind : uint8_t { Arena, Input, Output, Constant } kind;
    int64_t at;  // arena offset, input/output index, or node id of the constant; an absent optional input: Arena, -1
    ir::ValueId value;  // the value there (kNone: an absent optional input)
    schedule::Format format = {};  // how its elements lie there
  };
  struct Launch {
    ir::NodeId node;            // the op, or a fused group's last member; kNone: a reorder of in[0] into out[0]'s format
    int group;                  // the fused group it runs, or -1
    std::vector<Slot> in, out;  // operands (captures included) and results; a group's inputs and outputs
    int stream;
  };
  const ir::Graph& graph() const { return *graph_; }
  // The graph at the sizes its memory is planned for: a symbolic plan's, and each binding's, the
  // size class's largest; else graph(). Node and value ids are graph()'s.
  const ir::Graph& largest_graph() const { return decided_->sized ? *decided_->sized : *graph_; }
  bool symbolic() const { return decided_->sized != nullptr && !bound_; }
  bool bound() const { return bound_; }  // made by bind()
  // A symbolic plan fixed to the sizes of `input_shapes`: the same launches, groups, streams and
  // memory, with every value's shape inferred again for them (ir::reinfer, which checks them as
  // the builder did and throws ir::Error naming the op otherwise). nullptr when a value would
  // outgrow the bytes planned for it (sizes beyond the largest the plan was compiled for).
  std::unique_ptr<Plan> bind(const std::vector<ir::Shape>& input_shapes) const;
  const std::vector<Launch>& launches() const { return decided_->launches; }
  const std::vector<FusedGroup>& groups() const { return *groups_; }
  const std::vector<std::vector<int>>& waits() const { return decided_->waits; }  // per launch: launches of other streams first
  const std::vector<std::vector<int>>& stream_launches() const { return decided_->stream_launches; }  // per stream, in order
  int num_streams() const { return decided_->num_streams; }
  // The collectives' own stream (the last), or -1 when the graph has none.
  int communication_stream() const { return decided_->communication_stream; }
  // Its collectives, bound at its sizes the first time asked (runtime/collectives.hpp).
  const PlanCollectives& collectives() const;
  int64_t arena_bytes() const { return decided_->arena_bytes; }
  // Outputs that are inputs, constants or repeated outputs, copied once the outputs are filled.
  void fill_output_copies(const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs) const;

  // The passes, the launch list, streams, collectives, memory, inputs and outputs.
  void add_facts(Facts& f) const;
  // The launch list as Graphviz DOT: one box per kernel (a fused group lists its ops, with how
  // `program` runs it), one row per stream, edges where a kernel reads what another wrote.
  std::string to_dot(const Program& program) const;

 private:
  friend class PlanRecord;  // a plan's bytes in a compiled-model file, and the plan they load as
  Plan() = default;  // bind()'s copies, and plans read from a file
  // The constructor's last steps. The launch list: every op of `order` but the views, its
  // operands and results bound to where they live, and the events as launch indexes per stream.
  void bind_launch_list(const schedule::GraphDag& gd, const std::vector<int>& order, const FormatPlan& formats, const schedule::StreamPlan& streams,
                        const schedule::MemoryPlan& memory);
  // What a binding of a symbolic plan checks and resizes: only what varies.
  void note_varying();

  std::unique_ptr<ir::Graph> graph_;
  std::shared_ptr<const std::vector<FusedGroup>> groups_;  // with this plan's shapes (shared while they are the same)
  bool bound_ = false;
  mutable std::once_flag collectives_made_;
  mutable std::unique_ptr<const PlanCollectives> collectives_;
  // collectives_ once made: what every later call reads (call_once itself costs a run a few
  // thread-local accesses each time).
  mutable std::atomic<const PlanCollectives*> collectives_made_at_{nullptr};
  // What the pipeline decided, shared by a symbolic plan and every binding of it.
  struct Decided {
    std::unique_ptr<const ir::Graph> sized;  // a symbolic plan's graph at its largest sizes, which memory is planned for
    std::vector<ir::NodeId> symbolic_nodes;  // its nodes whose shapes a binding infers again (ir::reinfer)
    // The arena's values whose size varies, each with the most elements planned for it in its format.
    struct Varying {
      ir::ValueId value;
      schedule::Format format;
      int64_t planned;
    };
    std::vector<Varying> varying;
    bool varying_groups = false;  // a group's shape varies
    std::vector<Launch> launches;
    std::vector<std::vector<int>> waits;            // per launch: launches of other streams it waits for
    std::vector<std::vector<int>> stream_launches;  // per stream: its launches in order
    // What the streams and the memory plan came to (the plans themselves are the constructor's).
    int num_streams = 1;
    int communication_stream = -1;  // -1: none
    int64_t events = 0;
    int64_t lower_bound_bytes = 0, no_reuse_bytes = 0, in_place_values = 0;
    std::vector<std::string> log;
    std::vector<std::pair<int, ir::ValueId>> output_copies;  // outputs to fill from another slot
    int64_t arena_bytes = 0;
    int reorders = 0;
    int views = 0;                    // views that are their input's bytes, not launched
    std::vector<ir::ValueId> viewed;  // per graph value: the value such a view shows, or kNone
  };
  std::shared_ptr<Decided> decided_;
};

}  // namespace esg::runtime
