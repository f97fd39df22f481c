#include "ascend/device_program.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>

#include "ascend/aclnn_call.hpp"
#include "ascend/kernel_build.hpp"
#include "ascend/launch_lowering.hpp"
#include "ascend/row_kernel_source.hpp"
#include "ir/error.hpp"

namespace esg::ascend {
namespace {

using ir::Error;
using ir::ErrorCode;
using Slot = runtime::Plan::Slot;

constexpr size_t kAlign = plan::kArenaAlignment;

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

size_t value_bytes(const ir::Graph& g, ir::ValueId v) {
  return static_cast<size_t>(g.shape(v).num_elements()) * ir::dtype_size(g.values[v].dtype);
}

}  // namespace

DeviceProgram::DeviceProgram(const runtime::Plan& plan, const DeviceOptions& options, const HostProgram& host)
    : plan_(plan), options_(options), streams_count_(static_cast<size_t>(plan.num_streams())) {
  const ir::Graph& g = plan.graph();
  const auto& launches = plan.launches();
  const auto& groups = plan.groups();

  // 1. Everything that can fail without a device: lowering and compiling every launch. A launch
  // with no device lowering runs on the host when the options allow it, else is refused.
  std::map<std::string, std::pair<int, std::string>> missing;  // op -> count, why
  std::vector<LaunchLowering> lowered(launches.size());
  for (size_t i = 0; i < launches.size(); ++i) {
    lowered[i] = lower_launch(plan, i);
    if (lowered[i].kind != LaunchLowering::None) continue;
    auto& entry = (options.host_fallback ? host_ops_ : missing)[lowered[i].what];
    entry = {entry.first + 1, lowered[i].why};
  }
  if (!missing.empty()) {
    std::string list;
    for (const auto& [name, entry] : missing)
      list += (list.empty() ? "" : ", ") + name + " x" + std::to_string(entry.first) + " (" + entry.second + ")";
    throw Error(ErrorCode::Unsupported, "ascend: no device lowering yet for " + list + "; " + lowered_ops() +
                                            "; the option host_fallback runs the rest on the host");
  }
  if (!host_ops_.empty()) host_program_ = host();
  const Toolchain toolchain = options.simulated ? simulator_toolchain() : cann_toolchain();
  std::map<std::string, int> kernel_of;  // by entry: one binary per distinct kernel
  for (size_t i = 0; i < launches.size(); ++i) {
    const KernelSource& source = lowered[i].source;
    if (lowered[i].kind != LaunchLowering::Kernel || kernel_of.count(source.entry)) continue;
    const BuiltKernel built = build_kernel(toolchain, source);
    LoadedKernel k;
    k.entry = source.entry;
    k.path = built.path;
    k.from_cache = built.from_cache;
    k.tile = source.tile;
    k.rows = launches[i].group < 0;
    if (launches[i].group < 0) k.ops = g.nodes[launches[i].node].op->name;
    else
      for (ir::NodeId m : groups[static_cast<size_t>(launches[i].group)].members) k.ops += (k.ops.empty() ? "" : " ") + std::string(g.nodes[m].op->name);
    kernel_of[k.entry] = static_cast<int>(kernels_.size());
    kernels_.push_back(std::move(k));
  }

  // 2. The layout of the one device allocation, over the device's AI cores.
  acl_ = AclLibrary::open(options.simulated ? AclLibrary::simulator_path() : "");
  size_t size = align_up(static_cast<size_t>(plan.arena_bytes()));
  for (ir::ValueId v : g.inputs()) input_at_.push_back(size), size += align_up(value_bytes(g, v));
  for (ir::ValueId v : g.outputs()) output_at_.push_back(size), size += align_up(value_bytes(g, v));
  const size_t image_at = size;  // constants, tilings and argument slots: uploaded once
  std::vector<uint8_t> image;
  std::map<int64_t, size_t> constant_at;
  auto place = [&](const void* data, size_t bytes) {
    const size_t at = image.size();
    image.resize(align_up(at + bytes));
    if (bytes) std::memcpy(image.data() + at, data, bytes);
    return image_at + at;
  };
  auto slot_offset = [&](const Slot& s) -> size_t {
    switch (s.kind) {
      case Slot::Arena: return static_cast<size_t>(s.at);
      case Slot::Input: return input_at_[static_cast<size_t>(s.at)];
      case Slot::Output: return output_at_[static_cast<size_t>(s.at)];
      case Slot::Constant: {
        auto it = constant_at.find(s.at);
        if (it == constant_at.end()) {
          const auto& blob = *g.blobs[g.nodes[static_cast<ir::NodeId>(s.at)].blob];
          it = constant_at.emplace(s.at, place(blob.data(), value_bytes(g, s.value))).first;
        }
        return it->second;
      }
    }
    return 0;
  };
  // Launches, with their operands' offsets; the argument slots hold addresses, filled below
  // once the allocation exists.
  struct PendingArgs {
    size_t image_offset;
    std::vector<size_t> offsets;  // device offsets of the operands, then of the tiling struct
  };
  std::vector<PendingArgs> pending;
  struct PendingCall {
    ir::NodeId node;
    std::vector<size_t> in, out;  // device offsets; SIZE_MAX for an absent optional input
  };
  std::vector<PendingCall> pending_calls;
  // Only generated kernels spread over cores: a model of library calls asks the device nothing.
  const uint32_t cores = options.ai_cores > 0 ? static_cast<uint32_t>(options.ai_cores) : kernels_.empty() ? 1 : ai_cores_of_device();
  for (size_t i = 0; i < launches.size(); ++i) {
    const runtime::Plan::Launch& l = launches[i];
    DeviceLaunch d;
    d.stream = l.stream;
    const LaunchLowering::Kind kind = lowered[i].kind;
    if (kind == LaunchLowering::Kernel) {
      d.kind = DeviceLaunch::Kernel;
      d.kernel = kernel_of[lowered[i].source.entry];
      PendingArgs p;
      if (l.group >= 0) {  // the group's inputs and outputs, then its tiling
        const runtime::FusedGroup& grp = groups[static_cast<size_t>(l.group)];
        const Tiling tiling = tile_over_cores(static_cast<uint64_t>(grp.shape.num_elements()), lowered[i].source.tile, cores, &d.blocks);
        for (const Slot& in : l.in) p.offsets.push_back(slot_offset(in));
        for (const Slot& out : l.out) p.offsets.push_back(slot_offset(out));
        p.offsets.push_back(place(&tiling, sizeof tiling));
        if (tiling.total == 0) d.blocks = 0;
      } else {  // a row kernel: the node's present inputs, its output, then the row tiling
        const ir::Node& n = g.nodes[l.node];
        const RowTiling tiling = row_tiling(g, n, cores, &d.blocks);
        for (uint32_t k = 0; k < n.num_inputs - n.num_captures; ++k)
          if (l.in[k].value != ir::kNone) p.offsets.push_back(slot_offset(l.in[k]));
        p.offsets.push_back(slot_offset(l.out[0]));
        p.offsets.push_back(place(&tiling, sizeof tiling));
      }
      d.args_bytes = p.offsets.size() * sizeof(uint64_t);
      std::vector<uint64_t> zeros(p.offsets.size(), 0);
      d.args_at = place(zeros.data(), d.args_bytes);
      p.image_offset = d.args_at - image_at;
      if (d.blocks) pending.push_back(std::move(p));  // else nothing to compute; its waits and records still queue
    } else if (kind == LaunchLowering::None) {
      // Its operands staged in host tensors made now, not at each run.
      d.kind = DeviceLaunch::Host;
      d.host = static_cast<int>(host_.size());
      HostLaunch h;
      h.launch = i;
      auto stage = [&](const Slot& slot, std::vector<size_t>* at, std::vector<eval::HostTensor>* staged) {
        const ir::ValueId v = slot.value;
        at->push_back(v == ir::kNone ? SIZE_MAX : slot_offset(slot));
        staged->push_back(v == ir::kNone ? eval::HostTensor() : eval::HostTensor(g.values[v].dtype, g.shape(v)));
      };
      for (const Slot& in : l.in) stage(in, &h.in_at, &h.in);
      for (const Slot& out : l.out) stage(out, &h.out_at, &h.out);
      host_.push_back(std::move(h));
    } else if (kind == LaunchLowering::Aclnn) {
      const ir::Node& n = g.nodes[l.node];
      PendingCall c{l.node, {}, {}};
      for (uint32_t k = 0; k < n.num_inputs - n.num_captures; ++k) c.in.push_back(l.in[k].value == ir::kNone ? SIZE_MAX : slot_offset(l.in[k]));
      for (const Slot& out : l.out) c.out.push_back(slot_offset(out));
      d.kind = DeviceLaunch::Aclnn;
      d.call = static_cast<int>(pending_calls.size());
      pending_calls.push_back(std::move(c));
    } else {
      const ir::Node& n = g.nodes[l.node];
      d.kind = DeviceLaunch::Copy;
      d.copy_from = slot_offset(l.in[0]);
      d.copy_to = slot_offset(l.out[0]);
      d.copy_bytes = value_bytes(g, n.first_output);
    }
    launches_.push_back(std::move(d));
  }
  // Events: one per launch another stream waits for, recorded right after it (a launch with
  // nothing to compute still queues its waits and records: the plan's events are a transitive
  // reduction, so a record stands for everything before it).
  std::map<int, int> event_of;
  const auto& waits = plan.waits();
  for (size_t i = 0; i < launches.size(); ++i)
    for (int w : waits[i])
      if (!event_of.count(w)) event_of[w] = static_cast<int>(event_of.size());
  for (size_t i = 0; i < launches.size(); ++i) {
    for (int w : waits[i]) launches_[i].wait_events.push_back(event_of[w]);
    if (const auto rec = event_of.find(static_cast<int>(i)); rec != event_of.end()) launches_[i].record_events.push_back(rec->second);
  }
  const int num_events = assign_events(static_cast<int>(event_of.size()));

  // 3. The device: nothing is left half-initialized if a step fails.
  try {
    ESG_ACL(*acl_, aclrtSetDevice, options.device);
    device_set_ = true;
    ESG_ACL(*acl_, aclrtCreateContext, &context_, options.device);
    ESG_ACL(*acl_, aclrtSetCurrentContext, context_);
    streams_.assign(static_cast<size_t>(plan.num_streams()), nullptr);
    for (acl::Stream& s : streams_) ESG_ACL(*acl_, aclrtCreateStream, &s);
    // A capture's events are made with ACL_EVENT_SYNC (CANN's cross-stream capture), which CANN
    // never resets: a plan that reuses its events (resets them) is replayed, not captured.
    const bool resets = std::any_of(launches_.begin(), launches_.end(), [](const DeviceLaunch& d) { return !d.reset_events.empty(); });
    const bool capture = acl_->has_capture() && !resets && host_.empty();
    auto make_event = [&](acl::Event& e) {
      if (capture) ESG_ACL(*acl_, aclrtCreateEventExWithFlag, &e, acl::kEventSync);
      else ESG_ACL(*acl_, aclrtCreateEvent, &e);
    };
    events_.assign(static_cast<size_t>(num_events), nullptr);
    for (acl::Event& e : events_) make_event(e);
    join_events_.assign(streams_.size(), nullptr);  // [0]: inputs are in; [s > 0]: stream s is done
    if (streams_.size() > 1)
      for (acl::Event& e : join_events_) make_event(e);
    memory_bytes_ = std::max<size_t>(image_at + image.size(), kAlign);
    ESG_ACL(*acl_, aclrtMallocAlign32, &memory_, memory_bytes_, acl::kHugeFirst);
    for (const PendingArgs& p : pending)
      for (size_t k = 0; k < p.offsets.size(); ++k) {
        const uint64_t address = reinterpret_cast<uint64_t>(at(p.offsets[k]));
        std::memcpy(image.data() + p.image_offset + k * sizeof(uint64_t), &address, sizeof address);
      }
    if (!image.empty()) ESG_ACL(*acl_, aclrtMemcpy, at(image_at), image.size(), image.data(), image.size(), acl::kHostToDevice);
    for (LoadedKernel& k : kernels_) {
      ESG_ACL(*acl_, aclrtBinaryLoadFromFile, k.path.c_str(), nullptr, &k.binary);
      ESG_ACL(*acl_, aclrtBinaryGetFunction, k.binary, k.entry.c_str(), &k.function);
    }
    // Ops of CANN's library: descriptors over their operands' final addresses, each planned
    // once here for its workspace size (the executors serve the capture or the first run).
    // Ops on one stream run one after another and share a workspace; streams have their own.
    if (!pending_calls.empty()) {
      aclnn_ = AclnnLibrary::open(*acl_);
      std::vector<uint64_t> need(streams_.size(), 0);
      for (const PendingCall& c : pending_calls) {
        std::vector<void*> in, out;
        for (size_t o : c.in) in.push_back(o == SIZE_MAX ? nullptr : at(o));
        for (size_t o : c.out) out.push_back(at(o));
        calls_.push_back(std::make_unique<AclnnCall>(*aclnn_, g, g.nodes[c.node], in, out));
        uint64_t bytes = 0;
        planned_.push_back(calls_.back()->plan(&bytes));
        planned_bytes_.push_back(bytes);
      }
      for (const DeviceLaunch& d : launches_)
        if (d.kind == DeviceLaunch::Aclnn)
          need[static_cast<size_t>(d.stream)] = std::max(need[static_cast<size_t>(d.stream)], planned_bytes_[static_cast<size_t>(d.call)]);
      size_t total = 0;
      for (uint64_t n : need) workspace_at_.push_back(total), workspace_bytes_.push_back(n), total += align_up(n);
      if (total) ESG_ACL(*acl_, aclrtMallocAlign32, &workspace_, total, acl::kHugeFirst);
    }
    // Model sinking: the model is captured once and replayed as one submission. Other streams
    // join the capture of stream 0 by waiting on the event it records once the inputs are in,
    // and merge back into it at the end (enqueue_launches), as CANN's cross-stream capture asks.
    if (!acl_->has_capture()) {
      capture_note_ = "replays the launch list (this AscendCL has no stream capture)";
    } else if (resets) {
      capture_note_ = "replays the launch list (it reuses events beyond the device's limit; CANN documents no reset in a capture)";
    } else if (!host_.empty()) {
      capture_note_ = "replays the launch list (" + std::to_string(host_.size()) + " launches run on the host)";
    } else if (acl_->aclmdlRICaptureBegin(streams_[0], acl::kCaptureGlobal) != acl::kSuccess) {
      capture_note_ = std::string("replays the launch list (capture refused: ") + acl_->aclGetRecentErrMsg() + ")";
    } else {
      try {
        enqueue_launches(true, eval::RunControl{});
      } catch (...) {
        // The stream must not stay captured; what was captured is dropped with it.
        if (acl_->aclmdlRICaptureEnd(streams_[0], &captured_) == acl::kSuccess && captured_)
          acl_->aclmdlRIDestroy(captured_), captured_ = nullptr;
        throw;
      }
      ESG_ACL(*acl_, aclmdlRICaptureEnd, streams_[0], &captured_);
      capture_note_ = "one captured model (aclmdlRI) per run" + (streams_.size() > 1 ? ", over " + std::to_string(streams_.size()) + " streams" : "");
    }
  } catch (...) {
    release();
    throw;
  }
}

uint32_t DeviceProgram::ai_cores_of_device() const {
  int64_t cores = 0;
  ESG_ACL(*acl_, aclGetDeviceCapability, static_cast<uint32_t>(options_.device), acl::kAiCoreNum, &cores);
  if (cores < 1 || cores > 65535)
    throw Error(ErrorCode::Backend, "ascend: device " + std::to_string(options_.device) + " reports " + std::to_string(cores) + " AI cores");
  return static_cast<uint32_t>(cores);
}

void DeviceProgram::enqueue_launches(bool planned, const eval::RunControl& control) const {
  const AclLibrary& acl = *acl_;
  if (streams_.size() > 1) {  // every stream starts once the inputs are in
    ESG_ACL(acl, aclrtRecordEvent, join_events_[0], streams_[0]);
    for (size_t s = 1; s < streams_.size(); ++s) ESG_ACL(acl, aclrtStreamWaitEvent, streams_[s], join_events_[0]);
  }
  for (const DeviceLaunch& d : launches_) {
    control.check();
    acl::Stream stream = streams_[static_cast<size_t>(d.stream)];
    for (int e : d.wait_events) ESG_ACL(acl, aclrtStreamWaitEvent, stream, events_[static_cast<size_t>(e)]);
    for (int e : d.reset_events) ESG_ACL(acl, aclrtResetEvent, events_[static_cast<size_t>(e)], stream);
    if (d.kind == DeviceLaunch::Kernel && d.blocks == 0) {
      // an empty tensor: nothing to launch
    } else if (d.kind == DeviceLaunch::Kernel) {
      ESG_ACL(acl, aclrtLaunchKernel, kernels_[static_cast<size_t>(d.kernel)].function, d.blocks, at(d.args_at), d.args_bytes, stream);
    } else if (d.kind == DeviceLaunch::Host) {
      run_on_host(host_[static_cast<size_t>(d.host)], stream, control);
    } else if (d.kind == DeviceLaunch::Aclnn) {
      const AclnnCall& call = *calls_[static_cast<size_t>(d.call)];
      const size_t s = static_cast<size_t>(d.stream);
      uint64_t bytes = planned_bytes_[static_cast<size_t>(d.call)];
      aclnn::Executor* executor = planned ? planned_[static_cast<size_t>(d.call)] : call.plan(&bytes);
      if (bytes > workspace_bytes_[s])
        throw Error(ErrorCode::Backend, std::string("ascend: ") + call.name() + " now asks for a workspace of " + std::to_string(bytes) +
                                            " bytes, more than the " + std::to_string(workspace_bytes_[s]) + " it asked for at build");
      call.queue(bytes ? static_cast<uint8_t*>(workspace_) + workspace_at_[s] : nullptr, bytes, executor, stream);
    } else if (d.copy_bytes && d.copy_from != d.copy_to) {
      ESG_ACL(acl, aclrtMemcpyAsync, at(d.copy_to), d.copy_bytes, at(d.copy_from), d.copy_bytes, acl::kDeviceToDevice, stream);
    }
    for (int e : d.record_events) ESG_ACL(acl, aclrtRecordEvent, events_[static_cast<size_t>(e)], stream);
  }
  for (size_t s = 1; s < streams_.size(); ++s) {  // the outputs are read on stream 0
    ESG_ACL(acl, aclrtRecordEvent, join_events_[s], streams_[s]);
    ESG_ACL(acl, aclrtStreamWaitEvent, streams_[0], join_events_[s]);
  }
}

void DeviceProgram::run_on_host(HostLaunch& h, acl::Stream stream, const eval::RunControl& control) const {
  const AclLibrary& acl = *acl_;
  ESG_ACL(acl, aclrtSynchronizeStream, stream);  // what the stream queued before it has written its operands
  std::vector<const eval::TensorRef*> in, out;
  std::vector<eval::TensorRef> in_refs, out_refs;
  in_refs.reserve(h.in.size());
  out_refs.reserve(h.out.size());
  for (size_t k = 0; k < h.in.size(); ++k) {
    if (h.in_at[k] == SIZE_MAX) {  // an absent optional input
      in.push_back(nullptr);
      continue;
    }
    const size_t bytes = h.in[k].bytes.size();
    if (bytes) ESG_ACL(acl, aclrtMemcpy, h.in[k].bytes.data(), bytes, at(h.in_at[k]), bytes, acl::kDeviceToHost);
    in_refs.push_back(h.in[k].ref());
    in.push_back(&in_refs.back());
  }
  for (eval::HostTensor& t : h.out) out_refs.push_back(t.ref());
  for (const eval::TensorRef& r : out_refs) out.push_back(&r);
  host_program_->run_launch(h.launch, in, out, control);
  for (size_t k = 0; k < h.out.size(); ++k)
    if (const size_t bytes = h.out[k].bytes.size())
      ESG_ACL(acl, aclrtMemcpy, at(h.out_at[k]), bytes, h.out[k].bytes.data(), bytes, acl::kHostToDevice);
}

void DeviceProgram::run(const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs,
                        std::vector<runtime::TraceEvent>* trace, const eval::Parallel*, const eval::RunControl& control) const {
  if (trace) throw Error(ErrorCode::Unsupported, "profile: the Ascend backend records no per-launch times yet");
  std::lock_guard<std::mutex> lock(run_mu_);
  control.check();  // cancelled while it waited for its turn
  const AclLibrary& acl = *acl_;
  const ir::Graph& g = plan_.graph();
  ESG_ACL(acl, aclrtSetCurrentContext, context_);
  try {
    for (size_t i = 0; i < inputs.size(); ++i) {
      const size_t bytes = value_bytes(g, g.inputs()[i]);
      if (bytes) ESG_ACL(acl, aclrtMemcpyAsync, at(input_at_[i]), bytes, inputs[i].bytes, bytes, acl::kHostToDevice, streams_[0]);
    }
    if (captured_) {
      ESG_ACL(acl, aclmdlRIExecuteAsync, captured_, streams_[0]);
    } else {
      const bool planned = !ran_;  // the executors planned at build serve the first run, even one that fails
      ran_ = true;
      enqueue_launches(planned, control);
    }
    for (size_t o = 0; o < outputs.size(); ++o) {
      const size_t bytes = value_bytes(g, g.outputs()[o]);
      if (bytes) ESG_ACL(acl, aclrtMemcpyAsync, outputs[o].bytes, bytes, at(output_at_[o]), bytes, acl::kDeviceToHost, streams_[0]);
    }
  } catch (...) {
    // Queued copies still read the caller's inputs and write its outputs: none may outlive the run.
    for (acl::Stream s : streams_) acl.aclrtSynchronizeStream(s);
    throw;
  }
  // The one wait of a run, before the outputs are read: stream 0, into which a captured model
  // merges its streams; every stream of a replayed list (each, even after a failure).
  acl::Error failed = acl::kSuccess;
  std::string message;
  for (size_t s = 0; s < (captured_ ? 1 : streams_.size()); ++s)
    if (const acl::Error e = acl.aclrtSynchronizeStream(streams_[s]); e != acl::kSuccess && failed == acl::kSuccess)
      failed = e, message = acl.aclGetRecentErrMsg();
  if (failed != acl::kSuccess)
    throw Error(ErrorCode::Backend, "ascend: aclrtSynchronizeStream failed with AscendCL error " + std::to_string(failed) + ": " + message);
  plan_.fill_output_copies(inputs, outputs);
}

std::string DeviceProgram::describe_launch(size_t index) const {
  const DeviceLaunch& d = launches_[index];
  switch (d.kind) {
    case DeviceLaunch::Kernel: return "kernel " + kernels_[static_cast<size_t>(d.kernel)].entry;
    case DeviceLaunch::Aclnn: return calls_[static_cast<size_t>(d.call)]->name();
    case DeviceLaunch::Copy: return "copy";
    case DeviceLaunch::Host: return "on the host";
  }
  return {};
}

std::string DeviceProgram::report() const {
  std::ostringstream out;
  size_t cached = 0;
  for (const LoadedKernel& k : kernels_) cached += k.from_cache;
  out << "ascend" << (options_.simulated ? " (simulated device)" : "") << ": device " << options_.device << ", AscendCL "
      << (acl_ ? acl_->path() : "?") << "\n"
      << "  device memory: 1 allocation of " << memory_bytes_ << " bytes (arena " << plan_.arena_bytes() << ")\n"
      << "  kernels: " << kernels_.size() << " generated (" << cached << " from the cache " << kernel_cache_dir() << ")\n";
  for (const LoadedKernel& k : kernels_)
    out << "    " << k.entry << ": " << k.ops << (k.rows ? " (rows of any length, in chunks of " : " (tile ") << k.tile << ")\n";
  size_t copies = 0;
  std::map<std::string, int> by_call;
  for (const DeviceLaunch& d : launches_) {
    copies += d.kind == DeviceLaunch::Copy;
    if (d.kind == DeviceLaunch::Aclnn) ++by_call[calls_[static_cast<size_t>(d.call)]->name()];
  }
  size_t workspace = 0;
  for (uint64_t n : workspace_bytes_) workspace += n;
  out << "  aclnn: " << calls_.size() << " ops";
  for (const auto& [name, count] : by_call) out << " " << name << " x" << count;
  out << (workspace ? ", workspace of " + std::to_string(workspace) + " bytes (a second allocation)" : std::string()) << "\n";
  out << "  launches: " << launches_.size() - copies - calls_.size() - host_.size() << " kernels, " << calls_.size() << " aclnn ops, " << copies
      << " device copies, " << host_.size() << " on the host; " << streams_.size()
      << " streams, " << events_.size() << " events\n"
      << "  run: " << capture_note_ << "\n";
  if (!host_ops_.empty()) {
    out << "  on the host (host_fallback; each synchronizes its stream):";
    const char* sep = " ";
    for (const auto& [op, entry] : host_ops_) out << sep << op << " x" << entry.first << " (" << entry.second << ")", sep = ", ";
    out << "\n";
  }
  return out.str();
}

void DeviceProgram::add_stats(runtime::Stats& s) const {
  s.device_kernels = static_cast<int64_t>(kernels_.size());
  for (const DeviceLaunch& d : launches_) {
    s.device_copies += d.kind == DeviceLaunch::Copy;
    s.device_kernel_launches += d.kind == DeviceLaunch::Kernel;
  }
  s.library_calls = static_cast<int64_t>(calls_.size());
  s.host_launches = static_cast<int64_t>(host_.size());
  s.device_bytes = static_cast<int64_t>(memory_bytes_);
  s.device_events = static_cast<int64_t>(events_.size());
  s.captured = captured_ != nullptr;
}

void DeviceProgram::release() noexcept {
  if (!acl_) return;
  const AclLibrary& acl = *acl_;
  // Teardown continues past a failure: each resource is released once whatever happens.
  if (context_) acl.aclrtSetCurrentContext(context_);
  for (acl::Stream s : streams_)  // nothing may still run what is released below
    if (s) acl.aclrtSynchronizeStream(s);
  if (captured_) acl.aclmdlRIDestroy(captured_), captured_ = nullptr;
  for (LoadedKernel& k : kernels_)
    if (k.binary) acl.aclrtBinaryUnLoad(k.binary), k.binary = nullptr, k.function = nullptr;
  for (acl::Event& e : events_)
    if (e) acl.aclrtDestroyEvent(e), e = nullptr;
  for (acl::Event& e : join_events_)
    if (e) acl.aclrtDestroyEvent(e), e = nullptr;
  for (acl::Stream& s : streams_)
    if (s) acl.aclrtDestroyStream(s), s = nullptr;
  calls_.clear();  // descriptors before the memory they describe
  if (workspace_) acl.aclrtFree(workspace_), workspace_ = nullptr;
  if (memory_) acl.aclrtFree(memory_), memory_ = nullptr;
  if (context_) acl.aclrtDestroyContext(context_), context_ = nullptr;
  if (device_set_) acl.aclrtResetDevice(options_.device), device_set_ = false;
}

int DeviceProgram::assign_events(int logical) {
  // Within the device's event limit each logical event is an ACL event of its own. Beyond it,
  // events are reused: an event waited for by one stream only is reset by that stream after its
  // last wait (aclrtResetEvent) and may then be recorded again, by that stream only, so the
  // reset is ordered after every wait and before the new record. (An event several streams wait
  // for is never reset: CANN documents that a reset after one stream's wait fails another's.)
  // The limit counts the streams' start and join events too.
  const int joins = streams_joins();
  const char* env = std::getenv("ESG_ASCEND_MAX_EVENTS");
  const int limit = (env && *env ? std::atoi(env) : kMaxEvents) - joins;
  if (logical <= limit) return logical;
  std::vector<int> waits_left(static_cast<size_t>(logical), 0), physical(static_cast<size_t>(logical), -1);
  std::vector<int> waiter(static_cast<size_t>(logical), -1);  // the one stream that waits, or -2 for several
  for (const DeviceLaunch& d : launches_)
    for (int e : d.wait_events) {
      ++waits_left[static_cast<size_t>(e)];
      int& w = waiter[static_cast<size_t>(e)];
      w = w == -1 || w == d.stream ? d.stream : -2;
    }
  std::vector<std::vector<int>> free_on(streams_count_);
  int made = 0;
  auto take = [&](int stream) {
    auto& pool = free_on[static_cast<size_t>(stream)];
    if (!pool.empty()) {
      const int e = pool.back();
      pool.pop_back();
      return e;
    }
    if (made == limit)
      throw Error(ErrorCode::Unsupported, "ascend: the plan needs more than " + std::to_string(limit) + " events at once (the device's limit)");
    return made++;
  };
  for (DeviceLaunch& d : launches_) {
    for (int& e : d.wait_events) {
      const int logical_id = e;
      e = physical[static_cast<size_t>(logical_id)];
      if (--waits_left[static_cast<size_t>(logical_id)] == 0 && waiter[static_cast<size_t>(logical_id)] == d.stream) {
        d.reset_events.push_back(e);
        free_on[static_cast<size_t>(d.stream)].push_back(e);
      }
    }
    for (int& e : d.record_events) e = physical[static_cast<size_t>(e)] = take(d.stream);
  }
  return made;
}

DeviceProgram::~DeviceProgram() { release(); }

}  // namespace esg::ascend
