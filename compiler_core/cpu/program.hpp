// The CPU backend's program: the plan's launch list run as it is, over one host arena per
// concurrent run. Each launch is a oneDNN convolution primitive (alone, or with its group as
// post-ops: conv_primitive.hpp), a fused group's kernel (fused_kernel.hpp), a fast kernel of
// this folder, control flow, or the reference evaluator's kernel.
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cpu/conv_primitive.hpp"
#include "cpu/fused_kernel.hpp"
#include "cpu/integer_matmul.hpp"
#include "cpu/matmul_primitive.hpp"
#include "cpu/reorder.hpp"
#include "eval/kernels.hpp"
#include "runtime/backend.hpp"
#include "runtime/host_execution.hpp"
#include "runtime/plan.hpp"

namespace esg::cpu {

class Program final : public runtime::Program, public runtime::HostLaunches {
 public:
  // With a `donor` (the program of another binding of the same symbolic plan), a launch whose
  // operands have the same sizes there shares its kernel, primitives and all, and every binding
  // shares the donor's arenas. `loaded`: the artifacts of this plan's program read from a
  // compiled-model file (its packed constant weights), taken instead of packing them again.
  Program(const runtime::Plan& plan, const runtime::CompileOptions& options, const Program* donor = nullptr,
          const runtime::Artifacts* loaded = nullptr);
  void run(const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs,
           std::vector<runtime::TraceEvent>* trace, const eval::Parallel* parallel,
           const eval::RunControl& control) const override;
  std::unique_ptr<runtime::PreparedRun> prepare(std::vector<eval::TensorRef> inputs, std::vector<eval::TensorRef> outputs) const override;
  void run_launch(size_t index, const std::vector<const eval::TensorRef*>& in, const std::vector<const eval::TensorRef*>& out,
                  const eval::RunControl& control) const override;
  std::string describe_launch(size_t index) const override;
  void add_facts(runtime::Facts& f) const override;
  const runtime::Artifacts* artifacts() const override { return &artifacts_; }

 private:
  using Slot = runtime::Plan::Slot;
  class Prepared;
  // A launch's operand refs: kept by each thread between launches so a run allocates nothing,
  // or a prepared run's, one per launch, made once.
  struct LaunchScratch {
    std::vector<eval::TensorRef> in_refs, out_refs;
    std::vector<const eval::TensorRef*> in_ptrs, out_ptrs;
  };
  eval::TensorRef ref(const Slot& s, uint8_t* arena, const std::vector<eval::TensorRef>& in,
                      const std::vector<eval::TensorRef>& out) const;
  // Launch `index`'s operands in `scratch`: the arena at `arena`, the run's inputs and outputs.
  void operands(size_t index, uint8_t* arena, const std::vector<eval::TensorRef>& in, const std::vector<eval::TensorRef>& out,
                LaunchScratch& scratch) const;
  // Runs launch `index` on the operands in `scratch`.
  void launch(size_t index, uint8_t* arena, const std::vector<eval::TensorRef>& in, const std::vector<eval::TensorRef>& out,
              const eval::Parallel* parallel, const eval::RunControl& control, LaunchScratch& scratch) const;
  // The launch list on the arena at `arena`: each launch's operands resolved as it comes, or
  // taken from `prepared` (one per launch).
  void execute(uint8_t* arena, const std::vector<eval::TensorRef>& in, const std::vector<eval::TensorRef>& out,
               std::vector<runtime::TraceEvent>* trace, const eval::Parallel* parallel, const eval::RunControl& control,
               std::vector<LaunchScratch>* prepared) const;
  int64_t arena_size() const;  // the bytes of a run's arena (plan and working memory), aligned within
  // Runs launch `index` on its operands; `in` may hold nullptr for an absent optional input.
  // `working`: the launch's stream's working memory.
  void compute(size_t index, std::vector<const eval::TensorRef*>& in, const std::vector<const eval::TensorRef*>& out,
               const eval::Parallel* parallel, const eval::RunControl& control, uint8_t* working) const;
  // A lone matmul on its primitive, its rows in shares over `parallel`.
  void multiply(size_t index, const std::vector<const eval::TensorRef*>& in, const std::vector<const eval::TensorRef*>& out,
                const eval::Parallel* parallel) const;
  // A convolution launch, or a group it heads: its primitive, then the group's rows unless the
  // primitive ran them as post-ops.
  void convolve(size_t index, const std::vector<const eval::TensorRef*>& in, const std::vector<const eval::TensorRef*>& out,
                const eval::Parallel* parallel, uint8_t* working) const;
  // The working memory of `stream`'s launches in an arena: after the plan's bytes, one slice
  // per stream (launches of a stream run one at a time), as large as its largest launch needs.
  uint8_t* working(uint8_t* arena, int stream) const;
  // Whether launch `index` runs on the reference evaluator's kernel (no kernel of this backend's).
  bool on_reference(size_t index) const;

  const runtime::Plan& plan_;
  std::vector<std::shared_ptr<const FusedKernel>> fused_;  // per group of the plan (shared like bound_)
  // What a launch runs, bound once: one entry per launch, so a run reads one array.
  struct Bound {
    eval::Kernel fast = nullptr;  // its fast kernel, or nullptr (a group, a reorder, or the reference)
    bool flat = false;            // elementwise in a blocked format, over its operands' physical shapes
    bool padded = false;          // writes a blocked result whose padding channels need zeros
    // A convolution, alone or heading the launch's group, as a oneDNN primitive (else im2col,
    // for the reason in the launch's Fallbacks).
    std::unique_ptr<const ConvPrimitive> conv;
    eval::Kernel conv_head_im2col = nullptr;  // a group's convolution head without a primitive
    std::unique_ptr<const Reorder> reorder;   // a reorder launch
    // A product with constant weights, alone (its rows in `matmul_pieces` shares over the pool,
    // or its columns) or heading the launch's group (its blocks of rows), on oneDNN's matmul
    // primitive.
    std::unique_ptr<const MatmulPrimitive> matmul;
    std::unique_ptr<const IntegerMatmul> integer_matmul;  // a matmul_integer with constant weights
    bool conv_whole_group = false;  // the primitive's post-ops compute the group
    int conv_x = 0, conv_w = 1, conv_bias = 2, conv_residual = -1;  // its operands, as positions in the launch's inputs
    int matmul_pieces = 1;
  };
  std::vector<std::shared_ptr<const Bound>> bound_;  // shared with the programs of other sizes where they agree
  // Why a launch's convolution runs on im2col, its product with constant weights on sgemm
  // (oneDNN's reasons), or its matmul_integer on the reference kernel, for the report: beside
  // bound_, which a run reads, not in it.
  struct Fallbacks {
    std::string conv, matmul, integer_matmul;
  };
  std::vector<Fallbacks> fallbacks_;
  // The launch's kernel bound anew for this plan's sizes; `before`, its binding at other sizes
  // (the donor's), whose constant weights it shares.
  std::shared_ptr<const Bound> bind_launch(size_t index, const runtime::CompileOptions& options, Fallbacks& why, const Bound* before,
                                           const runtime::Artifacts* loaded);
  // A convolution-headed group: one primitive with the group as its post-ops when they express
  // it, else the primitive and then the group's rows over its result; `like` as ConvPrimitive::make's.
  static void bind_conv_group(Bound& b, std::string& why_not, const ir::Graph& g, const runtime::Plan::Launch& l,
                              const runtime::FusedGroup& grp, int threads, bool bf16, const PackWeights& pack, const ConvPrimitive* like);
  int64_t working_at_ = 0, working_bytes_ = 0;
  // Constant weights packed into primitives' layouts, by launch and piece: what a compiled-model
  // file keeps of this program; and how many were packed here, taken from a file, and taken
  // from another launch that packed the same.
  runtime::Artifacts artifacts_;
  int64_t weights_packed_ = 0, weights_loaded_ = 0, weights_shared_ = 0;
  std::map<std::pair<const void*, std::string>, ir::Blob> packed_from_;  // the packed weights by what they were made of
  // Arenas of finished runs, so concurrent runs each have one; shared by the programs of one
  // symbolic plan's sizes, each run taking one at least as large as it needs.
  struct Arena {
    explicit Arena(int64_t size) : memory(new uint8_t[static_cast<size_t>(size)]), bytes(size) {}
    std::unique_ptr<uint8_t[]> memory;
    int64_t bytes;
  };
  struct Arenas {
    ~Arenas() { delete hot.load(); }
    std::atomic<Arena*> hot{nullptr};  // the last run's, taken and given back without the lock
    std::mutex mu;
    std::vector<std::unique_ptr<Arena>> free;
  };
  std::shared_ptr<Arenas> arenas_;
};

}  // namespace esg::cpu
