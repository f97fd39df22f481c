#include "cpu/program.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <sstream>

#include "cpu/fast_kernels.hpp"
#include "cpu/reorder.hpp"
#include "eval/evaluate.hpp"
#include "ir/error.hpp"

namespace esg::cpu {
namespace {

constexpr int64_t kAlign = plan::kArenaAlignment;

}  // namespace

Program::Program(const runtime::Plan& plan) : plan_(plan) {
  const ir::Graph& g = plan.graph();
  fused_.resize(plan.groups().size());
  for (const runtime::Plan::Launch& l : plan.launches()) {
    // An elementwise launch in a blocked format computes over the bytes as they lie (flat); a
    // blocked result with padding channels gets its zeros back after any launch but a reorder.
    const plan::Format f = l.out.empty() ? plan::Format::row_major() : l.out[0].format;
    const bool blocked = f != plan::Format::row_major();
    const bool elementwise = l.group >= 0 || (l.node != ir::kNone && g.nodes[l.node].op->elementwise);
    Bound b;
    b.flat = blocked && elementwise;
    b.padded = blocked && l.node != ir::kNone && !f.unpadded(g.shape(l.out[0].value));
    if (l.group >= 0) {
      const runtime::FusedGroup& grp = plan.groups()[static_cast<size_t>(l.group)];
      fused_[static_cast<size_t>(l.group)] = bind_fused_kernel(g, grp, b.flat ? f.physical_elements(grp.shape) : -1);
    } else if (blocked && !elementwise && l.node != ir::kNone) {
      b.fast = find_blocked_kernel(g, g.nodes[l.node], f);
      if (!b.fast)
        throw ir::Error(ir::ErrorCode::Internal, std::string("cpu: no ") + f.name(g.shape(l.out[0].value).rank()) + " kernel for " +
                                                     g.nodes[l.node].op->name + ", which the format rules chose");
    } else if (l.node != ir::kNone) {
      b.fast = find_fast_kernel(g, g.nodes[l.node]);
    }
    bound_.push_back(b);
  }
}

eval::TensorRef Program::ref(const Slot& s, uint8_t* arena, const std::vector<eval::TensorRef>& in,
                          const std::vector<eval::TensorRef>& out) const {
  const ir::Graph& g = plan_.graph();
  eval::TensorRef r{g.values[s.value].dtype, g.shape(s.value), nullptr};
  switch (s.kind) {
    case Slot::Arena: r.bytes = arena + s.at; break;
    case Slot::Input: r.bytes = in[static_cast<size_t>(s.at)].bytes; break;
    case Slot::Output: r.bytes = out[static_cast<size_t>(s.at)].bytes; break;
    case Slot::Constant: r.bytes = const_cast<uint8_t*>(g.blobs[g.nodes[static_cast<ir::NodeId>(s.at)].blob]->data()); break;
  }
  return r;
}

void Program::launch(size_t index, uint8_t* base, const std::vector<eval::TensorRef>& inputs,
                     const std::vector<eval::TensorRef>& outputs, const eval::Parallel* parallel, const eval::RunControl& control,
                     LaunchScratch& s) const {
  const runtime::Plan::Launch& l = plan_.launches()[index];
  s.in_refs.assign(l.in.size(), {});
  s.out_refs.assign(l.out.size(), {});
  s.in_ptrs.assign(l.in.size(), nullptr);
  s.out_ptrs.clear();
  for (size_t i = 0; i < l.in.size(); ++i) {
    if (l.in[i].kind == Slot::Arena && l.in[i].at < 0) continue;  // an absent optional input
    s.in_refs[i] = ref(l.in[i], base, inputs, outputs);
    s.in_ptrs[i] = &s.in_refs[i];
  }
  for (size_t i = 0; i < l.out.size(); ++i) {
    s.out_refs[i] = ref(l.out[i], base, inputs, outputs);
    s.out_ptrs.push_back(&s.out_refs[i]);
  }
  const Bound& b = bound_[index];
  if (b.flat) {  // operands of the result's shape as the elements in memory; single elements as they are
    const ir::Shape logical = s.out_refs[0].shape, flat{l.out[0].format.physical_elements(logical)};
    for (eval::TensorRef& r : s.in_refs)
      if (r.shape == logical) r.shape = flat;
    for (eval::TensorRef& r : s.out_refs) r.shape = flat;
  }
  compute(index, s.in_ptrs, s.out_ptrs, parallel, control);
  if (b.padded)
    for (size_t i = 0; i < l.out.size(); ++i) zero_padding(ref(l.out[i], base, inputs, outputs), l.out[i].format);
}

void Program::compute(size_t index, std::vector<const eval::TensorRef*>& in, const std::vector<const eval::TensorRef*>& out,
                      const eval::Parallel* parallel, const eval::RunControl& control) const {
  const runtime::Plan::Launch& l = plan_.launches()[index];
  if (l.node == ir::kNone) return reorder(*in[0], l.in[0].format, *out[0], l.out[0].format, parallel);
  if (l.group >= 0) return run_fused_kernel(fused_[static_cast<size_t>(l.group)], in, out, parallel);
  const ir::Graph& g = plan_.graph();
  const ir::Node& n = g.nodes[l.node];
  if (!n.op->subgraphs.empty()) return eval::run_control_flow(g, l.node, in, out, control);
  in.resize(n.num_inputs - n.num_captures);  // kernels take the declared inputs; captures exist only for control flow
  if (const eval::Kernel fast = bound_[index].fast) fast(eval::KernelCall{g, n, in, out, parallel});
  else eval::run_kernel(g, n, in, out);
}

void Program::run_launch(size_t index, const std::vector<const eval::TensorRef*>& in,
                         const std::vector<const eval::TensorRef*>& out, const eval::RunControl& control) const {
  std::vector<const eval::TensorRef*> operands = in;
  compute(index, operands, out, nullptr, control);
}

void Program::run(const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs,
                  std::vector<runtime::TraceEvent>* trace, const eval::Parallel* parallel,
                  const eval::RunControl& control) const {
  using clock = std::chrono::steady_clock;
  const auto t0 = trace ? clock::now() : clock::time_point{};  // the clock costs ~20 ns: only when tracing
  // An arena per concurrent run, reused across runs: one allocation the first time only.
  std::unique_ptr<uint8_t[]> arena;
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!pool_.empty()) {
      arena = std::move(pool_.back());
      pool_.pop_back();
    }
  }
  if (!arena) arena.reset(new uint8_t[static_cast<size_t>(plan_.arena_bytes() + kAlign)]);
  const uintptr_t raw = reinterpret_cast<uintptr_t>(arena.get());
  uint8_t* base = arena.get() + (kAlign - raw % kAlign) % kAlign;
  const ir::Graph& g = plan_.graph();
  const auto& launches = plan_.launches();
  std::mutex trace_mu;
  auto timed = [&](size_t index, LaunchScratch& s) {
    control.check();  // a cancel stops the run between launches
    if (!trace) return launch(index, base, inputs, outputs, parallel, control, s);
    const runtime::Plan::Launch& l = launches[index];
    const auto started = clock::now();
    launch(index, base, inputs, outputs, parallel, control, s);
    const auto finished = clock::now();
    std::string name = l.node == ir::kNone ? "reorder" : l.group >= 0 ? "fused" : g.nodes[l.node].op->name;
    if (l.group >= 0)
      for (ir::NodeId m : plan_.groups()[static_cast<size_t>(l.group)].members) name += std::string(" ") + g.nodes[m].op->name;
    std::lock_guard<std::mutex> lock(trace_mu);
    trace->push_back({name, l.stream, std::chrono::duration<double, std::micro>(started - t0).count(),
                      std::chrono::duration<double, std::micro>(finished - started).count()});
  };
  // Streams run at once, one thread each, when the pool has a thread per stream free: a launch
  // first waits for the events it needs (the launches of other streams it depends on). Else the
  // launch list runs in order on this thread, which every event already respects.
  bool ran = false;
  if (plan_.num_streams() > 1 && parallel) {
    std::unique_ptr<std::atomic<bool>[]> done(new std::atomic<bool>[launches.size()]);
    for (size_t i = 0; i < launches.size(); ++i) done[i].store(false, std::memory_order_relaxed);
    std::mutex mu;
    std::condition_variable finished;
    bool failed = false;  // a kernel threw: the other streams stop instead of waiting for it
    ran = parallel->run_together(plan_.num_streams(), [&](int64_t stream) {
      LaunchScratch s;
      try {
        for (int at : plan_.stream_launches()[static_cast<size_t>(stream)]) {
          for (int w : plan_.waits()[static_cast<size_t>(at)]) {
            if (done[static_cast<size_t>(w)].load(std::memory_order_acquire)) continue;
            std::unique_lock<std::mutex> lock(mu);
            finished.wait(lock, [&] { return failed || done[static_cast<size_t>(w)].load(std::memory_order_acquire); });
            if (failed) return;
          }
          timed(static_cast<size_t>(at), s);
          {
            std::lock_guard<std::mutex> lock(mu);
            done[static_cast<size_t>(at)].store(true, std::memory_order_release);
          }
          finished.notify_all();
        }
      } catch (...) {
        {
          std::lock_guard<std::mutex> lock(mu);
          failed = true;
        }
        finished.notify_all();
        throw;  // the pool rethrows it to this run's caller once every stream has stopped
      }
    });
  }
  if (!ran) {
    thread_local LaunchScratch s;
    for (size_t i = 0; i < launches.size(); ++i) timed(i, s);
  }
  plan_.fill_output_copies(inputs, outputs);
  std::lock_guard<std::mutex> lock(pool_mu_);
  pool_.push_back(std::move(arena));
}

std::string Program::describe_launch(size_t index) const { return bound_[index].fast ? "fast" : ""; }

std::string Program::report() const {
  const ir::Graph& g = plan_.graph();
  int64_t fast = 0, reference = 0, f32_groups = 0;
  std::string rows;  // per fused group in the plan's order: its f32 rows, or "-" off them
  // The ops without a kernel of their own, by name: where a model's time may go.
  std::map<std::string, int> slow;
  for (size_t i = 0; i < bound_.size(); ++i) {
    const runtime::Plan::Launch& l = plan_.launches()[i];
    fast += bound_[i].fast != nullptr;
    if (l.group < 0 && l.node != ir::kNone && !bound_[i].fast) ++reference, ++slow[g.nodes[l.node].op->name];
  }
  for (const FusedKernel& k : fused_) {
    f32_groups += k.f32;
    rows += (rows.empty() ? "" : " ") + (k.f32 ? std::to_string(k.f32_steps.size()) : std::string("-"));
  }
  std::ostringstream out;
  out << "cpu: " << fast << " fast kernels, " << reference << " reference; " << f32_groups << " fused groups on f32 rows";
  // Scalar multiply-adds fold into the rows around them, so a group's rows may be fewer than its ops.
  if (!fused_.empty()) out << " (rows per group: " << rows << ")";
  out << "\n";
  if (!slow.empty()) {
    out << "  reference kernels:";
    for (const auto& [name, count] : slow) out << " " << name << " x" << count;
    out << "\n";
  }
  return out.str();
}

void Program::add_stats(runtime::Stats& s) const {
  for (size_t i = 0; i < bound_.size(); ++i) {
    s.fast_kernels += bound_[i].fast != nullptr;
    const runtime::Plan::Launch& l = plan_.launches()[i];
    s.reference_kernels += l.group < 0 && l.node != ir::kNone && bound_[i].fast == nullptr;
  }
  for (const FusedKernel& k : fused_) s.f32_rows += k.f32 ? static_cast<int64_t>(k.f32_steps.size()) : 0;
}

}  // namespace esg::cpu
