// The Ascend backend's program: the launch list of runtime::Plan (the pipeline's order, streams,
// events and memory plan) bound to AscendCL objects.
//
// - One device allocation per model (aclrtMallocAlign32), laid out as the plan's arena, then
//   the inputs and outputs, the constants and each kernel's tiling struct: every address a
//   launch uses is fixed when the model is built, so a run uploads nothing but its inputs (and
//   a binding's tilings when another binding of its class ran last).
// - Kernels are loaded for the vector cores (aclrtBinaryLoadFromFile, the .json beside each
//   binary naming them) and launched with aclrtLaunchKernelWithConfig, their arguments
//   (addresses) appended on the host right before each launch.
// - Each fused elementwise group runs as its generated Ascend C kernel, and so does each row
//   normalization (softmax, log_softmax, layer_norm, rms_norm: row_kernel_source.hpp); matmul,
//   conv2d, reductions, transpose, concat, … and softmax over another axis than the last through
//   CANN's operator library (aclnn); view
//   ops (reshape, squeeze, unsqueeze) as device-to-device copies. aclnn workspaces, when the
//   library asks for any, are a second allocation.
// - The plan's streams map one-to-one to ACL streams and its events to ACL events; a run is
//   inputs copied in (through page-locked host memory), the launches (or, on a CANN that can capture streams, one replay of the
//   captured launches of every stream: model sinking), outputs copied out, and a
//   synchronization at the end only.
// - Symbolic sizes: the bindings of one size class whose launches lower alike share one device
//   (the allocation laid out for the class's largest sizes, streams, events, kernels); each
//   binding has its own tilings, written to the device before its run when another binding ran
//   last. With no aclnn op, the class has one captured model, replayed at every size in it; an
//   aclnn op takes its sizes when it is planned, so each binding then captures its own.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <functional>

#include "ascend/acl_library.hpp"
#include "ascend/aclnn_call.hpp"
#include "ascend/hccl_call.hpp"
#include "ascend/hccl_library.hpp"
#include "ascend/launch_lowering.hpp"
#include "eval/host_tensor.hpp"
#include "runtime/backend.hpp"
#include "runtime/host_execution.hpp"
#include "runtime/plan.hpp"

namespace esg::ascend {

// The fewest events a device of the supported series offers (Ascend 310P: 1023); beyond it
// events are reused (ESG_ASCEND_MAX_EVENTS lowers the limit, for tests).
constexpr int kMaxEvents = 1023;

// CANN's rule for carving one allocation into buffers: each starts 64-byte aligned and keeps 32
// bytes free after its end (its size rounded up to 32, plus 32). The arena's buffers (through
// runtime::Backend::buffer_slack) and the allocation's other segments keep it.
constexpr int64_t kSegmentSlack = 32;

struct DeviceOptions {
  bool simulated = false;  // the stand-in AscendCL and the host-built kernels (backend "ascend-sim")
  int device = 0;
  int ai_cores = 0;        // blocks per kernel at most; 0: the device's vector cores (aclGetDeviceCapability)
  bool host_fallback = false;  // launches with no device lowering run on the host (else refused)
  // The compile option: device memory (the allocation, constants included, and the aclnn
  // workspaces) beyond it is a LimitError before anything is allocated; 0: no limit.
  int64_t max_memory_bytes = 0;
  std::string kernel_cache;  // where built kernels are kept (kernel_cache_dir)
};

// The host backend's program for the same plan, made only when some launch runs on the host.
using HostProgram = std::function<std::unique_ptr<runtime::HostLaunches>()>;

class DeviceProgram final : public runtime::Program {
 public:
  // `donor`: the program of another binding of the same size class (runtime::Backend::lower),
  // whose device this one shares when their launches lower alike.
  // `loaded`: the artifacts of this plan's program read from a compiled-model file (its kernel
  // binaries), used instead of building them.
  DeviceProgram(const runtime::Plan& plan, const DeviceOptions& options, const HostProgram& host, const DeviceProgram* donor,
                const runtime::Artifacts* loaded = nullptr);
  ~DeviceProgram();
  DeviceProgram(const DeviceProgram&) = delete;
  DeviceProgram& operator=(const DeviceProgram&) = delete;

  // Runs with host inputs and outputs (already checked against the plan). Runs of the programs
  // of one device take turns: they share its memory.
  void run(const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs,
           std::vector<runtime::TraceEvent>* trace, const eval::Parallel* parallel,
           const eval::RunControl& control) const override;
  std::string describe_launch(size_t index) const override;
  // Its kernel binaries, "kernel/<entry>" each, for a compiled-model file.
  const runtime::Artifacts* artifacts() const override { return &artifacts_; }
  void add_facts(runtime::Facts& f) const override;

 private:
  struct DeviceLaunch {
    enum Kind : uint8_t { Kernel, Aclnn, Copy, Collective, Host } kind;
    int kernel = -1;           // into kernels
    int call = -1;             // into calls_ (aclnn), or hccl_calls_ (a collective)
    int host = -1;             // into host_
    uint32_t blocks = 0;       // at the class's largest sizes; a smaller size leaves some idle
    std::vector<size_t> operands;  // a kernel's arguments but the last: its operands' device offsets
    std::vector<size_t> constants; // an aclnn call's own constants (AclnnCall::constants), uploaded with the graph's
    size_t tiling_at = 0, tiling_bytes = 0;  // in the tilings (Device::tilings_at on): a kernel's last argument
    size_t copy_from = 0, copy_to = 0, copy_bytes = 0;  // copy_bytes: at the largest sizes
    int stream = 0;
    std::vector<int> wait_events;   // into events, before the launch
    std::vector<int> reset_events;  // after those waits: events free for reuse on this stream
    std::vector<int> record_events; // after the launch
  };
  struct LoadedKernel {
    acl::BinHandle binary = nullptr;
    acl::FuncHandle function = nullptr;
    std::string entry, path, ops;  // path: the built binary ("" when loaded from a compiled-model file)
    ir::Blob image;                // the binary's bytes, which a compiled-model file keeps
    uint32_t tile = 0;  // elements per tile; a row kernel's chunk
    bool rows = false;  // a row kernel
    bool from_cache = false;
  };
  // What the bindings of a size class share (one per program without symbolic sizes): made by
  // the first, released with the last.
  struct Device {
    Device() = default;
    Device(const Device&) = delete;
    Device& operator=(const Device&) = delete;
    ~Device();
    uint8_t* at(size_t offset) const { return static_cast<uint8_t*>(memory) + offset; }
    size_t offset(const runtime::Plan::Slot& s) const;  // where a slot lies in the allocation

    std::shared_ptr<AclLibrary> acl;
    int device = 0;
    std::string soc;  // aclrtGetSocName's
    bool device_set = false;
    acl::Context context = nullptr;
    std::vector<acl::Stream> streams;
    std::vector<acl::Event> events;       // a launch's record, waited on by other streams
    std::vector<acl::Event> join_events;  // [0]: the inputs are in; [s > 0]: stream s is done
    bool sync_events = false;             // made for capture (ACL_EVENT_SYNC)
    void* memory = nullptr;
    size_t memory_bytes = 0;
    size_t tilings_at = 0, tilings_bytes = 0;  // the region each binding writes its tilings to
    std::vector<size_t> input_at, output_at;
    // Page-locked host memory (aclrtMallocHost) that a run's asynchronous copies go through:
    // CANN 8.0-8.1 call an aclrtMemcpyAsync from pageable memory an error, 8.3 on make it
    // synchronous, and 8.0-8.3 want 64-byte-aligned host addresses. Laid out at the largest
    // sizes: the inputs, the outputs, then the tilings.
    void* staging = nullptr;
    size_t staging_bytes = 0;
    std::vector<size_t> staged_input_at, staged_output_at;
    size_t staged_tilings_at = 0;
    uint8_t* staged(size_t offset) const { return static_cast<uint8_t*>(staging) + offset; }
    std::map<int64_t, size_t> constant_at;  // by node id
    std::vector<LoadedKernel> kernels;
    std::vector<DeviceLaunch> launches;  // calls and host launches indexed per binding, in launch order
    acl::ModelRI captured = nullptr;     // the class's one captured model: only kernels and copies
    std::string capture_note;
    mutable std::mutex run_mu;
    mutable uint64_t tilings_of = 0;     // the binding whose tilings the device holds (0: none)
  };
  // The devices of one size class, by how their bindings lower (each launch's kind and kernel):
  // a binding that lowers otherwise (at N = 1) has one of its own, and the class's other sizes
  // keep sharing theirs.
  struct ClassDevices {
    std::mutex mu;
    std::map<std::string, std::weak_ptr<Device>> by_signature;
  };
  // A launch run on the host CPU (host_fallback): its operands copied off the device into
  // host tensors made at build, computed by the host backend's program, the results copied back.
  struct HostLaunch {
    size_t launch = 0;                     // into the plan's launch list
    std::vector<size_t> in_at, out_at;     // device offsets (SIZE_MAX: an absent optional input)
    std::vector<eval::HostTensor> in, out;
  };
  // The device for `lowered` launches: the SoC checked, kernels built and loaded, the allocation
  // laid out for the class's largest sizes, streams and events made (the maker captures it).
  std::shared_ptr<Device> make_device(const std::vector<LaunchLowering>& lowered, const runtime::Artifacts* loaded);
  // make_device's steps. The kernels of `lowered`, one per entry: taken from `loaded` (a
  // compiled-model file's, with no compiler looked for), else built (or found in the cache).
  void build_kernels(Device& d, const std::vector<LaunchLowering>& lowered, const runtime::Artifacts* loaded) const;
  // The allocation's layout and the device's launch list: what is uploaded once (the constants,
  // `image` from `image_at` on) and the launches run on the host or by HCCL, which no capture takes.
  struct Layout {
    std::vector<uint8_t> image;
    size_t image_at = 0;
    int hosts = 0, collectives = 0;
  };
  Layout lay_out(Device& d, const std::vector<LaunchLowering>& lowered) const;
  // The plan's waits as events recorded and waited on; returns how many the device makes.
  int order_events(Device& d) const;
  // The device's resources: context, streams, events, the allocation, the page-locked staging,
  // the constants uploaded, the kernels loaded; and why a run replays rather than captures.
  void acquire(Device& d, const Layout& layout, int num_events) const;
  // This binding's tilings, over the device's block counts.
  std::vector<uint8_t> tilings_for() const;
  // Queues the launch list; aclnn ops use their executors planned at build, or plan anew. A
  // cancel stops the queueing (what was queued still runs; the caller waits for it).
  void enqueue_launches(bool planned, const eval::RunControl& control) const;
  // A collective bound to this binding's sizes and addresses, and its group's communicator.
  struct BoundCollective {
    HcclCall call;
    size_t in_at, out_at;  // device offsets; in_at SIZE_MAX for a recv
    const eval::Collective* group;  // the plan's, whose communicator HCCL's is made over
    hccl::Comm comm;                // made at the first run (runs take turns under run_mu)
  };
  void queue_collective(const BoundCollective& b, acl::Stream stream) const;
  // Waits for `stream`, then runs the launch on the host between two synchronous copies.
  void run_on_host(HostLaunch& h, acl::Stream stream, const eval::RunControl& control) const;
  // Maps the logical events (one per waited-for launch) of `launches` to ACL events within the
  // device's limit; returns how many ACL events to create.
  static int assign_events(std::vector<DeviceLaunch>& launches, int logical, size_t streams);
  static uint32_t vector_cores_of_device(const AclLibrary& acl, int device);
  // Throws ir::Error(Limit) naming `what` when `bytes` exceed the option max_memory_bytes.
  void check_memory(size_t bytes, const char* what) const;
  // Captures the launch list into `*model` (stream 0 begins, the others join); false with
  // capture_note set when the AscendCL or the plan does not allow it.
  bool capture(acl::ModelRI* model, std::string* note) const;
  void release() noexcept;  // this binding's part; the device goes with its last binding

  const runtime::Plan& plan_;
  DeviceOptions options_;
  runtime::Artifacts artifacts_;
  uint64_t id_;  // names this binding's tilings on the device
  std::shared_ptr<ClassDevices> class_;
  std::shared_ptr<Device> device_;
  std::vector<uint8_t> tilings_;
  std::shared_ptr<AclnnLibrary> aclnn_;
  std::vector<std::unique_ptr<AclnnCall>> calls_;
  std::shared_ptr<HcclLibrary> hccl_;
  mutable std::vector<BoundCollective> hccl_calls_;
  std::vector<aclnn::Executor*> planned_;
  mutable std::vector<bool> queued_;  // by call: its planned executor went to a run or a capture, which frees it
  std::vector<uint64_t> planned_bytes_;
  void* workspace_ = nullptr;               // aclnn workspaces: per stream, ops of a stream share theirs
  std::vector<size_t> workspace_at_;
  std::vector<uint64_t> workspace_bytes_;
  mutable std::vector<HostLaunch> host_;  // their staging tensors are written by runs, which take turns
  std::unique_ptr<runtime::HostLaunches> host_program_;
  std::map<std::string, std::pair<int, std::string>> host_ops_;  // for the report: what runs on the host, how many, why
  mutable bool ran_ = false;
  acl::ModelRI captured_ = nullptr;  // this binding's, when the class has none (aclnn ops)
  std::string capture_note_;
};

}  // namespace esg::ascend
