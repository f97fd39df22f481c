// A stand-in AscendCL (libascendcl.so) that runs on the host: exactly the functions of
// compiler_core/ascend/acl_api.hpp, declared from the same table so their signatures cannot
// drift (plus the aclsim_* hooks of aclnn_sim.hpp for the stand-in operator library). esgraph's
// Ascend backend runs against it unchanged; only the library dlopen finds differs.
//
// - Streams are ordered queues, each drained by its own thread; events complete when the
//   stream that recorded them reaches the record. Stream capture follows CANN's cross-stream
//   rules (streams join through events recorded in the capture and must merge back); a replay
//   runs the joined streams' work on the model's own streams, its events per replay.
// - The device heap checks every access: guard bytes around each allocation catch writes past
//   either end, freed blocks stay poisoned and are never reused (use-after-free is caught), and
//   copies and kernels may only touch live device memory.
// - Kernel binaries are host shared libraries built from the generated Ascend C against
//   include/kernel_operator.h; a launch runs its blocks one after the other on the stream.
// - A call log (ACLSIM_LOG=path) records every call with its objects, so tests can check the
//   launch protocol. ACLSIM_FAIL=name makes every call of that function fail;
//   ACLSIM_FAIL_SILENTLY=name too, leaving no error text (aclGetRecentErrMsg gives NULL, as
//   CANN's does when no message is set);
//   ACLSIM_DEVICE_MEMORY caps the device heap (bytes); ACLSIM_NO_CAPTURE=1 refuses stream
//   capture, as CANN before 8.1 does; ACLSIM_DEVICES sets the device count (default 1),
//   ACLSIM_AI_CORES the AI cores of each (default 8), ACLSIM_SOC the SoC aclrtGetSocName names
//   (default Ascend910B1).
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "aclnn_sim.hpp"
#include "aclsim_block.h"
#include "ascend/acl_api.hpp"
#include "kernel_image.hpp"

using namespace esg::ascend::acl;

#define ACLSIM_DECLARE(name, ret, params) extern "C" __attribute__((visibility("default"))) ret name params;
ESG_ACL_FUNCTIONS(ACLSIM_DECLARE)
ESG_ACL_CAPTURE_FUNCTIONS(ACLSIM_DECLARE)
ESG_ACL_INFO_FUNCTIONS(ACLSIM_DECLARE)
ESG_ACL_LOAD_FUNCTIONS(ACLSIM_DECLARE)
#ifndef ACLSIM_WITHOUT_KERNEL_API
ESG_ACL_KERNEL_FUNCTIONS(ACLSIM_DECLARE)
#endif
#undef ACLSIM_DECLARE

namespace {

// AscendCL's error codes (acl/acl_base.h) for the failures the stand-in reports.
constexpr Error kInvalidParam = 100000;
constexpr Error kUninitialized = 100001;
constexpr Error kRepeatInitialize = 100002;
constexpr Error kBadAlloc = 200000;
constexpr Error kRtParamInvalid = 107000;  // ACL_ERROR_RT_PARAM_INVALID
constexpr Error kInvalidDevice = 107001;   // ACL_ERROR_RT_INVALID_DEVICEID
constexpr Error kStreamCapture = 107027;   // ACL_ERROR_RT_STREAM_CAPTURED
constexpr Error kCaptureDependency = 107024;  // ACL_ERROR_RT_CAPTURE_DEPENDENCY: a wait with no record in the capture
constexpr Error kStreamUnjoined = 107025;     // ACL_ERROR_RT_STREAM_UNJOINED
constexpr Error kCaptureConflict = 107032;    // ACL_ERROR_STREAM_CAPTURE_CONFLICT
constexpr Error kKernelFault = 507015;  // ACL_ERROR_RT_AICORE_EXCEPTION
constexpr Error kInjected = 500000;     // ACL_ERROR_INTERNAL_ERROR
constexpr Error kFeatureNotSupported = 207000;  // ACL_ERROR_RT_FEATURE_NOT_SUPPORT

constexpr size_t kGuard = 64;
constexpr uint8_t kGuardByte = 0xA5, kFreedByte = 0xDD;

thread_local std::string recent_error;

struct Task {
  std::string what;
  std::function<void()> run;
  // Runs even after a fault on its stream: an event record, so other streams' waits end (the
  // fault is reported at synchronization, not as a hang).
  bool always = false;
};

struct Captured;

struct SimStream {
  int id = 0;
  std::mutex mu;
  std::condition_variable wake, idle;
  std::deque<Task> queue;
  bool busy = false, stop = false;
  std::string error;  // the first failure since the last synchronize
  Captured* capture = nullptr;  // the capture it began or joined
  size_t capture_index = 0;     // its place in the capture's streams
  std::thread worker;
};

void drain(SimStream* st);

// Starts a stream's worker; stop_stream lets it finish its queue and joins it.
std::unique_ptr<SimStream> start_stream(int id) {
  auto st = std::make_unique<SimStream>();
  st->id = id;
  st->worker = std::thread(drain, st.get());
  return st;
}
void stop_stream(SimStream* st) {
  {
    std::lock_guard<std::mutex> lock(st->mu);
    st->stop = true;
    st->wake.notify_all();
  }
  st->worker.join();
}

// An event recorded inside a captured model is per replay: a latch of the replay, set by the
// captured record, awaited by the captured waits on it. It carries the recording stream's
// failure to the waiting one, so a fault anywhere in the model surfaces where the run synchronizes.
struct Latch {
  std::mutex mu;
  std::condition_variable done;
  bool set = false;
  std::string error;
};

struct CapturedTask {
  Task task;
  int signal = -1, wait = -1;  // a captured record of latch `signal`, or wait on latch `wait`
};

// A capture: the stream that began it, and the streams that joined it by waiting on an event
// recorded in it (CANN's cross-stream capture); each joined stream must merge back — end in a
// record that a stream already merged waits on — before the capture ends. Once ended, a model:
// its replays run the joined streams' tasks on streams of its own.
struct Captured {
  std::mutex mu;
  CaptureMode mode = kCaptureGlobal;        // which threads' synchronous calls it forbids
  std::thread::id thread;                    // the thread that began it
  std::vector<SimStream*> streams;
  std::vector<std::vector<CapturedTask>> tasks;  // per stream
  int latches = 0;
  std::map<void*, int> recorded;  // each event's latest record in the capture
  std::vector<std::unique_ptr<SimStream>> side;
  size_t size() const {
    size_t n = 0;
    for (const auto& t : tasks) n += t.size();
    return n;
  }
  ~Captured() {
    for (auto& st : side) stop_stream(st.get());
  }
};

struct EventState {
  int id = 0;
  uint32_t flags = 0;
  Captured* captured = nullptr;  // the capture its latest record is in
  std::mutex mu;
  std::condition_variable done;
  uint64_t recorded = 0, completed = 0;  // records enqueued, records reached
};

enum class Core { Vector, Cube };
struct Binary {
  ~Binary() {
    if (image_fd >= 0) ::close(image_fd);
  }
  int id = 0;
  void* dl = nullptr;
  // A binary loaded from memory: the anonymous file the loader opened, held while it is loaded
  // (the loader knows a library by its path, /proc/self/fd/<n>, which a closed fd's reuse would
  // make another binary's).
  int image_fd = -1;
  std::map<std::string, Core> kernels;  // each kernel and where it runs
  AclSimEnterBlock enter = nullptr;
};

struct Function {
  int id = 0;
  Binary* binary = nullptr;
  void* entry = nullptr;
  std::string name;
  Core core = Core::Cube;
};

struct Allocation {
  uint8_t* raw;
  size_t size;
  int id;
  bool live;
};

struct Sim {
  std::mutex mu;
  bool initialized = false;
  std::set<int32_t> devices_set;
  int next_id = 1;
  std::map<uintptr_t, Allocation> heap;  // by user address
  struct Pinned {
    uint8_t* raw;
    size_t size;
    int id;
  };
  std::map<uintptr_t, Pinned> pinned;  // aclrtMallocHost's live blocks, by address (a freed one is erased)
  size_t live_bytes = 0;
  std::set<void*> contexts;
  std::map<void*, std::unique_ptr<SimStream>> streams;
  std::map<void*, std::unique_ptr<EventState>> events;
  std::map<void*, std::unique_ptr<Binary>> binaries;
  std::map<void*, std::unique_ptr<Function>> functions;
  std::map<void*, std::unique_ptr<Captured>> models;
  FILE* log = nullptr;
  std::string log_path;
  std::mutex log_mu;
};

Sim& sim() {
  static Sim* s = new Sim();  // never destroyed: streams' threads may outlive static destruction
  return *s;
}

void log_line(const std::string& line) {
  Sim& s = sim();
  std::lock_guard<std::mutex> lock(s.log_mu);
  const char* path = std::getenv("ACLSIM_LOG");
  if (!path || !*path) return;
  if (!s.log || s.log_path != path) {  // a test may point the log elsewhere between models
    if (s.log) std::fclose(s.log);
    s.log_path = path;
    s.log = std::fopen(path, "a");
    if (!s.log) return;
  }
  std::fprintf(s.log, "%s\n", line.c_str());
  std::fflush(s.log);
}

Error fail(Error code, const std::string& call, const std::string& message) {
  recent_error = "aclsim: " + call + ": " + message;
  log_line(call + " FAILED " + std::to_string(code) + " " + message);
  return code;
}

bool injected(const char* call, const char* variable = "ACLSIM_FAIL") {
  const char* f = std::getenv(variable);
  return f && std::strcmp(f, call) == 0;
}

Error fail_silently(Error code, const std::string& call) {
  recent_error.clear();
  log_line(call + " FAILED " + std::to_string(code) + " (no message)");
  return code;
}

#define ACLSIM_ENTER(call)                                                                 \
  if (injected(call)) return fail(kInjected, call, "failure injected by ACLSIM_FAIL");         \
  if (injected(call, "ACLSIM_FAIL_SILENTLY")) return fail_silently(kInjected, call);           \
  if (!sim().initialized && std::strcmp(call, "aclInit") != 0) return fail(kUninitialized, call, "aclInit was not called")

std::string name_of(const char* kind, int id) { return std::string(kind) + "#" + std::to_string(id); }

// ---- device heap ----------------------------------------------------------------------------
// The allocation holding [p, p + bytes), or a description of what is wrong. Caller holds mu.
std::string check_range_locked(const void* p, size_t bytes) {
  Sim& s = sim();
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  auto it = s.heap.upper_bound(at);
  if (it == s.heap.begin()) return "not device memory";
  --it;
  const Allocation& a = it->second;
  if (at >= it->first + a.size + kGuard) return "not device memory";
  if (!a.live) return "use after free of " + name_of("mem", a.id);
  if (at + bytes > it->first + a.size)
    return "out of bounds of " + name_of("mem", a.id) + " (" + std::to_string(a.size) + " bytes; access ends " +
           std::to_string(at + bytes - it->first) + " bytes in)";
  return "";
}

bool is_device(const void* p) {
  std::lock_guard<std::mutex> lock(sim().mu);
  return check_range_locked(p, 0) != "not device memory";
}

void check_device(const void* p, size_t bytes, const char* what) {
  std::string problem;
  {
    std::lock_guard<std::mutex> lock(sim().mu);
    problem = check_range_locked(p, bytes);
  }
  if (!problem.empty()) throw std::runtime_error(std::string(what) + ": " + problem);
}

// ---- streams --------------------------------------------------------------------------------
void drain(SimStream* st) {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(st->mu);
      st->wake.wait(lock, [&] { return st->stop || !st->queue.empty(); });
      if (st->queue.empty()) return;
      task = std::move(st->queue.front());
      st->queue.pop_front();
      st->busy = true;
    }
    std::string failure;
    bool skip;
    {
      std::lock_guard<std::mutex> lock(st->mu);
      skip = !st->error.empty() && !task.always;
    }
    if (!skip) {
      try {
        task.run();
      } catch (const std::exception& e) {
        failure = task.what + ": " + e.what();
      }
    }
    std::lock_guard<std::mutex> lock(st->mu);
    if (!failure.empty() && st->error.empty()) st->error = failure;
    st->busy = false;
    if (st->queue.empty()) st->idle.notify_all();
  }
}

Error enqueue(SimStream* st, Task task) {
  std::lock_guard<std::mutex> lock(st->mu);
  if (st->capture) {
    std::lock_guard<std::mutex> capture_lock(st->capture->mu);
    st->capture->tasks[st->capture_index].push_back({std::move(task)});
    return kSuccess;
  }
  st->queue.push_back(std::move(task));
  st->wake.notify_one();
  return kSuccess;
}

SimStream* find_stream(void* handle) {
  std::lock_guard<std::mutex> lock(sim().mu);
  auto it = sim().streams.find(handle);
  return it == sim().streams.end() ? nullptr : it->second.get();
}

EventState* find_event(void* handle) {
  std::lock_guard<std::mutex> lock(sim().mu);
  auto it = sim().events.find(handle);
  return it == sim().events.end() ? nullptr : it->second.get();
}

// A null stream is the default stream: the sim gives it stream semantics of its own.
SimStream* stream_or_default(void* handle) {
  if (handle) return find_stream(handle);
  static SimStream* fallback = [] {
    auto* st = new SimStream();
    st->id = 0;
    st->worker = std::thread(drain, st);
    st->worker.detach();
    return st;
  }();
  return fallback;
}

// Calls a kernel entry with its pointer arguments, through the entry's own type (one pointer
// parameter per argument), for up to kMaxArgs arguments.
constexpr size_t kMaxArgs = 32;
template <size_t... I>
void call_with(void* entry, void* const* a, std::index_sequence<I...>) {
  using Fn = void (*)(std::remove_reference_t<decltype((void)I, a[0])>...);
  reinterpret_cast<Fn>(entry)(a[I]...);
}
template <size_t... N>
constexpr auto make_callers(std::index_sequence<N...>) {
  return std::array<void (*)(void*, void* const*), sizeof...(N)>{
      [](void* entry, void* const* a) { call_with(entry, a, std::make_index_sequence<N>{}); }...};
}
void call_entry(void* entry, void* const* a, size_t n) {
  static constexpr auto callers = make_callers(std::make_index_sequence<kMaxArgs + 1>{});
  if (n == 0 || n > kMaxArgs) throw std::runtime_error("the simulated device passes 1 to 32 kernel arguments, got " + std::to_string(n));
  callers[n](entry, a);
}

// The joined streams that never merged back into the one that began the capture.
std::string unjoined(const Captured& c) {
  std::vector<bool> merged(c.streams.size(), false);
  merged[0] = true;
  auto waited_on_by_merged = [&](int latch) {
    for (size_t j = 0; j < c.streams.size(); ++j)
      if (merged[j])
        for (const CapturedTask& t : c.tasks[j])
          if (t.wait == latch) return true;
    return false;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 1; i < c.streams.size(); ++i)
      if (!merged[i] && !c.tasks[i].empty() && c.tasks[i].back().signal >= 0 && waited_on_by_merged(c.tasks[i].back().signal))
        merged[i] = changed = true;
  }
  std::string list;
  for (size_t i = 1; i < c.streams.size(); ++i)
    if (!merged[i]) list += (list.empty() ? "" : ", ") + name_of("stream", c.streams[i]->id);
  return list;
}
}  // namespace

// ---- the functions --------------------------------------------------------------------------
extern "C" {

Error aclInit(const char* config_path) {
  ACLSIM_ENTER("aclInit");
  std::lock_guard<std::mutex> lock(sim().mu);
  if (sim().initialized) return fail(kRepeatInitialize, "aclInit", "already initialized");
  sim().initialized = true;
  log_line(std::string("aclInit config=") + (config_path ? config_path : "null"));
  return kSuccess;
}

Error aclFinalize() {
  ACLSIM_ENTER("aclFinalize");
  sim().initialized = false;
  log_line("aclFinalize");
  return kSuccess;
}

const char* aclGetRecentErrMsg() { return recent_error.empty() ? nullptr : recent_error.c_str(); }

// ACLSIM_CANN_VERSION names the CANN it stands in for (default 8.5.0).
Error aclsysGetCANNVersion(int name, CannPackageVersion* version) {
  ACLSIM_ENTER("aclsysGetCANNVersion");
  if (!version || name < 0 || name > 7) return fail(kInvalidParam, "aclsysGetCANNVersion", "bad package name or null version");
  const char* v = std::getenv("ACLSIM_CANN_VERSION");
  std::memset(version, 0, sizeof *version);
  std::snprintf(version->version, sizeof version->version, "%s", v && *v ? v : "8.5.0");
  return kSuccess;
}

// ACLSIM_SOC names the simulated SoC (default Ascend910B1, an Atlas A2).
const char* aclrtGetSocName() {
  if (injected("aclrtGetSocName", "ACLSIM_FAIL_SILENTLY")) return fail_silently(kInjected, "aclrtGetSocName"), nullptr;
  static thread_local std::string name;
  const char* soc = std::getenv("ACLSIM_SOC");
  name = soc && *soc ? soc : "Ascend910B1";
  log_line("aclrtGetSocName -> " + name);
  return name.c_str();
}

Error aclrtGetDeviceCount(uint32_t* count) {
  ACLSIM_ENTER("aclrtGetDeviceCount");
  if (!count) return fail(kInvalidParam, "aclrtGetDeviceCount", "count is null");
  const char* n = std::getenv("ACLSIM_DEVICES");
  *count = n ? static_cast<uint32_t>(std::atoi(n)) : 1;
  log_line("aclrtGetDeviceCount -> " + std::to_string(*count));
  return kSuccess;
}

static Error check_device_id(const char* call, int32_t device) {
  uint32_t count = 0;
  const char* n = std::getenv("ACLSIM_DEVICES");
  count = n ? static_cast<uint32_t>(std::atoi(n)) : 1;
  if (device < 0 || static_cast<uint32_t>(device) >= count)
    return fail(kInvalidDevice, call, "device " + std::to_string(device) + " does not exist (" + std::to_string(count) + " devices)");
  return kSuccess;
}

// The simulated device's cores: 8 AI cores (ACLSIM_AI_CORES sets another count), two vector
// cores each as on Ascend 910B, and 192 MiB of L2.
Error aclGetDeviceCapability(uint32_t device, DeviceInfo info, int64_t* value) {
  ACLSIM_ENTER("aclGetDeviceCapability");
  if (Error e = check_device_id("aclGetDeviceCapability", static_cast<int32_t>(device))) return e;
  if (!value) return fail(kInvalidParam, "aclGetDeviceCapability", "value is null");
  const char* n = std::getenv("ACLSIM_AI_CORES");
  const int64_t cores = n ? std::atoll(n) : 8;
  switch (info) {
    case kAiCoreNum: *value = cores; break;
    case kVectorCoreNum: *value = 2 * cores; break;
    case kL2Size: *value = int64_t{192} << 20; break;
    default: return fail(kInvalidParam, "aclGetDeviceCapability", "unknown aclDeviceInfo " + std::to_string(info));
  }
  log_line("aclGetDeviceCapability " + std::to_string(device) + " " + std::to_string(info) + " -> " + std::to_string(*value));
  return kSuccess;
}

Error aclrtSetDevice(int32_t device) {
  ACLSIM_ENTER("aclrtSetDevice");
  if (Error e = check_device_id("aclrtSetDevice", device)) return e;
  std::lock_guard<std::mutex> lock(sim().mu);
  sim().devices_set.insert(device);
  log_line("aclrtSetDevice " + std::to_string(device));
  return kSuccess;
}

Error aclrtResetDevice(int32_t device) {
  ACLSIM_ENTER("aclrtResetDevice");
  std::lock_guard<std::mutex> lock(sim().mu);
  if (!sim().devices_set.erase(device)) return fail(kInvalidDevice, "aclrtResetDevice", "device " + std::to_string(device) + " was not set");
  log_line("aclrtResetDevice " + std::to_string(device));
  return kSuccess;
}

Error aclrtCreateContext(Context* context, int32_t device) {
  ACLSIM_ENTER("aclrtCreateContext");
  if (!context) return fail(kInvalidParam, "aclrtCreateContext", "context is null");
  if (Error e = check_device_id("aclrtCreateContext", device)) return e;
  std::lock_guard<std::mutex> lock(sim().mu);
  const int id = sim().next_id++;
  *context = reinterpret_cast<Context>(static_cast<uintptr_t>(0xC0000000u + id));
  sim().contexts.insert(*context);
  log_line("aclrtCreateContext " + name_of("ctx", id) + " device=" + std::to_string(device));
  return kSuccess;
}

Error aclrtDestroyContext(Context context) {
  ACLSIM_ENTER("aclrtDestroyContext");
  std::lock_guard<std::mutex> lock(sim().mu);
  if (!sim().contexts.erase(context)) return fail(kInvalidParam, "aclrtDestroyContext", "not a context");
  log_line("aclrtDestroyContext " + name_of("ctx", static_cast<int>(reinterpret_cast<uintptr_t>(context) - 0xC0000000u)));
  return kSuccess;
}

Error aclrtSetCurrentContext(Context context) {
  ACLSIM_ENTER("aclrtSetCurrentContext");
  std::lock_guard<std::mutex> lock(sim().mu);
  if (!sim().contexts.count(context)) return fail(kInvalidParam, "aclrtSetCurrentContext", "not a context");
  log_line("aclrtSetCurrentContext " + name_of("ctx", static_cast<int>(reinterpret_cast<uintptr_t>(context) - 0xC0000000u)));
  return kSuccess;
}

Error aclrtCreateStream(Stream* stream) {
  ACLSIM_ENTER("aclrtCreateStream");
  if (!stream) return fail(kInvalidParam, "aclrtCreateStream", "stream is null");
  std::lock_guard<std::mutex> lock(sim().mu);
  auto st = start_stream(sim().next_id++);
  *stream = st.get();
  log_line("aclrtCreateStream " + name_of("stream", st->id));
  sim().streams[*stream] = std::move(st);
  return kSuccess;
}

Error aclrtDestroyStream(Stream stream) {
  ACLSIM_ENTER("aclrtDestroyStream");
  std::unique_ptr<SimStream> st;
  {
    std::lock_guard<std::mutex> lock(sim().mu);
    auto it = sim().streams.find(stream);
    if (it == sim().streams.end()) return fail(kInvalidParam, "aclrtDestroyStream", "not a stream");
    st = std::move(it->second);
    sim().streams.erase(it);
  }
  stop_stream(st.get());  // the queue drains first, as the device finishes a destroyed stream's work
  log_line("aclrtDestroyStream " + name_of("stream", st->id));
  return kSuccess;
}

Error aclrtSynchronizeStream(Stream stream) {
  ACLSIM_ENTER("aclrtSynchronizeStream");
  SimStream* st = stream_or_default(stream);
  if (!st) return fail(kInvalidParam, "aclrtSynchronizeStream", "not a stream");
  std::string error;
  {
    std::unique_lock<std::mutex> lock(st->mu);
    if (st->capture) return fail(kStreamCapture, "aclrtSynchronizeStream", "the stream is being captured");
    st->idle.wait(lock, [&] { return st->queue.empty() && !st->busy; });
    error.swap(st->error);
  }
  log_line("aclrtSynchronizeStream " + name_of("stream", st->id));
  if (!error.empty()) return fail(kKernelFault, "aclrtSynchronizeStream", error);
  return kSuccess;
}

Error make_event(Event* event, uint32_t flags, const char* call) {
  if (!event) return fail(kInvalidParam, call, "event is null");
  auto ev = std::make_unique<EventState>();
  std::lock_guard<std::mutex> lock(sim().mu);
  ev->id = sim().next_id++;
  ev->flags = flags;
  *event = ev.get();
  log_line(std::string(call) + " " + name_of("event", ev->id) + (flags ? " flag=" + std::to_string(flags) : ""));
  sim().events[*event] = std::move(ev);
  return kSuccess;
}

Error aclrtCreateEvent(Event* event) {
  ACLSIM_ENTER("aclrtCreateEvent");
  return make_event(event, 0, "aclrtCreateEvent");
}

Error aclrtCreateEventExWithFlag(Event* event, uint32_t flag) {
  ACLSIM_ENTER("aclrtCreateEventExWithFlag");
  if (flag & ~0xbu) return fail(kInvalidParam, "aclrtCreateEventExWithFlag", "unknown flags " + std::to_string(flag));
  return make_event(event, flag, "aclrtCreateEventExWithFlag");
}

Error aclrtDestroyEvent(Event event) {
  ACLSIM_ENTER("aclrtDestroyEvent");
  std::lock_guard<std::mutex> lock(sim().mu);
  auto it = sim().events.find(event);
  if (it == sim().events.end()) return fail(kInvalidParam, "aclrtDestroyEvent", "not an event");
  log_line("aclrtDestroyEvent " + name_of("event", it->second->id));
  sim().events.erase(it);
  return kSuccess;
}

Error aclrtRecordEvent(Event event, Stream stream) {
  ACLSIM_ENTER("aclrtRecordEvent");
  EventState* ev = find_event(event);
  SimStream* st = stream_or_default(stream);
  if (!ev || !st) return fail(kInvalidParam, "aclrtRecordEvent", "not an event or stream");
  {
    std::lock_guard<std::mutex> lock(st->mu);
    if (Captured* c = st->capture) {  // a record of the model: a latch of each replay
      if (!(ev->flags & kEventSync))
        return fail(kFeatureNotSupported, "aclrtRecordEvent",
                    "an event recorded in a capture is made by aclrtCreateEventExWithFlag with ACL_EVENT_SYNC (CANN's cross-stream capture)");
      log_line("aclrtRecordEvent " + name_of("event", ev->id) + " " + name_of("stream", st->id));
      std::lock_guard<std::mutex> capture_lock(c->mu);
      const int latch = c->latches++;
      c->recorded[ev] = latch;
      c->tasks[st->capture_index].push_back({{"record " + name_of("event", ev->id), nullptr, true}, latch, -1});
      std::lock_guard<std::mutex> event_lock(ev->mu);
      ev->captured = c;
      return kSuccess;
    }
  }
  log_line("aclrtRecordEvent " + name_of("event", ev->id) + " " + name_of("stream", st->id));
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(ev->mu);
    generation = ++ev->recorded;
    ev->captured = nullptr;
  }
  return enqueue(st, {"record " + name_of("event", ev->id),
                      [ev, generation] {
                        std::lock_guard<std::mutex> lock(ev->mu);
                        ev->completed = std::max(ev->completed, generation);
                        ev->done.notify_all();
                      },
                      true});
}

Error aclrtStreamWaitEvent(Stream stream, Event event) {
  ACLSIM_ENTER("aclrtStreamWaitEvent");
  EventState* ev = find_event(event);
  SimStream* st = stream_or_default(stream);
  if (!ev || !st) return fail(kInvalidParam, "aclrtStreamWaitEvent", "not an event or stream");
  uint64_t generation;
  Captured* captured;
  {
    std::lock_guard<std::mutex> lock(ev->mu);
    generation = ev->recorded;  // the latest record enqueued when the wait is
    captured = ev->captured;
  }
  {
    std::lock_guard<std::mutex> lock(st->mu);
    if (captured) {  // a wait on a record of a capture: the stream joins it, if it had not
      if (st->capture && st->capture != captured)
        return fail(kCaptureConflict, "aclrtStreamWaitEvent", "the stream and the event are in different captures");
      std::lock_guard<std::mutex> capture_lock(captured->mu);
      const bool joins = !st->capture;
      if (joins) {
        st->capture = captured;
        st->capture_index = captured->streams.size();
        captured->streams.push_back(st);
        captured->tasks.emplace_back();
      }
      log_line("aclrtStreamWaitEvent " + name_of("stream", st->id) + " " + name_of("event", ev->id) + (joins ? " (joins the capture)" : ""));
      captured->tasks[st->capture_index].push_back({{"wait " + name_of("event", ev->id), nullptr}, -1, captured->recorded.at(ev)});
      return kSuccess;
    }
    if (st->capture)
      return fail(kCaptureDependency, "aclrtStreamWaitEvent", "a wait in a capture on " + name_of("event", ev->id) + ", not recorded in it");
  }
  log_line("aclrtStreamWaitEvent " + name_of("stream", st->id) + " " + name_of("event", ev->id) +
           (generation ? "" : " (never recorded: does not wait)"));
  return enqueue(st, {"wait " + name_of("event", ev->id), [ev, generation] {
                        std::unique_lock<std::mutex> lock(ev->mu);
                        ev->done.wait(lock, [&] { return ev->completed >= generation; });
                      }});
}

// Queued on the waiting stream after its wait: the event may then be recorded again. CANN
// documents no reset inside a capture, and none of an ACL_EVENT_SYNC event: both are refused.
Error aclrtResetEvent(Event event, Stream stream) {
  ACLSIM_ENTER("aclrtResetEvent");
  EventState* ev = find_event(event);
  SimStream* st = stream_or_default(stream);
  if (!ev || !st) return fail(kInvalidParam, "aclrtResetEvent", "not an event or stream");
  if (ev->flags & kEventSync) return fail(kFeatureNotSupported, "aclrtResetEvent", "an event made with ACL_EVENT_SYNC is not reset");
  {
    std::lock_guard<std::mutex> lock(st->mu);
    if (st->capture) return fail(kFeatureNotSupported, "aclrtResetEvent", "a reset in a capture");
  }
  log_line("aclrtResetEvent " + name_of("event", ev->id) + " " + name_of("stream", st->id));
  return enqueue(st, {"reset " + name_of("event", ev->id), [] {}});
}

Error aclrtMallocAlign32(void** ptr, size_t size, MallocPolicy policy) {
  ACLSIM_ENTER("aclrtMallocAlign32");
  if (!ptr || size == 0) return fail(kInvalidParam, "aclrtMallocAlign32", "null pointer or zero size");
  Sim& s = sim();
  std::lock_guard<std::mutex> lock(s.mu);
  const char* cap = std::getenv("ACLSIM_DEVICE_MEMORY");
  if (cap && s.live_bytes + size > std::strtoull(cap, nullptr, 10))
    return fail(kBadAlloc, "aclrtMallocAlign32", "out of device memory (" + std::to_string(size) + " bytes asked, " +
                                                     std::to_string(s.live_bytes) + " of " + cap + " in use)");
  const size_t padded = (size + 63) / 64 * 64;  // aligned_alloc wants a multiple of the alignment
  auto* raw = static_cast<uint8_t*>(std::aligned_alloc(64, kGuard + padded + kGuard));
  if (!raw) return fail(kBadAlloc, "aclrtMallocAlign32", "host allocation failed");
  std::memset(raw, kGuardByte, kGuard);
  std::memset(raw + kGuard + size, kGuardByte, padded - size + kGuard);
  const int id = s.next_id++;
  s.heap[reinterpret_cast<uintptr_t>(raw + kGuard)] = {raw, size, id, true};
  s.live_bytes += size;
  *ptr = raw + kGuard;
  log_line("aclrtMallocAlign32 " + name_of("mem", id) + " bytes=" + std::to_string(size) + " policy=" + std::to_string(policy));
  return kSuccess;
}

Error aclrtFree(void* ptr) {
  ACLSIM_ENTER("aclrtFree");
  Sim& s = sim();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.heap.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == s.heap.end()) return fail(kInvalidParam, "aclrtFree", "not the start of a device allocation");
  Allocation& a = it->second;
  if (!a.live) return fail(kInvalidParam, "aclrtFree", "double free of " + name_of("mem", a.id));
  const size_t padded = (a.size + 63) / 64 * 64;
  std::string corrupt;
  for (size_t i = 0; i < kGuard && corrupt.empty(); ++i)
    if (a.raw[i] != kGuardByte) corrupt = "written before its start";
  for (size_t i = kGuard + a.size; i < kGuard + padded + kGuard && corrupt.empty(); ++i)
    if (a.raw[i] != kGuardByte) corrupt = "written past its end";
  a.live = false;
  s.live_bytes -= a.size;
  std::memset(a.raw + kGuard, kFreedByte, a.size);  // poisoned, never reused
  log_line("aclrtFree " + name_of("mem", a.id));
  if (!corrupt.empty()) return fail(kBadAlloc, "aclrtFree", name_of("mem", a.id) + " was " + corrupt);
  return kSuccess;
}

static Error check_copy(const char* call, void* dst, size_t dst_max, const void* src, size_t count, MemcpyKind kind) {
  if (!dst || !src) return fail(kInvalidParam, call, "null pointer");
  if (count > dst_max) return fail(kInvalidParam, call, std::to_string(count) + " bytes into a destination of " + std::to_string(dst_max));
  const bool dst_device = kind == kHostToDevice || kind == kDeviceToDevice, src_device = kind == kDeviceToHost || kind == kDeviceToDevice;
  for (auto [p, device, what] : {std::tuple<const void*, bool, const char*>{dst, dst_device, "destination"}, {src, src_device, "source"}}) {
    if (device) {
      std::lock_guard<std::mutex> lock(sim().mu);
      const std::string problem = check_range_locked(p, count);
      if (!problem.empty()) return fail(kInvalidParam, call, std::string(what) + ": " + problem);
    } else if (is_device(p)) {
      return fail(kInvalidParam, call, std::string(what) + " is device memory but the copy kind says host");
    }
  }
  return kSuccess;
}

// Page-locked host memory. Its blocks are tracked so that an asynchronous copy can check its
// host side, as CANN 8.0-8.1 document (a copy from or to pageable memory fails at execution;
// 8.3 on it turns synchronous, which would serialize a captured model: refused here as well).
Error aclrtMallocHost(void** ptr, size_t size) {
  ACLSIM_ENTER("aclrtMallocHost");
  if (!ptr || size == 0) return fail(kInvalidParam, "aclrtMallocHost", "null pointer or zero size");
  auto* raw = static_cast<uint8_t*>(std::aligned_alloc(64, (size + 63) / 64 * 64));
  if (!raw) return fail(kBadAlloc, "aclrtMallocHost", "host allocation failed");
  Sim& s = sim();
  std::lock_guard<std::mutex> lock(s.mu);
  const int id = s.next_id++;
  s.pinned[reinterpret_cast<uintptr_t>(raw)] = {raw, size, id};
  *ptr = raw;
  log_line("aclrtMallocHost " + name_of("host", id) + " bytes=" + std::to_string(size));
  return kSuccess;
}

Error aclrtFreeHost(void* ptr) {
  ACLSIM_ENTER("aclrtFreeHost");
  Sim& s = sim();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.pinned.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == s.pinned.end()) return fail(kInvalidParam, "aclrtFreeHost", "not a block of aclrtMallocHost (or freed already)");
  // Forgotten, as the memory may come back from another allocation: a copy from it is refused.
  log_line("aclrtFreeHost " + name_of("host", it->second.id));
  std::free(it->second.raw);
  s.pinned.erase(it);
  return kSuccess;
}

// What is wrong with the host side [p, p + bytes) of an asynchronous copy, or "".
static std::string check_pinned(const void* p, size_t bytes) {
  if (reinterpret_cast<uintptr_t>(p) % 64)
    return "not 64-byte aligned (CANN 8.0-8.3 require it of an asynchronous copy's addresses)";
  Sim& s = sim();
  std::lock_guard<std::mutex> lock(s.mu);
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  auto it = s.pinned.upper_bound(at);
  if (it != s.pinned.begin() && (--it, at + bytes <= it->first + it->second.size)) return "";
  return "pageable memory, not from aclrtMallocHost (CANN 8.0-8.1: an error at execution; 8.3 on: the copy turns synchronous)";
}

static const char* kind_name(MemcpyKind kind) {
  switch (kind) {
    case kHostToHost: return "H2H";
    case kHostToDevice: return "H2D";
    case kDeviceToHost: return "D2H";
    case kDeviceToDevice: return "D2D";
  }
  return "?";
}

Error aclrtMemcpy(void* dst, size_t dst_max, const void* src, size_t count, MemcpyKind kind) {
  ACLSIM_ENTER("aclrtMemcpy");
  {
    // A synchronous copy is illegal while a capture that forbids it is under way: one in global
    // mode on any thread, one in thread-local mode on this thread (relaxed forbids none).
    std::lock_guard<std::mutex> lock(sim().mu);
    for (auto& [h, st] : sim().streams) {
      std::lock_guard<std::mutex> stream_lock(st->mu);
      const Captured* c = st->capture;
      if (c && (c->mode == kCaptureGlobal || (c->mode == kCaptureThreadLocal && c->thread == std::this_thread::get_id())))
        return fail(kStreamCapture, "aclrtMemcpy", "a synchronous copy while a stream is being captured");
    }
  }
  if (Error e = check_copy("aclrtMemcpy", dst, dst_max, src, count, kind)) return e;
  std::memmove(dst, src, count);
  log_line(std::string("aclrtMemcpy ") + kind_name(kind) + " bytes=" + std::to_string(count));
  return kSuccess;
}

Error aclrtMemcpyAsync(void* dst, size_t dst_max, const void* src, size_t count, MemcpyKind kind, Stream stream) {
  ACLSIM_ENTER("aclrtMemcpyAsync");
  SimStream* st = stream_or_default(stream);
  if (!st) return fail(kInvalidParam, "aclrtMemcpyAsync", "not a stream");
  if (Error e = check_copy("aclrtMemcpyAsync", dst, dst_max, src, count, kind)) return e;
  if (kind == kHostToDevice || kind == kDeviceToHost)
    if (const std::string problem = check_pinned(kind == kHostToDevice ? src : dst, count); !problem.empty())
      return fail(kInvalidParam, "aclrtMemcpyAsync", std::string(kind == kHostToDevice ? "source" : "destination") + " is " + problem);
  log_line(std::string("aclrtMemcpyAsync ") + kind_name(kind) + " bytes=" + std::to_string(count) + " " + name_of("stream", st->id));
  return enqueue(st, {std::string("memcpy ") + kind_name(kind), [=] {
                        // Re-checked when it runs: the memory may have been freed since.
                        if (kind != kHostToDevice) check_device(src, count, "memcpy source");
                        if (kind != kDeviceToHost) check_device(dst, count, "memcpy destination");
                        std::memmove(dst, src, count);
                      }});
}

// The core a binary names as a whole (the .json's "magic" beside a file, the magic option with
// data), or why it names none.
struct WholeCore {
  std::optional<Core> core;
  std::string none_because;
};

// Where each kernel of a binary runs, as CANN's runtime decides (hicann runtime v8.5.0,
// binary_loader.cc and elf.cc): when every kernel has a `.ascend.meta.<kernel>` record, its
// record's kernel type decides and the whole binary's core is not asked; a record without a
// valid type fails the load, as do more records than kernels. Otherwise (no record, or some
// kernels without one) the whole binary's core decides, and a binary that names none is refused.
static Error kernel_cores(const char* call, const char* path, const aclsim::KernelImage& image, const WholeCore& whole,
                          std::map<std::string, Core>* cores) {
  const size_t records = image.records.size(), kernels = image.kernels.size();
  if (records > kernels)
    return fail(kInvalidParam, call, std::string(path) + " has " + std::to_string(records) + " .ascend.meta records for " + std::to_string(kernels) + " kernels");
  for (const std::string& kernel : image.kernels) {
    if (records == kernels) {
      const auto record = image.records.find(kernel);
      if (record == image.records.end() || record->second == aclsim::kTypeNone || record->second >= aclsim::kTypeEnd)
        return fail(kInvalidParam, call, std::string(path) + ": kernel " + kernel + " has no valid kernel type in an .ascend.meta record, "
                                         "though every kernel has a record");
      if (record->second > aclsim::kTypeAiv)
        return fail(kInvalidParam, call, "kernel " + kernel + " is of kernel type " + std::to_string(record->second) + " (mixed cores), which is not simulated");
      (*cores)[kernel] = record->second == aclsim::kTypeAiv ? Core::Vector : Core::Cube;
    } else if (whole.core) {
      (*cores)[kernel] = *whole.core;
    } else {
      return fail(kInvalidParam, call, std::string(path) + " gives its kernels no .ascend.meta records and " + whole.none_because);
    }
  }
  return kSuccess;
}

// A simulated binary (a shared library the host compiler built) at `path`.
static Error load_binary(const char* call, const char* path, const WholeCore& whole, BinHandle* handle, int image_fd = -1) {
  aclsim::KernelImage image;
  if (const std::string why = aclsim::read_kernel_image(path, ACLSIM_ENTER_BLOCK, &image); !why.empty())
    return fail(kInvalidParam, call, std::string(path) + " is not a kernel binary: " + why);
  // CANN's ELF loader applies no relocations: a relocatable object (ET_REL, what a compile
  // without the link step leaves) would run at the wrong addresses, so it is refused here.
  if (image.relocatable)
    return fail(kInvalidParam, call, std::string(path) + " is a relocatable object (ELF type ET_REL), which the loader would misplace: "
                                     "link it first (ld.lld -m aicorelinux -Ttext=0 ... -static, as CANN's build does)");
  std::map<std::string, Core> cores;
  if (Error e = kernel_cores(call, path, image, whole, &cores)) return e;
  void* dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!dl) return fail(kInvalidParam, call, std::string("cannot load ") + path + ": " + dlerror());
  auto enter = reinterpret_cast<AclSimEnterBlock>(dlsym(dl, ACLSIM_ENTER_BLOCK));
  if (!enter) {
    dlclose(dl);
    return fail(kInvalidParam, call, std::string(path) + " is not a simulated kernel binary");
  }
  auto b = std::make_unique<Binary>();
  std::lock_guard<std::mutex> lock(sim().mu);
  b->id = sim().next_id++;
  b->dl = dl;
  b->kernels = std::move(cores);
  b->enter = enter;
  b->image_fd = image_fd;
  *handle = b.get();
  std::string line = std::string(call) + " " + name_of("bin", b->id);
  for (const auto& [kernel, core] : b->kernels) line += " " + kernel + (core == Core::Vector ? ":vector" : ":cube");
  log_line(line);
  sim().binaries[*handle] = std::move(b);
  return kSuccess;
}

// The binary's core from the `<stem>.json` beside it, as CANN's loader reads it (binary_loader.cc,
// json_parse.cc of the open runtime): "magic" RT_DEV_BINARY_MAGIC_ELF_AIVEC (or a mixed
// kernel's) is the vector core, RT_DEV_BINARY_MAGIC_ELF_AICUBE and RT_DEV_BINARY_MAGIC_ELF the
// cube; any other magic, or none, is no core. The magic load option is refused, as CANN refuses
// it for a file.
Error aclrtBinaryLoadFromFile(const char* path, void* options, BinHandle* handle) {
  ACLSIM_ENTER("aclrtBinaryLoadFromFile");
  if (!path || !handle) return fail(kInvalidParam, "aclrtBinaryLoadFromFile", "null argument");
  if (options) return fail(kRtParamInvalid, "aclrtBinaryLoadFromFile", "load options are not simulated (and the magic option is refused for a file)");
  std::string json = path;
  json = json.substr(0, json.find_last_of('.')) + ".json";
  WholeCore whole{std::nullopt, "there is no " + json + " beside it"};
  if (std::ifstream in(json); in) {
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    whole.none_because = json + " names no valid \"magic\"";
    for (const auto& [magic, core] : {std::pair{"\"RT_DEV_BINARY_MAGIC_ELF_AIVEC\"", Core::Vector}, {"\"FFTS_BINARY_MAGIC_ELF_MIX_AIV\"", Core::Vector},
                                      {"\"FFTS_BINARY_MAGIC_ELF_MIX_AIC\"", Core::Vector}, {"\"RT_DEV_BINARY_MAGIC_ELF_AICUBE\"", Core::Cube},
                                      {"\"RT_DEV_BINARY_MAGIC_ELF\"", Core::Cube}})
      if (text.find(magic) != std::string::npos) {
        whole.core = core;
        break;
      }
  }
  return load_binary("aclrtBinaryLoadFromFile", path, whole, handle);
}

// The same from memory: the image goes to an anonymous file the dynamic loader opens, and the
// binary's core comes as the magic option (nothing beside the data to read), the vector core's
// or the cube's.
Error aclrtBinaryLoadFromData(const void* data, size_t length, const BinaryLoadOptions* options, BinHandle* handle) {
  ACLSIM_ENTER("aclrtBinaryLoadFromData");
  if (!data || !length || !handle) return fail(kInvalidParam, "aclrtBinaryLoadFromData", "null data, zero length or null handle");
  WholeCore whole{std::nullopt, "no magic load option was given"};
  for (size_t i = 0; options && i < options->count; ++i) {
    const BinaryLoadOption& o = options->options[i];
    if (o.type != kBinaryLoadOptionMagic) return fail(kRtParamInvalid, "aclrtBinaryLoadFromData", "only the magic load option is simulated");
    if (o.value.magic == kBinaryMagicVectorCore) whole.core = Core::Vector;
    else if (o.value.magic == 0x41494343u || o.value.magic == 0x43554245u) whole.core = Core::Cube;
    else return fail(kRtParamInvalid, "aclrtBinaryLoadFromData", "an unknown magic " + std::to_string(o.value.magic));
  }
  const int fd = memfd_create("aclsim-binary", 0);
  if (fd < 0) return fail(kInvalidParam, "aclrtBinaryLoadFromData", "memfd_create failed");
  const bool written = ::write(fd, data, length) == static_cast<ssize_t>(length);
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  const Error status = written ? load_binary("aclrtBinaryLoadFromData", path.c_str(), whole, handle, fd)
                               : fail(kInvalidParam, "aclrtBinaryLoadFromData", "cannot write the image");
  if (status != kSuccess) ::close(fd);
  return status;
}

Error aclrtBinaryGetFunction(BinHandle handle, const char* kernel_name, FuncHandle* func) {
  ACLSIM_ENTER("aclrtBinaryGetFunction");
  std::lock_guard<std::mutex> lock(sim().mu);
  auto it = sim().binaries.find(handle);
  if (it == sim().binaries.end() || !kernel_name || !func) return fail(kInvalidParam, "aclrtBinaryGetFunction", "bad argument");
  const auto kernel = it->second->kernels.find(kernel_name);
  void* entry = kernel == it->second->kernels.end() ? nullptr : dlsym(it->second->dl, kernel_name);
  if (!entry) return fail(kInvalidParam, "aclrtBinaryGetFunction", std::string("no kernel named ") + kernel_name);
  auto f = std::make_unique<Function>();
  f->id = sim().next_id++;
  f->binary = it->second.get();
  f->entry = entry;
  f->name = kernel_name;
  f->core = kernel->second;
  *func = f.get();
  log_line("aclrtBinaryGetFunction " + name_of("func", f->id) + " " + name_of("bin", it->second->id) + " " + kernel_name);
  sim().functions[*func] = std::move(f);
  return kSuccess;
}

Error aclrtBinaryUnLoad(BinHandle handle) {
  ACLSIM_ENTER("aclrtBinaryUnLoad");
  std::lock_guard<std::mutex> lock(sim().mu);
  auto it = sim().binaries.find(handle);
  if (it == sim().binaries.end()) return fail(kInvalidParam, "aclrtBinaryUnLoad", "not a binary");
  for (auto f = sim().functions.begin(); f != sim().functions.end();)
    f = f->second->binary == it->second.get() ? sim().functions.erase(f) : std::next(f);
  log_line("aclrtBinaryUnLoad " + name_of("bin", it->second->id));
  dlclose(it->second->dl);
  sim().binaries.erase(it);
  return kSuccess;
}

// The calling thread's one argument handle, as CANN's: each aclrtKernelArgsInit starts it anew.
struct ArgsState {
  Function* function = nullptr;
  std::vector<void*> params;
  bool finalized = false;
};
thread_local ArgsState thread_args;

Error aclrtKernelArgsInit(FuncHandle func, ArgsHandle* args) {
  ACLSIM_ENTER("aclrtKernelArgsInit");
  if (!args) return fail(kInvalidParam, "aclrtKernelArgsInit", "null handle");
  std::lock_guard<std::mutex> lock(sim().mu);
  auto it = sim().functions.find(func);
  if (it == sim().functions.end()) return fail(kInvalidParam, "aclrtKernelArgsInit", "not a function");
  thread_args = {it->second.get(), {}, false};
  *args = &thread_args;
  return kSuccess;
}

Error aclrtKernelArgsAppend(ArgsHandle args, void* param, size_t param_size, ParamHandle* param_handle) {
  ACLSIM_ENTER("aclrtKernelArgsAppend");
  if (args != &thread_args || !thread_args.function) return fail(kInvalidParam, "aclrtKernelArgsAppend", "not this thread's argument handle");
  if (thread_args.finalized) return fail(kInvalidParam, "aclrtKernelArgsAppend", "the handle is finalized");
  // The generated kernels take pointer parameters only (GM_ADDR).
  if (!param || param_size != sizeof(void*)) return fail(kInvalidParam, "aclrtKernelArgsAppend", "not an 8-byte parameter");
  void* value = nullptr;
  std::memcpy(&value, param, sizeof value);  // copied now: the caller's variable may go
  thread_args.params.push_back(value);
  if (param_handle) *param_handle = &thread_args.params.back();
  return kSuccess;
}

Error aclrtKernelArgsFinalize(ArgsHandle args) {
  ACLSIM_ENTER("aclrtKernelArgsFinalize");
  if (args != &thread_args || !thread_args.function) return fail(kInvalidParam, "aclrtKernelArgsFinalize", "not this thread's argument handle");
  thread_args.finalized = true;
  return kSuccess;
}

Error aclrtLaunchKernelWithConfig(FuncHandle func, uint32_t num_blocks, Stream stream, LaunchKernelCfg* cfg, ArgsHandle args, void* reserve) {
  ACLSIM_ENTER("aclrtLaunchKernelWithConfig");
  Function* f;
  {
    std::lock_guard<std::mutex> lock(sim().mu);
    auto it = sim().functions.find(func);
    if (it == sim().functions.end()) return fail(kInvalidParam, "aclrtLaunchKernelWithConfig", "not a function");
    f = it->second.get();
  }
  SimStream* st = stream_or_default(stream);
  if (!st) return fail(kInvalidParam, "aclrtLaunchKernelWithConfig", "not a stream");
  if (num_blocks == 0 || num_blocks > 65535) return fail(kInvalidParam, "aclrtLaunchKernelWithConfig", "numBlocks " + std::to_string(num_blocks));
  if (reserve) return fail(kInvalidParam, "aclrtLaunchKernelWithConfig", "reserve must be null");
  if (cfg) return fail(kInvalidParam, "aclrtLaunchKernelWithConfig", "the simulator takes no launch attributes");
  if (args != &thread_args || thread_args.function != f || !thread_args.finalized)
    return fail(kInvalidParam, "aclrtLaunchKernelWithConfig", "the arguments are not a finalized handle of this function from this thread");
  log_line("aclrtLaunchKernelWithConfig " + name_of("func", f->id) + " " + f->name + " numBlocks=" + std::to_string(num_blocks) + " " +
           name_of("stream", st->id));
  AclSimEnterBlock enter = f->binary->enter;
  void* entry = f->entry;
  const std::string name = f->name;
  const Core core = f->core;
  const std::vector<void*> a = thread_args.params;  // the arguments as the launch found them
  return enqueue(st, {"kernel " + name, [=] {
                        // Where the runtime starts it: on the cube core, which has no vector unit,
                        // the kernel's vector instructions fault.
                        if (core != Core::Vector)
                          throw std::runtime_error("kernel " + name + " ran on the cube core (as its .ascend.meta record or its binary's "
                                                   "magic says), which has none of the vector instructions it executes");
                        for (uint32_t b = 0; b < num_blocks; ++b) {
                          const AclSimBlock block{b, num_blocks, check_device};
                          enter(&block);
                          try {
                            call_entry(entry, a.data(), a.size());
                          } catch (const std::exception& e) {
                            throw std::runtime_error("block " + std::to_string(b) + ": " + e.what());
                          }
                        }
                      }});
}

Error aclmdlRICaptureBegin(Stream stream, CaptureMode mode) {
  ACLSIM_ENTER("aclmdlRICaptureBegin");
  if (const char* off = std::getenv("ACLSIM_NO_CAPTURE"); off && *off && std::strcmp(off, "0") != 0)
    return fail(kFeatureNotSupported, "aclmdlRICaptureBegin", "stream capture is off (ACLSIM_NO_CAPTURE), as on CANN before 8.1");
  SimStream* st = find_stream(stream);
  if (!st) return fail(kInvalidParam, "aclmdlRICaptureBegin", "not a stream");
  std::lock_guard<std::mutex> lock(st->mu);
  if (st->capture) return fail(kStreamCapture, "aclmdlRICaptureBegin", "already capturing");
  if (mode != kCaptureGlobal && mode != kCaptureThreadLocal && mode != kCaptureRelaxed)
    return fail(kInvalidParam, "aclmdlRICaptureBegin", "capture mode " + std::to_string(mode));
  st->capture = new Captured();
  st->capture->mode = mode;
  st->capture->thread = std::this_thread::get_id();
  st->capture->streams.push_back(st);
  st->capture->tasks.emplace_back();
  st->capture_index = 0;
  log_line("aclmdlRICaptureBegin " + name_of("stream", st->id) + " mode=" + std::to_string(mode));
  return kSuccess;
}

// Ends the capture on the stream that began it; every stream that joined leaves it too, and
// a capture with a stream that never merged back is dropped with ACL_ERROR_RT_STREAM_UNJOINED.
Error aclmdlRICaptureEnd(Stream stream, ModelRI* model) {
  ACLSIM_ENTER("aclmdlRICaptureEnd");
  SimStream* st = find_stream(stream);
  if (!st || !model) return fail(kInvalidParam, "aclmdlRICaptureEnd", "bad argument");
  Captured* c;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    c = st->capture;
    if (!c) return fail(kStreamCapture, "aclmdlRICaptureEnd", "not capturing");
    if (c->streams[0] != st) return fail(kStreamCapture, "aclmdlRICaptureEnd", "the capture ends on the stream that began it");
  }
  std::unique_ptr<Captured> owned(c);
  for (SimStream* joined : c->streams) {
    std::lock_guard<std::mutex> lock(joined->mu);
    joined->capture = nullptr;
  }
  std::lock_guard<std::mutex> lock(sim().mu);
  for (auto& [handle, ev] : sim().events) {
    std::lock_guard<std::mutex> event_lock(ev->mu);
    if (ev->captured == c) ev->captured = nullptr;
  }
  if (const std::string left = unjoined(*c); !left.empty())
    return fail(kStreamUnjoined, "aclmdlRICaptureEnd", left + " joined the capture and never merged back into " + name_of("stream", st->id));
  for (size_t i = 1; i < c->streams.size(); ++i) c->side.push_back(start_stream(sim().next_id++));
  *model = c;
  log_line("aclmdlRICaptureEnd " + name_of("stream", st->id) + " tasks=" + std::to_string(c->size()) + " streams=" + std::to_string(c->streams.size()));
  sim().models[*model] = std::move(owned);
  return kSuccess;
}

// Queues a replay: the tasks of the stream that began the capture on `stream`, those of each
// joined stream on the model's own, its records and waits on latches of this replay. Records
// and waits run even after a fault (as uncaptured records do), so every stream of the replay
// reaches its end and the fault travels with the latches to where the run synchronizes; a
// joined stream starts each replay without the failure of the one before.
Error aclmdlRIExecuteAsync(ModelRI model, Stream stream) {
  ACLSIM_ENTER("aclmdlRIExecuteAsync");
  Captured* c;
  {
    std::lock_guard<std::mutex> lock(sim().mu);
    auto it = sim().models.find(model);
    if (it == sim().models.end()) return fail(kInvalidParam, "aclmdlRIExecuteAsync", "not a model");
    c = it->second.get();
  }
  SimStream* st = find_stream(stream);
  if (!st) return fail(kInvalidParam, "aclmdlRIExecuteAsync", "not a stream");
  log_line("aclmdlRIExecuteAsync " + name_of("stream", st->id) + " tasks=" + std::to_string(c->size()));
  std::shared_ptr<Latch[]> latches(new Latch[static_cast<size_t>(std::max(c->latches, 1))]);
  for (size_t i = 0; i < c->streams.size(); ++i) {
    SimStream* target = i == 0 ? st : c->side[i - 1].get();
    if (i > 0)
      enqueue(target, {"replay", [target] {
                         std::lock_guard<std::mutex> lock(target->mu);
                         target->error.clear();
                       },
                       true});
    for (const CapturedTask& t : c->tasks[i]) {
      if (t.signal >= 0) {
        enqueue(target, {t.task.what,
                         [latches, k = t.signal, target] {
                           std::string error;
                           {
                             std::lock_guard<std::mutex> lock(target->mu);  // the stream's failure goes on with the latch
                             error = target->error;
                           }
                           Latch& l = latches[static_cast<size_t>(k)];
                           std::lock_guard<std::mutex> lock(l.mu);
                           l.set = true;
                           l.error = error;
                           l.done.notify_all();
                         },
                         true});
      } else if (t.wait >= 0) {
        enqueue(target, {t.task.what,
                         [latches, k = t.wait] {
                           Latch& l = latches[static_cast<size_t>(k)];
                           std::unique_lock<std::mutex> lock(l.mu);
                           l.done.wait(lock, [&] { return l.set; });
                           if (!l.error.empty()) throw std::runtime_error(l.error);
                         },
                         true});
      } else {
        enqueue(target, t.task);
      }
    }
  }
  return kSuccess;
}

Error aclmdlRIDestroy(ModelRI model) {
  ACLSIM_ENTER("aclmdlRIDestroy");
  std::unique_ptr<Captured> c;
  {
    std::lock_guard<std::mutex> lock(sim().mu);
    auto it = sim().models.find(model);
    if (it == sim().models.end()) return fail(kInvalidParam, "aclmdlRIDestroy", "not a model");
    c = std::move(it->second);
    sim().models.erase(it);
  }
  log_line("aclmdlRIDestroy");
  return kSuccess;  // its streams finish their replays as the model goes
}

// ---- hooks for the simulated operator library (aclnn_sim.hpp) -------------------------------------
__attribute__((visibility("default"))) int aclsim_enqueue(void* stream, const char* what, std::function<void()>* task) {
  SimStream* st = stream_or_default(stream);
  if (!st) return fail(kInvalidParam, what, "not a stream");
  return enqueue(st, {what, std::move(*task)});
}
__attribute__((visibility("default"))) void aclsim_check_device(const void* p, size_t bytes, const char* what) { check_device(p, bytes, what); }
__attribute__((visibility("default"))) void aclsim_fail(const char* call, const char* message) { fail(kInvalidParam, call, message); }
__attribute__((visibility("default"))) void aclsim_log(const char* line) { log_line(line); }

}  // extern "C"
