// The Ascend backend's program: the launch list of runtime::Plan (the pipeline's order, streams,
// events and memory plan) bound to AscendCL objects.
//
// - One device allocation per model (aclrtMallocAlign32), laid out as the plan's arena, then
//   the inputs and outputs, the constants, each kernel's tiling struct and argument slots: every
//   address a launch uses is fixed when the model is built, so a run uploads nothing but inputs.
// - Each fused elementwise group runs as its generated Ascend C kernel, and so does each row
//   normalization (softmax, log_softmax, layer_norm, rms_norm: row_kernel_source.hpp); matmul,
//   conv2d, reductions, transpose, concat, … and softmax over another axis than the last through
//   CANN's operator library (aclnn); view
//   ops (reshape, squeeze, unsqueeze) as device-to-device copies. aclnn workspaces, when the
//   library asks for any, are a second allocation.
// - The plan's streams map one-to-one to ACL streams and its events to ACL events; a run is
//   inputs copied in, the launches (or, on a CANN that can capture streams, one replay of the
//   captured launches of every stream: model sinking), outputs copied out, and a
//   synchronization at the end only.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <functional>

#include "ascend/acl_library.hpp"
#include "ascend/aclnn_call.hpp"
#include "eval/host_tensor.hpp"
#include "runtime/backend.hpp"
#include "runtime/plan.hpp"

namespace esg::ascend {

// The fewest events a device of the supported series offers (Ascend 310P: 1023); beyond it
// events are reused (ESG_ASCEND_MAX_EVENTS lowers the limit, for tests).
constexpr int kMaxEvents = 1023;

struct DeviceOptions {
  bool simulated = false;  // the stand-in AscendCL and the host-built kernels (backend "ascend-sim")
  int device = 0;
  int ai_cores = 0;        // blocks per kernel at most; 0: the device's AI cores (aclGetDeviceCapability)
  bool host_fallback = false;  // launches with no device lowering run on the host (else refused)
};

// The host backend's program for the same plan, made only when some launch runs on the host.
using HostProgram = std::function<std::unique_ptr<runtime::Program>()>;

class DeviceProgram final : public runtime::Program {
 public:
  DeviceProgram(const runtime::Plan& plan, const DeviceOptions& options, const HostProgram& host);
  ~DeviceProgram();
  DeviceProgram(const DeviceProgram&) = delete;
  DeviceProgram& operator=(const DeviceProgram&) = delete;

  // Runs with host inputs and outputs (already checked against the plan). Runs of one program
  // take turns: they share its device memory.
  void run(const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs,
           std::vector<runtime::TraceEvent>* trace, const eval::Parallel* parallel,
           const eval::RunControl& control) const override;
  std::string describe_launch(size_t index) const override;
  std::string report() const override;
  void add_stats(runtime::Stats& s) const override;

 private:
  struct DeviceLaunch {
    enum Kind : uint8_t { Kernel, Aclnn, Copy, Host } kind;
    int kernel = -1;           // into kernels_
    int call = -1;             // into calls_
    int host = -1;             // into host_
    uint32_t blocks = 0;
    size_t args_at = 0, args_bytes = 0;  // in the device allocation
    size_t copy_from = 0, copy_to = 0, copy_bytes = 0;
    int stream = 0;
    std::vector<int> wait_events;   // into events_, before the launch
    std::vector<int> reset_events;  // after those waits: events free for reuse on this stream
    std::vector<int> record_events; // after the launch
  };
  struct LoadedKernel {
    acl::BinHandle binary = nullptr;
    acl::FuncHandle function = nullptr;
    std::string entry, path, ops;
    uint32_t tile = 0;  // elements per tile; a row kernel's chunk
    bool rows = false;  // a row kernel
    bool from_cache = false;
  };
  // A launch run on the host CPU (host_fallback): its operands copied off the device into
  // host tensors made at build, computed by the host backend's program, the results copied back.
  struct HostLaunch {
    size_t launch = 0;                     // into the plan's launch list
    std::vector<size_t> in_at, out_at;     // device offsets (SIZE_MAX: an absent optional input)
    std::vector<eval::HostTensor> in, out;
  };
  // Queues the launch list; aclnn ops use their executors planned at build, or plan anew. A
  // cancel stops the queueing (what was queued still runs; the caller waits for it).
  void enqueue_launches(bool planned, const eval::RunControl& control) const;
  // Waits for `stream`, then runs the launch on the host between two synchronous copies.
  void run_on_host(HostLaunch& h, acl::Stream stream, const eval::RunControl& control) const;
  // Maps the logical events (one per waited-for launch) to ACL events within the device's limit;
  // returns how many ACL events to create.
  int assign_events(int logical);
  uint32_t ai_cores_of_device() const;
  int streams_joins() const { return streams_count_ > 1 ? static_cast<int>(streams_count_) : 0; }
  void release() noexcept;
  uint8_t* at(size_t offset) const { return static_cast<uint8_t*>(memory_) + offset; }

  const runtime::Plan& plan_;
  DeviceOptions options_;
  std::shared_ptr<AclLibrary> acl_;
  bool device_set_ = false;
  acl::Context context_ = nullptr;
  std::vector<acl::Stream> streams_;
  std::vector<acl::Event> events_;      // a launch's record, waited on by other streams
  std::vector<acl::Event> join_events_; // [0]: the inputs are in; [s > 0]: stream s is done
  size_t streams_count_ = 1;
  void* memory_ = nullptr;
  size_t memory_bytes_ = 0;
  std::vector<size_t> input_at_, output_at_;
  std::vector<LoadedKernel> kernels_;
  std::vector<DeviceLaunch> launches_;
  std::shared_ptr<AclnnLibrary> aclnn_;
  std::vector<std::unique_ptr<AclnnCall>> calls_;
  std::vector<aclnn::Executor*> planned_;
  std::vector<uint64_t> planned_bytes_;
  void* workspace_ = nullptr;               // aclnn workspaces: per stream, ops of a stream share theirs
  std::vector<size_t> workspace_at_;
  std::vector<uint64_t> workspace_bytes_;
  mutable std::vector<HostLaunch> host_;  // their staging tensors are written by runs, which take turns
  std::unique_ptr<runtime::Program> host_program_;
  std::map<std::string, std::pair<int, std::string>> host_ops_;  // for the report: what runs on the host, how many, why
  mutable bool ran_ = false;
  acl::ModelRI captured_ = nullptr;
  std::string capture_note_;
  mutable std::mutex run_mu_;
};

}  // namespace esg::ascend
