#include "ascend/device_program.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>

#include "ascend/aclnn_call.hpp"
#include "ascend/hccl_call.hpp"
#include "ascend/kernel_build.hpp"
#include "ascend/launch_lowering.hpp"
#include "ascend/row_kernel_source.hpp"
#include "ir/error.hpp"

namespace esg::ascend {
namespace {

std::atomic<uint64_t> next_binding{1};  // ids of bindings, for the device's tilings

using ir::Error;
using ir::ErrorCode;
using Slot = runtime::Plan::Slot;

constexpr size_t kAlign = schedule::kArenaAlignment;

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
// A segment of `n` bytes carved from the allocation, with CANN's slack after it.
size_t segment(size_t n) { return align_up(n + static_cast<size_t>(kSegmentSlack)); }

size_t value_bytes(const ir::Graph& g, ir::ValueId v) {
  return static_cast<size_t>(g.shape(v).num_elements()) * ir::dtype_size(g.values[v].dtype);
}

}  // namespace

DeviceProgram::DeviceProgram(const runtime::Plan& plan, const DeviceOptions& options, const HostProgram& host, const DeviceProgram* donor,
                             const runtime::Artifacts* loaded)
    : plan_(plan), options_(options), id_(next_binding.fetch_add(1)) {
  const ir::Graph& g = plan.graph();
  const auto& launches = plan.launches();

  // 1. Everything that can fail without a device: lowering every launch. A launch with no
  // device lowering runs on the host when the options allow it, else is refused.
  std::map<std::string, std::pair<int, std::string>> missing;  // op -> count, why
  std::vector<LaunchLowering> lowered(launches.size());
  std::string signature;
  for (size_t i = 0; i < launches.size(); ++i) {
    lowered[i] = lower_launch(plan, i);
    signature += std::to_string(lowered[i].kind) + (lowered[i].kind == LaunchLowering::Kernel ? lowered[i].source.entry : "") + ";";
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

  // 2. The device: the class's for this lowering when it has one (the same kernels at the same
  // addresses: only the tilings differ), else one of its own. It is laid out for the class's
  // largest sizes, which a binding's inputs and outputs must fit.
  const ir::Graph& largest = plan.largest_graph();
  for (const std::vector<ir::ValueId>* io : {&g.inputs(), &g.outputs()})
    for (ir::ValueId v : *io)
      if (value_bytes(g, v) > value_bytes(largest, v))
        throw Error(ErrorCode::Unsupported, "ascend: " + g.value_name(v) + " " + g.shape_str(g.shape(v)) + " outgrows the size class's largest, " +
                                                largest.shape_str(largest.shape(v)) + " (a plan of its own serves these sizes)");
  class_ = donor ? donor->class_ : std::make_shared<ClassDevices>();
  {
    std::lock_guard<std::mutex> lock(class_->mu);
    if (const auto it = class_->by_signature.find(signature); it != class_->by_signature.end()) device_ = it->second.lock();
  }
  // A device of its own is the class's only once it is whole (tilings written, captured): until
  // then no other binding runs on it.
  const bool shared = device_ != nullptr;
  if (!shared) device_ = make_device(lowered, loaded);
  const Device& d = *device_;
  for (const LoadedKernel& k : d.kernels) artifacts_.add("kernel/" + k.entry, k.image);
  tilings_ = tilings_for();
  if (!shared && !tilings_.empty()) {  // the device starts with its maker's tilings
    ESG_ACL(*d.acl, aclrtMemcpy, d.at(d.tilings_at), tilings_.size(), tilings_.data(), tilings_.size(), acl::kHostToDevice);
    d.tilings_of = id_;
  }

  // 3. This binding's own: host launches' staging, aclnn descriptors, and its capture. Nothing
  // is left half-initialized if a step fails.
  try {
    ESG_ACL(*d.acl, aclrtSetCurrentContext, d.context);
    struct PendingCall {
      ir::NodeId node;
      std::vector<size_t> in, out;  // device offsets; SIZE_MAX for an absent optional input
      const std::vector<size_t>* constants;
    };
    std::vector<PendingCall> pending_calls;
    for (size_t i = 0; i < launches.size(); ++i) {
      const runtime::Plan::Launch& l = launches[i];
      if (d.launches[i].kind == DeviceLaunch::Host) {  // operands staged in host tensors made now, not at each run
        HostLaunch h;
        h.launch = i;
        auto stage = [&](const Slot& slot, std::vector<size_t>* at, std::vector<eval::HostTensor>* staged) {
          const ir::ValueId v = slot.value;
          at->push_back(v == ir::kNone ? SIZE_MAX : d.offset(slot));
          staged->push_back(v == ir::kNone ? eval::HostTensor() : eval::HostTensor(g.values[v].dtype, g.shape(v)));
        };
        for (const Slot& in : l.in) stage(in, &h.in_at, &h.in);
        for (const Slot& out : l.out) stage(out, &h.out_at, &h.out);
        host_.push_back(std::move(h));
      } else if (d.launches[i].kind == DeviceLaunch::Collective) {
        // Its group's HCCL communicator is made at the first run, once the ranks have checked that
        // they agree (runtime/collectives.hpp): making it is a step every member must take.
        if (!hccl_) hccl_ = HcclLibrary::open(*d.acl);
        const eval::Collective& c = *plan.collectives().at(i);
        hccl_calls_.push_back({hccl_call(c), l.in.empty() ? SIZE_MAX : d.offset(l.in[0]), d.offset(l.out[0]), &c,
                               nullptr});
      } else if (d.launches[i].kind == DeviceLaunch::Aclnn) {
        const ir::Node& n = g.nodes[l.node];
        PendingCall c{l.node, {}, {}, &d.launches[i].constants};
        for (uint32_t k = 0; k < n.num_inputs - n.num_captures; ++k)
          c.in.push_back(l.in[k].value == ir::kNone || !AclnnCall::reads(n, k) ? SIZE_MAX : d.offset(l.in[k]));
        for (const Slot& out : l.out) c.out.push_back(d.offset(out));
        pending_calls.push_back(std::move(c));
      }
    }
    // Ops of CANN's library: descriptors over their operands' addresses at this binding's sizes,
    // each planned once here for its workspace size (the executors serve the capture or the
    // first run). Ops on one stream run one after another and share a workspace; streams have
    // their own.
    if (!pending_calls.empty()) {
      aclnn_ = AclnnLibrary::open(*d.acl);
      std::vector<uint64_t> need(d.streams.size(), 0);
      for (const PendingCall& c : pending_calls) {
        std::vector<void*> in, out, constants;
        for (size_t o : c.in) in.push_back(o == SIZE_MAX ? nullptr : d.at(o));
        for (size_t o : c.out) out.push_back(d.at(o));
        for (size_t o : *c.constants) constants.push_back(d.at(o));
        calls_.push_back(std::make_unique<AclnnCall>(*aclnn_, g, g.nodes[c.node], in, out, constants, d.soc));
        uint64_t bytes = 0;
        planned_.push_back(calls_.back()->plan(&bytes));
        queued_.push_back(false);
        planned_bytes_.push_back(bytes);
      }
      for (const DeviceLaunch& dl : d.launches)
        if (dl.kind == DeviceLaunch::Aclnn)
          need[static_cast<size_t>(dl.stream)] = std::max(need[static_cast<size_t>(dl.stream)], planned_bytes_[static_cast<size_t>(dl.call)]);
      size_t total = 0;
      for (uint64_t n : need) workspace_at_.push_back(total), workspace_bytes_.push_back(n), total += n ? segment(n) : 0;
      check_memory(d.memory_bytes + total, "the device allocation and the aclnn workspaces");
      if (total) ESG_ACL(*d.acl, aclrtMallocAlign32, &workspace_, total, acl::kHugeFirst);
    }
    // Model sinking: captured once, replayed as one submission. Kernels and copies take their
    // sizes from the tilings at each run, so a class of only those has one captured model,
    // made by its first binding; an aclnn op's executor is planned for its sizes, so a binding
    // with any captures its own.
    const std::string streams = d.streams.size() > 1 ? ", over " + std::to_string(d.streams.size()) + " streams" : "";
    std::lock_guard<std::mutex> lock(d.run_mu);  // a capture queues on the streams the class shares
    if (calls_.empty() && host_.empty() && shared) {
      capture_note_ = d.capture_note;
    } else if (calls_.empty() && host_.empty()) {
      Device& own = *device_;
      if (capture(&own.captured, &own.capture_note))
        own.capture_note = plan.bound() ? "one captured model (aclmdlRI) for the size class, replayed at every size in it (the kernels "
                                          "read their sizes from the tilings written before a run)" + streams
                                        : "one captured model (aclmdlRI) per run" + streams;
      capture_note_ = own.capture_note;
    } else if (capture(&captured_, &capture_note_)) {
      capture_note_ = plan.bound() ? "one captured model (aclmdlRI) per size (its aclnn ops are planned for their sizes), "
                                     "the device shared with the size class" + streams
                                   : "one captured model (aclmdlRI) per run" + streams;
    }
  } catch (...) {
    release();
    throw;
  }
  if (!shared) {
    std::lock_guard<std::mutex> lock(class_->mu);
    for (auto it = class_->by_signature.begin(); it != class_->by_signature.end();)  // devices gone with their last binding
      it = it->second.expired() ? class_->by_signature.erase(it) : std::next(it);
    class_->by_signature[signature] = device_;
  }
}

void DeviceProgram::build_kernels(Device& d, const std::vector<LaunchLowering>& lowered, const runtime::Artifacts* loaded) const {
  const ir::Graph& g = plan_.graph();
  const auto& launches = plan_.launches();
  const auto& groups = plan_.groups();
  std::optional<Toolchain> toolchain;  // looked for only when a kernel must be built
  std::set<std::string> built_entries;  // one binary per distinct kernel
  for (size_t i = 0; i < launches.size(); ++i) {
    const KernelSource& source = lowered[i].source;
    if (lowered[i].kind != LaunchLowering::Kernel || !built_entries.insert(source.entry).second) continue;
    LoadedKernel k;
    k.entry = source.entry;
    k.image = loaded ? loaded->find("kernel/" + source.entry) : nullptr;
    if (!k.image) {
      if (!toolchain) toolchain = options_.simulated ? simulator_toolchain() : cann_toolchain();
      const BuiltKernel built = build_kernel(*toolchain, source, options_.kernel_cache);
      k.path = built.path;
      k.from_cache = built.from_cache;
      std::ifstream in(built.path, std::ios::binary);
      k.image = ir::make_blob(ir::OwnedBytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
    }
    k.tile = source.tile;
    k.rows = launches[i].group < 0;
    if (launches[i].group < 0) k.ops = g.nodes[launches[i].node].op->name;
    else
      for (ir::NodeId m : groups[static_cast<size_t>(launches[i].group)].members) k.ops += (k.ops.empty() ? "" : " ") + std::string(g.nodes[m].op->name);
    d.kernels.push_back(std::move(k));
  }
}

DeviceProgram::Layout DeviceProgram::lay_out(Device& d, const std::vector<LaunchLowering>& lowered) const {
  const runtime::Plan& plan = plan_;
  const ir::Graph& g = plan.graph();
  const ir::Graph& largest = plan.largest_graph();  // sizes the allocation and block counts are for
  const auto& launches = plan.launches();
  const auto& groups = plan.groups();
  std::map<std::string, int> kernel_of;  // by entry
  for (size_t k = 0; k < d.kernels.size(); ++k) kernel_of[d.kernels[k].entry] = static_cast<int>(k);
  // The arena, inputs and outputs, then what is uploaded once (the constants), then the tilings.
  Layout out;
  size_t size = align_up(static_cast<size_t>(plan.arena_bytes()));
  for (ir::ValueId v : largest.inputs()) d.input_at.push_back(size), size += segment(value_bytes(largest, v));
  for (ir::ValueId v : largest.outputs()) d.output_at.push_back(size), size += segment(value_bytes(largest, v));
  out.image_at = size;
  std::vector<uint8_t>& image = out.image;
  auto place = [&](const void* data, size_t bytes) {
    const size_t at = image.size();
    image.resize(at + segment(bytes));
    if (bytes) std::memcpy(image.data() + at, data, bytes);
    return out.image_at + at;
  };
  auto slot_offset = [&](const Slot& s) {
    if (s.kind == Slot::Constant && !d.constant_at.count(s.at)) {
      const auto& blob = *g.blobs[g.nodes[static_cast<ir::NodeId>(s.at)].blob];
      d.constant_at[s.at] = place(blob.data(), value_bytes(g, s.value));
    }
    return d.offset(s);
  };
  // Only generated kernels spread over cores: a model of library calls asks the device nothing.
  // They run on the vector cores alone, so a block is one vector core (CANN's rule for vector
  // operators on Atlas A2, whose AI cores have two each).
  const uint32_t cores = options_.ai_cores > 0 ? static_cast<uint32_t>(options_.ai_cores) : d.kernels.empty() ? 1 : vector_cores_of_device(*d.acl, d.device);
  int calls = 0;
  for (size_t i = 0; i < launches.size(); ++i) {
    const runtime::Plan::Launch& l = launches[i];
    DeviceLaunch dl;
    dl.stream = l.stream;
    const LaunchLowering::Kind kind = lowered[i].kind;
    if (kind == LaunchLowering::Kernel) {
      dl.kind = DeviceLaunch::Kernel;
      dl.kernel = kernel_of[lowered[i].source.entry];
      if (l.group >= 0) {  // the group's inputs and outputs, then its tiling
        const runtime::FusedGroup& grp = groups[static_cast<size_t>(l.group)];
        const uint64_t total = static_cast<uint64_t>(largest.shape(largest.nodes[grp.members.back()].first_output).num_elements());
        (void)tile_over_cores(total, lowered[i].source.tile, cores, &dl.blocks);
        if (total == 0) dl.blocks = 0;
        for (const Slot& in : l.in) dl.operands.push_back(slot_offset(in));
        for (const Slot& o : l.out) dl.operands.push_back(slot_offset(o));
        dl.tiling_bytes = sizeof(Tiling);
      } else {  // a row kernel: the node's present inputs, its output, then the row tiling
        const ir::Node& n = g.nodes[l.node];
        (void)row_tiling(largest, largest.nodes[l.node], cores, &dl.blocks);
        for (uint32_t k = 0; k < n.num_inputs - n.num_captures; ++k)
          if (l.in[k].value != ir::kNone) dl.operands.push_back(slot_offset(l.in[k]));
        dl.operands.push_back(slot_offset(l.out[0]));
        dl.tiling_bytes = sizeof(RowTiling);
      }
      dl.tiling_at = d.tilings_bytes;
      d.tilings_bytes += segment(dl.tiling_bytes);
    } else {
      for (size_t k = 0; k < l.in.size(); ++k)  // constants placed for the bindings' calls and copies
        if (l.in[k].value != ir::kNone && (kind != LaunchLowering::Aclnn || AclnnCall::reads(g.nodes[l.node], static_cast<uint32_t>(k))))
          slot_offset(l.in[k]);
      if (kind == LaunchLowering::None) {
        dl.kind = DeviceLaunch::Host;
        dl.host = out.hosts++;
      } else if (kind == LaunchLowering::Aclnn) {
        dl.kind = DeviceLaunch::Aclnn;
        dl.call = calls++;
        for (const eval::HostTensor& c : AclnnCall::constants(g, g.nodes[l.node])) dl.constants.push_back(place(c.bytes.data(), c.bytes.size()));
      } else if (kind == LaunchLowering::Collective) {
        dl.kind = DeviceLaunch::Collective;
        dl.call = out.collectives++;
        for (const Slot& o : l.out) slot_offset(o);
      } else {  // a view's bytes, at the largest sizes: more than a smaller size has is harmless
        dl.kind = DeviceLaunch::Copy;
        dl.copy_from = slot_offset(l.in[0]);
        dl.copy_to = slot_offset(l.out[0]);
        dl.copy_bytes = value_bytes(largest, g.nodes[l.node].first_output);
      }
    }
    d.launches.push_back(std::move(dl));
  }
  d.tilings_at = out.image_at + image.size();
  d.memory_bytes = std::max<size_t>(d.tilings_at + d.tilings_bytes, kAlign);
  return out;
}

int DeviceProgram::order_events(Device& d) const {
  // One per launch another stream waits for, recorded right after it (a launch with nothing to
  // compute still queues its waits and records: the plan's events are a transitive reduction,
  // so a record stands for everything before it).
  std::map<int, int> event_of;
  const auto& waits = plan_.waits();
  for (size_t i = 0; i < waits.size(); ++i)
    for (int w : waits[i])
      if (!event_of.count(w)) event_of[w] = static_cast<int>(event_of.size());
  for (size_t i = 0; i < waits.size(); ++i) {
    for (int w : waits[i]) d.launches[i].wait_events.push_back(event_of[w]);
    if (const auto rec = event_of.find(static_cast<int>(i)); rec != event_of.end()) d.launches[i].record_events.push_back(rec->second);
  }
  return assign_events(d.launches, static_cast<int>(event_of.size()), static_cast<size_t>(plan_.num_streams()));
}

void DeviceProgram::acquire(Device& d, const Layout& layout, int num_events) const {
  const ir::Graph& largest = plan_.largest_graph();
  ESG_ACL(*d.acl, aclrtSetDevice, d.device);
  d.device_set = true;
  ESG_ACL(*d.acl, aclrtCreateContext, &d.context, d.device);
  ESG_ACL(*d.acl, aclrtSetCurrentContext, d.context);
  d.streams.assign(static_cast<size_t>(plan_.num_streams()), nullptr);
  for (acl::Stream& s : d.streams) ESG_ACL(*d.acl, aclrtCreateStream, &s);
  // A capture's events are made with ACL_EVENT_SYNC (CANN's cross-stream capture), which CANN
  // never resets: a plan that reuses its events (resets them) is replayed, not captured.
  const bool resets = std::any_of(d.launches.begin(), d.launches.end(), [](const DeviceLaunch& dl) { return !dl.reset_events.empty(); });
  d.sync_events = d.acl->has_capture() && !resets && layout.hosts == 0 && layout.collectives == 0;
  auto make_event = [&](acl::Event& e) {
    if (d.sync_events) ESG_ACL(*d.acl, aclrtCreateEventExWithFlag, &e, acl::kEventSync);
    else ESG_ACL(*d.acl, aclrtCreateEvent, &e);
  };
  d.events.assign(static_cast<size_t>(num_events), nullptr);
  for (acl::Event& e : d.events) make_event(e);
  d.join_events.assign(d.streams.size(), nullptr);
  if (d.streams.size() > 1)
    for (acl::Event& e : d.join_events) make_event(e);
  ESG_ACL(*d.acl, aclrtMallocAlign32, &d.memory, d.memory_bytes, acl::kHugeFirst);
  for (ir::ValueId v : largest.inputs()) d.staged_input_at.push_back(d.staging_bytes), d.staging_bytes += align_up(value_bytes(largest, v));
  for (ir::ValueId v : largest.outputs()) d.staged_output_at.push_back(d.staging_bytes), d.staging_bytes += align_up(value_bytes(largest, v));
  d.staged_tilings_at = d.staging_bytes;
  d.staging_bytes += d.tilings_bytes;
  if (d.staging_bytes) ESG_ACL(*d.acl, aclrtMallocHost, &d.staging, d.staging_bytes);
  if (!layout.image.empty())
    ESG_ACL(*d.acl, aclrtMemcpy, d.at(layout.image_at), layout.image.size(), layout.image.data(), layout.image.size(), acl::kHostToDevice);
  // For the vector cores: the .json beside each binary says so (kernel_build.hpp).
  for (LoadedKernel& k : d.kernels) {
    if (!k.path.empty()) {
      ESG_ACL(*d.acl, aclrtBinaryLoadFromFile, k.path.c_str(), nullptr, &k.binary);
    } else {  // from a compiled-model file: no .json beside it, the core as the magic option
      if (!d.acl->aclrtBinaryLoadFromData)
        throw Error(ErrorCode::Backend, "ascend: this AscendCL (" + d.acl->path() + ", CANN " + d.acl->cann_version() +
                                            ") lacks aclrtBinaryLoadFromData, which loads a compiled model's kernels; compile the model here");
      acl::BinaryLoadOption magic{acl::kBinaryLoadOptionMagic, {}};
      magic.value.magic = acl::kBinaryMagicVectorCore;
      acl::BinaryLoadOptions options{&magic, 1};
      ESG_ACL(*d.acl, aclrtBinaryLoadFromData, k.image->data(), k.image->size(), &options, &k.binary);
    }
    ESG_ACL(*d.acl, aclrtBinaryGetFunction, k.binary, k.entry.c_str(), &k.function);
  }
  if (!d.acl->has_capture()) d.capture_note = "replays the launch list (this AscendCL has no stream capture)";
  else if (resets) d.capture_note = "replays the launch list (it reuses events beyond the device's limit; CANN documents no reset in a capture)";
  else if (layout.hosts) d.capture_note = "replays the launch list (" + std::to_string(layout.hosts) + " launches run on the host)";
  else if (layout.collectives) d.capture_note = "replays the launch list (its HCCL collectives are queued as they run, not captured)";
}

std::shared_ptr<DeviceProgram::Device> DeviceProgram::make_device(const std::vector<LaunchLowering>& lowered, const runtime::Artifacts* loaded) {
  auto made = std::make_shared<Device>();  // releases what it holds if a step below fails
  Device& d = *made;
  d.device = options_.device;
  d.acl = AclLibrary::open(options_.simulated ? AclLibrary::simulator_path() : "");
  // The generated kernels run on the core version they are built for: another SoC is refused by
  // name before anything is built (a model of library calls only runs on any).
  const char* soc = d.acl->aclrtGetSocName();
  d.soc = soc ? soc : "";
  if (std::any_of(lowered.begin(), lowered.end(), [](const LaunchLowering& l) { return l.kind == LaunchLowering::Kernel; })) {
    if (!d.acl->kernel_api_missing().empty())
      throw Error(ErrorCode::Unsupported, "ascend: the model has generated kernels, which load and launch through AscendCL's kernel API, and " +
                                              d.acl->path() + " (CANN " + d.acl->cann_version() + ") lacks " + d.acl->kernel_api_missing() +
                                              "; CANN 8.3 or newer has it (docs/ascend.md). Models of CANN's operator library (aclnn) alone run here");
    if (d.soc.empty()) throw Error(ErrorCode::Backend, "ascend: aclrtGetSocName failed: " + d.acl->recent_error());
    if (const std::string why = arch_mismatch(kernel_arch(), d.soc); !why.empty()) throw Error(ErrorCode::Unsupported, "ascend: " + why);
  }
  build_kernels(d, lowered, loaded);
  const Layout layout = lay_out(d, lowered);
  const int num_events = order_events(d);
  check_memory(d.memory_bytes, "the device allocation (arena, inputs, outputs, constants, tilings)");
  acquire(d, layout, num_events);
  return made;
}

std::vector<uint8_t> DeviceProgram::tilings_for() const {
  const ir::Graph& g = plan_.graph();
  const Device& d = *device_;
  std::vector<uint8_t> out(d.tilings_bytes, 0);
  for (size_t i = 0; i < d.launches.size(); ++i) {
    const DeviceLaunch& dl = d.launches[i];
    if (dl.kind != DeviceLaunch::Kernel || dl.blocks == 0) continue;
    // Over the blocks the launch was captured with: a smaller size leaves the last ones idle.
    const runtime::Plan::Launch& l = plan_.launches()[i];
    uint32_t blocks = 0;
    if (l.group >= 0) {
      const Tiling t = tile_over_cores(static_cast<uint64_t>(plan_.groups()[static_cast<size_t>(l.group)].shape.num_elements()),
                                       d.kernels[static_cast<size_t>(dl.kernel)].tile, dl.blocks, &blocks);
      std::memcpy(out.data() + dl.tiling_at, &t, sizeof t);
    } else {
      const RowTiling t = row_tiling(g, g.nodes[l.node], dl.blocks, &blocks);
      std::memcpy(out.data() + dl.tiling_at, &t, sizeof t);
    }
  }
  return out;
}

size_t DeviceProgram::Device::offset(const Slot& s) const {
  switch (s.kind) {
    case Slot::Arena: return static_cast<size_t>(s.at);
    case Slot::Input: return input_at[static_cast<size_t>(s.at)];
    case Slot::Output: return output_at[static_cast<size_t>(s.at)];
    case Slot::Constant: return constant_at.at(s.at);
  }
  return 0;
}

bool DeviceProgram::capture(acl::ModelRI* model, std::string* note) const {
  const Device& d = *device_;
  const AclLibrary& acl = *d.acl;
  if (!d.sync_events) {  // make_device said why
    *note = d.capture_note;
    return false;
  }
  // Thread-local: a synchronous call of this thread inside the capture is an error, while
  // other threads (another binding's build, a host launch) go on with theirs.
  if (acl.aclmdlRICaptureBegin(d.streams[0], acl::kCaptureThreadLocal) != acl::kSuccess) {
    *note = "replays the launch list (capture refused: " + acl.recent_error() + ")";
    return false;
  }
  try {
    enqueue_launches(true, eval::RunControl{});
  } catch (...) {
    // The stream must not stay captured; what was captured is dropped with it.
    if (acl.aclmdlRICaptureEnd(d.streams[0], model) == acl::kSuccess && *model) acl.aclmdlRIDestroy(*model), *model = nullptr;
    throw;
  }
  ESG_ACL(acl, aclmdlRICaptureEnd, d.streams[0], model);
  return true;
}

void DeviceProgram::check_memory(size_t bytes, const char* what) const {
  if (options_.max_memory_bytes > 0 && bytes > static_cast<uint64_t>(options_.max_memory_bytes))
    throw Error(ErrorCode::Limit, std::string("ascend: ") + what + " takes " + std::to_string(bytes) + " bytes, more than max_memory_bytes (" +
                                      std::to_string(options_.max_memory_bytes) + ")");
}

uint32_t DeviceProgram::vector_cores_of_device(const AclLibrary& acl, int device) {
  int64_t cores = 0;
  ESG_ACL(acl, aclGetDeviceCapability, static_cast<uint32_t>(device), acl::kVectorCoreNum, &cores);
  if (cores < 1 || cores > 65535)
    throw Error(ErrorCode::Backend, "ascend: device " + std::to_string(device) + " reports " + std::to_string(cores) + " vector cores");
  return static_cast<uint32_t>(cores);
}

void DeviceProgram::enqueue_launches(bool planned, const eval::RunControl& control) const {
  const Device& d = *device_;
  const AclLibrary& acl = *d.acl;
  if (d.streams.size() > 1) {  // every stream starts once the inputs are in
    ESG_ACL(acl, aclrtRecordEvent, d.join_events[0], d.streams[0]);
    for (size_t s = 1; s < d.streams.size(); ++s) ESG_ACL(acl, aclrtStreamWaitEvent, d.streams[s], d.join_events[0]);
  }
  for (const DeviceLaunch& dl : d.launches) {
    control.check();
    acl::Stream stream = d.streams[static_cast<size_t>(dl.stream)];
    for (int e : dl.wait_events) ESG_ACL(acl, aclrtStreamWaitEvent, stream, d.events[static_cast<size_t>(e)]);
    for (int e : dl.reset_events) ESG_ACL(acl, aclrtResetEvent, d.events[static_cast<size_t>(e)], stream);
    if (dl.kind == DeviceLaunch::Kernel && dl.blocks == 0) {
      // an empty tensor: nothing to launch
    } else if (dl.kind == DeviceLaunch::Kernel) {
      // The operands' addresses, then the tiling's: one 8-byte pointer parameter each.
      const acl::FuncHandle function = d.kernels[static_cast<size_t>(dl.kernel)].function;
      acl::ArgsHandle args = nullptr;
      ESG_ACL(acl, aclrtKernelArgsInit, function, &args);
      auto append = [&](size_t offset) {
        uint64_t address = reinterpret_cast<uint64_t>(d.at(offset));
        acl::ParamHandle param = nullptr;
        ESG_ACL(acl, aclrtKernelArgsAppend, args, &address, sizeof address, &param);
      };
      for (size_t offset : dl.operands) append(offset);
      append(d.tilings_at + dl.tiling_at);
      ESG_ACL(acl, aclrtKernelArgsFinalize, args);
      ESG_ACL(acl, aclrtLaunchKernelWithConfig, function, dl.blocks, stream, nullptr, args, nullptr);
    } else if (dl.kind == DeviceLaunch::Host) {
      run_on_host(host_[static_cast<size_t>(dl.host)], stream, control);
    } else if (dl.kind == DeviceLaunch::Aclnn) {
      const AclnnCall& call = *calls_[static_cast<size_t>(dl.call)];
      const size_t s = static_cast<size_t>(dl.stream);
      uint64_t bytes = planned_bytes_[static_cast<size_t>(dl.call)];
      aclnn::Executor* executor = planned ? planned_[static_cast<size_t>(dl.call)] : call.plan(&bytes);
      // Marked before the call: a call that fails may have freed it, and freeing twice is worse than a leak.
      if (planned) queued_[static_cast<size_t>(dl.call)] = true;
      if (bytes > workspace_bytes_[s]) {
        if (aclnn_->aclDestroyAclOpExecutor) aclnn_->aclDestroyAclOpExecutor(executor);  // planned just now, never to run
        throw Error(ErrorCode::Backend, std::string("ascend: ") + call.name() + " now asks for a workspace of " + std::to_string(bytes) +
                                            " bytes, more than the " + std::to_string(workspace_bytes_[s]) + " it asked for at build");
      }
      call.queue(bytes ? static_cast<uint8_t*>(workspace_) + workspace_at_[s] : nullptr, bytes, executor, stream);
    } else if (dl.kind == DeviceLaunch::Collective) {
      queue_collective(hccl_calls_[static_cast<size_t>(dl.call)], stream);
    } else if (dl.copy_bytes && dl.copy_from != dl.copy_to) {
      ESG_ACL(acl, aclrtMemcpyAsync, d.at(dl.copy_to), dl.copy_bytes, d.at(dl.copy_from), dl.copy_bytes, acl::kDeviceToDevice, stream);
    }
    for (int e : dl.record_events) ESG_ACL(acl, aclrtRecordEvent, d.events[static_cast<size_t>(e)], stream);
  }
  for (size_t s = 1; s < d.streams.size(); ++s) {  // the outputs are read on stream 0
    ESG_ACL(acl, aclrtRecordEvent, d.join_events[s], d.streams[s]);
    ESG_ACL(acl, aclrtStreamWaitEvent, d.streams[0], d.join_events[s]);
  }
}

void DeviceProgram::queue_collective(const BoundCollective& b, acl::Stream stream) const {
  const Device& d = *device_;
  const HcclLibrary& h = *hccl_;
  const HcclCall& c = b.call;
  void* in = b.in_at == SIZE_MAX ? nullptr : d.at(b.in_at);
  void* out = d.at(b.out_at);
  using K = ir::OpKind;
  switch (c.kind) {
    case K::all_reduce: ESG_HCCL(h, HcclAllReduce, in, out, c.count, c.type, c.op, b.comm, stream); break;
    case K::all_gather: ESG_HCCL(h, HcclAllGather, in, out, c.count, c.type, b.comm, stream); break;
    case K::reduce_scatter: ESG_HCCL(h, HcclReduceScatter, in, out, c.count, c.type, c.op, b.comm, stream); break;
    case K::broadcast:  // in place on the result, which starts as this rank's input
      if (in != out) ESG_ACL(*d.acl, aclrtMemcpyAsync, out, c.bytes, in, c.bytes, acl::kDeviceToDevice, stream);
      ESG_HCCL(h, HcclBroadcast, out, c.count, c.type, c.rank, b.comm, stream);
      break;
    case K::all_to_all: ESG_HCCL(h, HcclAlltoAll, in, c.count, c.type, out, c.count, c.type, b.comm, stream); break;
    case K::send:  // the token it gives is written nowhere: nothing reads its value
      ESG_HCCL(h, HcclSend, in, c.count, c.type, c.rank, b.comm, stream);
      break;
    case K::recv: ESG_HCCL(h, HcclRecv, out, c.count, c.type, c.rank, b.comm, stream); break;
    default: break;
  }
}

void DeviceProgram::run_on_host(HostLaunch& h, acl::Stream stream, const eval::RunControl& control) const {
  const Device& d = *device_;
  const AclLibrary& acl = *d.acl;
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
    if (bytes) ESG_ACL(acl, aclrtMemcpy, h.in[k].bytes.data(), bytes, d.at(h.in_at[k]), bytes, acl::kDeviceToHost);
    in_refs.push_back(h.in[k].ref());
    in.push_back(&in_refs.back());
  }
  for (eval::HostTensor& t : h.out) out_refs.push_back(t.ref());
  for (const eval::TensorRef& r : out_refs) out.push_back(&r);
  host_program_->run_launch(h.launch, in, out, control);
  for (size_t k = 0; k < h.out.size(); ++k)
    if (const size_t bytes = h.out[k].bytes.size())
      ESG_ACL(acl, aclrtMemcpy, d.at(h.out_at[k]), bytes, h.out[k].bytes.data(), bytes, acl::kHostToDevice);
}

void DeviceProgram::run(const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs,
                        std::vector<runtime::TraceEvent>* trace, const eval::Parallel*, const eval::RunControl& control) const {
  if (trace) throw Error(ErrorCode::Unsupported, "profile: the Ascend backend records no per-launch times yet");
  const Device& d = *device_;
  std::lock_guard<std::mutex> lock(d.run_mu);
  control.check();  // cancelled while it waited for its turn
  const AclLibrary& acl = *d.acl;
  const ir::Graph& g = plan_.graph();
  const acl::ModelRI captured = d.captured ? d.captured : captured_;
  ESG_ACL(acl, aclrtSetCurrentContext, d.context);
  for (BoundCollective& b : hccl_calls_)
    if (!b.comm) b.comm = hccl_->communicator(*b.group, d.device);
  try {
    // This binding's sizes, when another binding of the class ran last: ordered on stream 0
    // before the inputs, and so before every launch.
    // Every copy goes through the page-locked staging: the caller's buffers are pageable.
    if (d.tilings_of != id_ && !tilings_.empty()) {
      std::memcpy(d.staged(d.staged_tilings_at), tilings_.data(), tilings_.size());
      ESG_ACL(acl, aclrtMemcpyAsync, d.at(d.tilings_at), tilings_.size(), d.staged(d.staged_tilings_at), tilings_.size(), acl::kHostToDevice,
              d.streams[0]);
    }
    d.tilings_of = id_;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const size_t bytes = value_bytes(g, g.inputs()[i]);
      if (!bytes) continue;
      std::memcpy(d.staged(d.staged_input_at[i]), inputs[i].bytes, bytes);
      ESG_ACL(acl, aclrtMemcpyAsync, d.at(d.input_at[i]), bytes, d.staged(d.staged_input_at[i]), bytes, acl::kHostToDevice, d.streams[0]);
    }
    if (captured) {
      ESG_ACL(acl, aclmdlRIExecuteAsync, captured, d.streams[0]);
    } else {
      const bool planned = !ran_;  // the executors planned at build serve the first run, even one that fails
      ran_ = true;
      enqueue_launches(planned, control);
    }
    for (size_t o = 0; o < outputs.size(); ++o) {
      const size_t bytes = value_bytes(g, g.outputs()[o]);
      if (bytes) ESG_ACL(acl, aclrtMemcpyAsync, d.staged(d.staged_output_at[o]), bytes, d.at(d.output_at[o]), bytes, acl::kDeviceToHost, d.streams[0]);
    }
  } catch (...) {
    // Queued copies still use the staging: none may outlive the run.
    for (acl::Stream s : d.streams) acl.aclrtSynchronizeStream(s);
    d.tilings_of = 0;  // whether this binding's tilings arrived is not known
    throw;
  }
  // The one wait of a run, before the outputs are read: stream 0, into which a captured model
  // merges its streams; every stream of a replayed list (each, even after a failure).
  acl::Error failed = acl::kSuccess;
  std::string message;
  for (size_t s = 0; s < (captured ? 1 : d.streams.size()); ++s)
    if (const acl::Error e = acl.aclrtSynchronizeStream(d.streams[s]); e != acl::kSuccess && failed == acl::kSuccess)
      failed = e, message = acl.recent_error();
  if (failed != acl::kSuccess) {
    d.tilings_of = 0;
    throw Error(ErrorCode::Backend, "ascend: aclrtSynchronizeStream failed with AscendCL error " + std::to_string(failed) + ": " + message);
  }
  for (size_t o = 0; o < outputs.size(); ++o)
    if (const size_t bytes = value_bytes(g, g.outputs()[o])) std::memcpy(outputs[o].bytes, d.staged(d.staged_output_at[o]), bytes);
  plan_.fill_output_copies(inputs, outputs);
}

std::string DeviceProgram::describe_launch(size_t index) const {
  const DeviceLaunch& dl = device_->launches[index];
  switch (dl.kind) {
    case DeviceLaunch::Kernel: return "kernel " + device_->kernels[static_cast<size_t>(dl.kernel)].entry;
    case DeviceLaunch::Aclnn: return calls_[static_cast<size_t>(dl.call)]->name();
    case DeviceLaunch::Copy: return "copy";
    case DeviceLaunch::Collective: return hccl_function(hccl_calls_[static_cast<size_t>(dl.call)].call.kind);
    case DeviceLaunch::Host: return "on the host";
  }
  return {};
}

void DeviceProgram::add_facts(runtime::Facts& f) const {
  const Device& d = *device_;
  f.text("backend", "ascend");
  f.level("simulated", options_.simulated);
  f.level("device", options_.device);
  f.text("soc", d.soc);
  f.text("cann_version", d.acl->cann_version());
  f.text("acl_library", d.acl->path());
  f.level("kernel_api", d.acl->kernel_api_missing().empty());  // 0: a CANN before 8.3, which runs aclnn ops alone
  // One allocation, laid out for the size class's largest sizes and shared by its bindings that
  // lower alike when the plan is a binding.
  f.bytes("device_bytes", static_cast<int64_t>(d.memory_bytes));
  f.level("device_memory_shared", plan_.bound());
  // Page-locked memory (aclrtMallocHost) that the inputs, outputs and tilings are copied through:
  // CANN refuses or serializes asynchronous copies from pageable memory.
  f.bytes("staging_bytes", static_cast<int64_t>(d.staging_bytes));
  // Generated kernels, each built with a .json naming the vector cores and loaded with
  // aclrtBinaryLoadFromFile, or from a compiled-model file's memory with
  // aclrtBinaryLoadFromData and the vector cores' magic; launched with aclrtLaunchKernelWithConfig.
  int64_t cached = 0, from_file = 0, kernel_launches = 0, copies = 0;
  for (const LoadedKernel& k : d.kernels) cached += k.from_cache, from_file += k.path.empty();
  f.count("device_kernels", static_cast<int64_t>(d.kernels.size()));
  f.count("device_kernels_cached", cached);  // found built in the kernel cache
  f.count("device_kernels_loaded", from_file);  // taken from a compiled-model file
  f.text("kernel_cache", options_.kernel_cache);
  for (const LoadedKernel& k : d.kernels) {
    runtime::Facts& row = f.row("kernels");
    row.text("entry", k.entry);
    row.text("ops", k.ops);
    row.level("rows", k.rows);  // a row kernel: rows of any length, in chunks of `tile`
    row.count("tile", k.tile);
  }
  std::map<std::string, int64_t> by_call;
  for (const DeviceLaunch& dl : d.launches) {
    copies += dl.kind == DeviceLaunch::Copy;
    kernel_launches += dl.kind == DeviceLaunch::Kernel;
    if (dl.kind == DeviceLaunch::Aclnn) ++by_call[calls_[static_cast<size_t>(dl.call)]->name()];
  }
  f.count("library_calls", static_cast<int64_t>(calls_.size()));  // aclnn ops
  f.tally("aclnn_calls", by_call, "function");
  int64_t workspace = 0;
  for (uint64_t n : workspace_bytes_) workspace += static_cast<int64_t>(n);
  f.bytes("workspace_bytes", workspace);  // a second allocation, for the aclnn ops
  if (!hccl_calls_.empty()) {
    std::map<std::string, int64_t> by_function;
    for (const BoundCollective& b : hccl_calls_) ++by_function[hccl_function(b.call.kind)];
    f.text("hccl_library", hccl_->libraries());
    f.tally("hccl_calls", by_function, "function");  // each on its launch's stream
  }
  f.count("device_kernel_launches", kernel_launches);
  f.count("device_copies", copies);
  f.count("host_launches", static_cast<int64_t>(host_.size()));
  f.level("device_streams", static_cast<int64_t>(d.streams.size()));
  f.count("device_events", static_cast<int64_t>(d.events.size()));  // made on the device (they may be shared)
  // Model sinking: 1 when a run replays one captured device model (aclmdlRI), made per run, per
  // size, or once for the size class; the note says which, or why the launch list is replayed.
  const bool captured = d.captured != nullptr || captured_ != nullptr;
  f.level("captured", captured);
  f.text("capture_scope", !captured ? "none" : !plan_.bound() ? "run" : d.captured ? "size class" : "size");
  f.text("run", capture_note_);
  for (const auto& [op, entry] : host_ops_) {  // host_fallback; each synchronizes its stream
    runtime::Facts& row = f.row("host_ops");
    row.text("op", op);
    row.count("count", entry.first);
    row.text("reason", entry.second);
  }
}

void DeviceProgram::release() noexcept {
  if (!device_) return;
  // Nothing of this binding's is queued: each of its runs waits for its streams before it
  // returns, and a binding goes only once no run holds it. Other bindings' runs go on.
  const Device& d = *device_;
  const AclLibrary& acl = *d.acl;
  if (d.context) acl.aclrtSetCurrentContext(d.context);
  if (captured_) acl.aclmdlRIDestroy(captured_), captured_ = nullptr;
  // An executor planned at build and never queued (no run, or a run that stopped before it) is
  // freed by nothing else: opbase frees one only when it runs.
  for (size_t c = 0; c < planned_.size(); ++c)
    if (!queued_[c] && planned_[c] && aclnn_->aclDestroyAclOpExecutor) aclnn_->aclDestroyAclOpExecutor(planned_[c]);
  planned_.clear();
  calls_.clear();  // descriptors before the memory they describe
  if (workspace_) acl.aclrtFree(workspace_), workspace_ = nullptr;
  device_.reset();  // the device with the last binding that shares it
}

DeviceProgram::Device::~Device() {
  if (!acl) return;
  // Teardown continues past a failure: each resource is released once whatever happens.
  if (context) acl->aclrtSetCurrentContext(context);
  for (acl::Stream s : streams)
    if (s) acl->aclrtSynchronizeStream(s);
  if (captured) acl->aclmdlRIDestroy(captured), captured = nullptr;
  for (LoadedKernel& k : kernels)
    if (k.binary) acl->aclrtBinaryUnLoad(k.binary), k.binary = nullptr, k.function = nullptr;
  for (acl::Event& e : events)
    if (e) acl->aclrtDestroyEvent(e), e = nullptr;
  for (acl::Event& e : join_events)
    if (e) acl->aclrtDestroyEvent(e), e = nullptr;
  for (acl::Stream& s : streams)
    if (s) acl->aclrtDestroyStream(s), s = nullptr;
  if (memory) acl->aclrtFree(memory), memory = nullptr;
  if (staging) acl->aclrtFreeHost(staging), staging = nullptr;
  if (context) acl->aclrtDestroyContext(context), context = nullptr;
  if (device_set) acl->aclrtResetDevice(device), device_set = false;
}

int DeviceProgram::assign_events(std::vector<DeviceLaunch>& launches, int logical, size_t streams) {
  // Within the device's event limit each logical event is an ACL event of its own. Beyond it,
  // events are reused: an event waited for by one stream only is reset by that stream after its
  // last wait (aclrtResetEvent) and may then be recorded again, by that stream only, so the
  // reset is ordered after every wait and before the new record. (An event several streams wait
  // for is never reset: CANN documents that a reset after one stream's wait fails another's.)
  // The limit counts the streams' start and join events too.
  const int joins = streams > 1 ? static_cast<int>(streams) : 0;
  const char* env = std::getenv("ESG_ASCEND_MAX_EVENTS");
  const int limit = (env && *env ? std::atoi(env) : kMaxEvents) - joins;
  if (logical <= limit) return logical;
  std::vector<int> waits_left(static_cast<size_t>(logical), 0), physical(static_cast<size_t>(logical), -1);
  std::vector<int> waiter(static_cast<size_t>(logical), -1);  // the one stream that waits, or -2 for several
  for (const DeviceLaunch& dl : launches)
    for (int e : dl.wait_events) {
      ++waits_left[static_cast<size_t>(e)];
      int& w = waiter[static_cast<size_t>(e)];
      w = w == -1 || w == dl.stream ? dl.stream : -2;
    }
  std::vector<std::vector<int>> free_on(streams);
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
  for (DeviceLaunch& dl : launches) {
    for (int& e : dl.wait_events) {
      const int logical_id = e;
      e = physical[static_cast<size_t>(logical_id)];
      if (--waits_left[static_cast<size_t>(logical_id)] == 0 && waiter[static_cast<size_t>(logical_id)] == dl.stream) {
        dl.reset_events.push_back(e);
        free_on[static_cast<size_t>(dl.stream)].push_back(e);
      }
    }
    for (int& e : dl.record_events) e = physical[static_cast<size_t>(e)] = take(dl.stream);
  }
  return made;
}

DeviceProgram::~DeviceProgram() { release(); }

}  // namespace esg::ascend
