#include "cpu/program.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>

#include "cpu/conv.hpp"
#include "cpu/fast_kernels.hpp"
#include "cpu/options.hpp"
#include "cpu/reorder.hpp"
#include "cpu/split.hpp"
#include "dist/world.hpp"
#include "eval/evaluate.hpp"
#include "ir/error.hpp"

namespace esg::cpu {
namespace {

constexpr int64_t kAlign = schedule::kArenaAlignment;

// The first kAlign-aligned byte of an allocation kAlign bytes larger than it needs.
uint8_t* aligned(uint8_t* p) { return p + (kAlign - reinterpret_cast<uintptr_t>(p) % kAlign) % kAlign; }

bool is_conv_f32(const ir::Graph& g, ir::NodeId n) { return n != ir::kNone && is_conv2d_f32(g, g.nodes[n]); }

// A lone product with constant weights on its primitive, split in pieces (split.hpp's rule):
// its rows in `row_shares` shares when each gets a few, else its columns; or null where oneDNN
// has no kernel for it (sgemm then).
std::unique_ptr<const MatmulPrimitive> matmul_in_shares(const ir::Graph& g, const ir::Node& n, int threads, bool bf16, const PackWeights& pack,
                                                        int& row_shares, std::string& why_not, const MatmulPrimitive* like) {
  const ir::Shape a = g.shape(g.operands[n.first_input]), y = g.shape(n.first_output);
  const int64_t rows = y.num_elements() / y[y.rank() - 1];
  const int pieces = pieces_for_macs(static_cast<double>(y.num_elements()) * static_cast<double>(a[a.rank() - 1]), threads, kMinProductMacsPerPiece);
  row_shares = rows >= int64_t{8} * pieces ? pieces : 1;
  return MatmulPrimitive::make(g, n, share_counts(rows, row_shares), row_shares == 1 ? pieces : 1, bf16, pack, why_not, like);
}

}  // namespace

void Program::bind_conv_group(Bound& b, std::string& why_not, const ir::Graph& g, const runtime::Plan::Launch& l,
                              const runtime::FusedGroup& grp, int threads, bool bf16, const PackWeights& pack, const ConvPrimitive* like) {
  const ir::Node& n = g.nodes[grp.head];
  auto at = [&](ir::ValueId v) {
    const auto found = std::find(grp.inputs.begin(), grp.inputs.end(), v);
    return v == ir::kNone || found == grp.inputs.end() ? -1 : static_cast<int>(found - grp.inputs.begin());
  };
  const auto in = g.inputs(n);
  b.conv_x = at(in[0]);
  b.conv_w = at(in[1]);
  b.conv_bias = in.size() > 2 ? at(in[2]) : -1;
  const schedule::Format src = l.in[static_cast<size_t>(b.conv_x)].format, f = l.out[0].format;
  // Not when the residual is the convolution's own images (conv(x) + x): the plan may put the
  // result in x's place, and oneDNN convolves out of place only; the rows path is elementwise.
  const std::optional<Epilogue> e = conv_epilogue(g, grp);
  if (e && e->residual != in[0]) {
    b.conv = ConvPrimitive::make(g, n, src, f, e->post_ops, threads, bf16, pack, why_not, like);
    b.conv_whole_group = b.conv != nullptr;
    if (b.conv_whole_group) b.conv_residual = at(e->residual);
  }
  if (!b.conv) {
    why_not.clear();
    b.conv = ConvPrimitive::make(g, n, src, f, {}, threads, bf16, pack, why_not, like);
  }
  if (!b.conv) b.conv_head_im2col = find_fast_kernel(g, n);
  if (!b.conv && f != schedule::Format::row_major())
    throw ir::Error(ir::ErrorCode::Internal, "cpu: no " + f.name(4) + " convolution, which the format rules chose: " + why_not);
}

uint8_t* Program::working(uint8_t* arena, int stream) const { return arena + working_at_ + working_bytes_ * stream; }

namespace {

// Whether launch `l` reads and writes the same sizes in both graphs (two bindings of one plan).
bool same_sizes(const ir::Graph& a, const ir::Graph& b, const runtime::Plan::Launch& l) {
  for (const std::vector<runtime::Plan::Slot>* slots : {&l.in, &l.out})
    for (const runtime::Plan::Slot& s : *slots)
      if (s.value != ir::kNone && a.shape(s.value) != b.shape(s.value)) return false;
  return true;
}

}  // namespace

Program::Program(const runtime::Plan& plan, const runtime::CompileOptions& options, const Program* donor, const runtime::Artifacts* loaded)
    : plan_(plan), arenas_(donor ? donor->arenas_ : std::make_shared<Arenas>()) {
  fused_.resize(plan.groups().size());
  for (size_t i = 0; i < plan.launches().size(); ++i) {
    const runtime::Plan::Launch& l = plan.launches()[i];
    Fallbacks why;
    std::shared_ptr<const Bound> b;
    if (donor && same_sizes(donor->plan_.graph(), plan.graph(), l)) {
      b = donor->bound_[i];
      why = donor->fallbacks_[i];
      if (l.group >= 0) {
        // A kernel points at its group: shared while the plans share their groups, else a copy
        // pointing at this plan's (the donor may be dropped before this program is).
        const size_t k = static_cast<size_t>(l.group);
        const std::shared_ptr<const FusedKernel>& theirs = donor->fused_[k];
        if (theirs->group == &plan.groups()[k]) {
          fused_[k] = theirs;
        } else {
          auto ours = std::make_shared<FusedKernel>(*theirs);
          ours->group = &plan.groups()[k];
          fused_[k] = std::move(ours);
        }
      }
    } else {
      b = bind_launch(i, options, why, donor ? donor->bound_[i].get() : nullptr, loaded);
    }
    // Working memory: the primitive's, then a convolution head's result for the rows after it.
    const schedule::Format f = l.out.empty() ? schedule::Format::row_major() : l.out[0].format;
    int64_t working = b->conv ? static_cast<int64_t>(b->conv->working_bytes()) : 0;
    if (l.group >= 0 && (b->conv_head_im2col || (b->conv && !b->conv_whole_group)))
      working += f.physical_elements(plan.groups()[static_cast<size_t>(l.group)].shape) * static_cast<int64_t>(sizeof(float));
    working_bytes_ = std::max(working_bytes_, (working + kAlign - 1) / kAlign * kAlign);
    bound_.push_back(std::move(b));
    fallbacks_.push_back(std::move(why));
  }
  working_at_ = (plan.arena_bytes() + kAlign - 1) / kAlign * kAlign;
}

std::shared_ptr<const Program::Bound> Program::bind_launch(size_t index, const runtime::CompileOptions& options, Fallbacks& why,
                                                          const Bound* before, const runtime::Artifacts* loaded) {
  // The launch's constant weights, packed here, taken from another launch that packed the same
  // (the program's, or the loaded file's: both keep them once), or from a compiled-model file's
  // artifacts, as "<launch>/<piece>".
  const PackWeights pack = [this, index, loaded](int piece, size_t size, const PackedFrom& from, const std::function<void(uint8_t*)>& fill) {
    const std::string key = std::to_string(index) + "/" + std::to_string(piece);
    const std::pair<const void*, std::string> made_from{from.source, from.layout};
    const auto same = from.layout.empty() ? packed_from_.end() : packed_from_.find(made_from);
    ir::Blob bytes = same != packed_from_.end() && same->second->size() == size ? same->second : nullptr;
    if (bytes) {
      ++weights_shared_;
    } else if ((bytes = loaded ? loaded->find(key) : nullptr) && bytes->size() == size) {
      ++weights_loaded_;
    } else {
      ir::OwnedBytes made(size);
      fill(made.data());
      bytes = ir::make_blob(std::move(made));
      ++weights_packed_;
    }
    if (!from.layout.empty()) packed_from_.emplace(made_from, bytes);
    artifacts_.add(key, bytes);
    return bytes;
  };
  const MatmulPrimitive* like = before ? before->matmul.get() : nullptr;
  const runtime::Plan& plan = plan_;
  const ir::Graph& g = plan.graph();
  const int conv_threads = library_threads(options);
  const bool bf16 = options.precision == runtime::Precision::BF16;
  const runtime::Plan::Launch& l = plan.launches()[index];
  // An elementwise launch in a blocked format computes over its operands' physical shapes (as
  // they lie in memory); a blocked result with padding channels gets its zeros back after any
  // launch but a reorder.
  const schedule::Format f = l.out.empty() ? schedule::Format::row_major() : l.out[0].format;
  const bool blocked = f != schedule::Format::row_major();
  const bool elementwise = l.group >= 0 || (l.node != ir::kNone && g.nodes[l.node].op->elementwise);
  auto made = std::make_shared<Bound>();
  Bound& b = *made;
  b.flat = blocked && elementwise;
  b.padded = blocked && l.node != ir::kNone && !f.unpadded(g.shape(l.out[0].value));
  if (l.node == ir::kNone) {
    b.reorder = std::make_unique<const Reorder>(g.shape(l.in[0].value), g.values[l.in[0].value].dtype, l.in[0].format, f, conv_threads);
  } else if (l.group >= 0) {
    const runtime::FusedGroup& grp = plan.groups()[static_cast<size_t>(l.group)];
    std::vector<schedule::Format> input_formats;
    for (const Slot& in : l.in) input_formats.push_back(in.format);
    auto made_kernel = std::make_shared<FusedKernel>(bind_fused_kernel(g, grp, f, input_formats));
    fused_[static_cast<size_t>(l.group)] = made_kernel;
    FusedKernel& kernel = *made_kernel;
    if (is_conv_f32(g, grp.head)) bind_conv_group(b, why.conv, g, l, grp, conv_threads, bf16, pack, before ? before->conv.get() : nullptr);
    if (kernel.f32 && grp.head != ir::kNone && MatmulPrimitive::takes(g, g.nodes[grp.head])) {
      // The rows of run_fused_kernel's blocks: whole blocks and the last one.
      const ir::Shape y = g.shape(g.nodes[grp.head].first_output);
      const int64_t width = y[y.rank() - 1], rows = y.num_elements() / width;
      const ir::Shape a = g.shape(g.operands[g.nodes[grp.head].first_input]);
      const double macs = static_cast<double>(y.num_elements()) * static_cast<double>(a[a.rank() - 1]);
      int64_t block = head_rows_per_block(width);
      // A kernel that packs the weights at every call gets one block per thread, not one per
      // 64 rows (the encoder layer of bench/models.py packed its feed-forward weights 32 times a run).
      if (rows > block && MatmulPrimitive::packs_at_every_call(g, g.nodes[grp.head], bf16)) {
        const int64_t pieces = pieces_for_macs(macs, conv_threads, kMinProductMacsPerPiece);
        block = (rows + pieces - 1) / pieces;
      }
      kernel.head_block_rows = block;
      // Several blocks spread over the pool; one block splits its columns.
      b.matmul = MatmulPrimitive::make(g, g.nodes[grp.head],
                                       rows <= block ? std::vector<int64_t>{rows} : std::vector<int64_t>{block, rows % block ? rows % block : block},
                                       rows <= block ? pieces_for_macs(macs, conv_threads, kMinProductMacsPerPiece) : 1, bf16, pack, why.matmul, like);
      kernel.head_primitive = b.matmul.get();
    }
  } else if (is_conv_f32(g, l.node) &&
             (b.conv = ConvPrimitive::make(g, g.nodes[l.node], l.in[0].format, f, {}, conv_threads, bf16, pack, why.conv,
                                           before ? before->conv.get() : nullptr))) {
    b.conv_bias = l.in.size() > 2 ? 2 : -1;
  } else if (l.node != ir::kNone && g.nodes[l.node].op->kind == ir::OpKind::quantized_conv2d &&
             (b.conv = ConvPrimitive::make(g, g.nodes[l.node], l.in[0].format, f, {}, conv_threads, false, pack, why.conv,
                                           before ? before->conv.get() : nullptr))) {
    b.conv_w = 3;
    b.conv_bias = l.in.size() > 8 ? 8 : -1;
  } else if (l.node != ir::kNone && g.nodes[l.node].op->kind == ir::OpKind::quantized_conv2d && blocked) {
    throw ir::Error(ir::ErrorCode::Internal, "cpu: no " + f.name(4) + " int8 convolution, which the format rules chose: " + why.conv);
  } else if (l.node != ir::kNone && g.nodes[l.node].op->kind == ir::OpKind::matmul_integer &&
             (b.integer_matmul = IntegerMatmul::make(g, g.nodes[l.node], integer_kernel(options), pack, why.integer_matmul))) {
  } else if (l.node != ir::kNone && MatmulPrimitive::takes(g, g.nodes[l.node]) &&
             (b.matmul = matmul_in_shares(g, g.nodes[l.node], conv_threads, bf16, pack, b.matmul_pieces, why.matmul, like))) {
  } else if (blocked && !elementwise && l.node != ir::kNone) {
    b.fast = find_blocked_kernel(g, g.nodes[l.node], f);
    if (!b.fast)
      throw ir::Error(ir::ErrorCode::Internal, std::string("cpu: no ") + f.name(g.shape(l.out[0].value).rank()) + " kernel for " +
                                                   g.nodes[l.node].op->name + ", which the format rules chose");
  } else if (l.node != ir::kNone) {
    b.fast = find_fast_kernel(g, g.nodes[l.node]);
  }
  return made;
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

void Program::operands(size_t index, uint8_t* base, const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs,
                       LaunchScratch& s) const {
  const runtime::Plan::Launch& l = plan_.launches()[index];
  // Each entry written below: resized, not cleared (a small run's time is mostly such costs).
  s.in_refs.resize(l.in.size());
  s.out_refs.resize(l.out.size());
  s.in_ptrs.resize(l.in.size());
  s.out_ptrs.resize(l.out.size());
  for (size_t i = 0; i < l.in.size(); ++i) {
    const bool absent = l.in[i].kind == Slot::Arena && l.in[i].at < 0;  // an optional input not given
    s.in_refs[i] = absent ? eval::TensorRef{} : ref(l.in[i], base, inputs, outputs);
    s.in_ptrs[i] = absent ? nullptr : &s.in_refs[i];
  }
  for (size_t i = 0; i < l.out.size(); ++i) {
    s.out_refs[i] = ref(l.out[i], base, inputs, outputs);
    s.out_ptrs[i] = &s.out_refs[i];
  }
  if (bound_[index]->flat) {  // each operand as it lies in memory: elementwise kernels broadcast over that
    for (size_t i = 0; i < l.in.size(); ++i) s.in_refs[i].shape = l.in[i].format.physical_shape(s.in_refs[i].shape);
    for (size_t i = 0; i < l.out.size(); ++i) s.out_refs[i].shape = l.out[i].format.physical_shape(s.out_refs[i].shape);
  }
}

void Program::launch(size_t index, uint8_t* base, const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs,
                     const eval::Parallel* parallel, const eval::RunControl& control, LaunchScratch& s) const {
  const runtime::Plan::Launch& l = plan_.launches()[index];
  compute(index, s.in_ptrs, s.out_ptrs, parallel, control, working(base, l.stream));
  if (bound_[index]->padded)
    for (size_t i = 0; i < l.out.size(); ++i) zero_padding(ref(l.out[i], base, inputs, outputs), l.out[i].format);
}

void Program::compute(size_t index, std::vector<const eval::TensorRef*>& in, const std::vector<const eval::TensorRef*>& out,
                      const eval::Parallel* parallel, const eval::RunControl& control, uint8_t* working) const {
  const runtime::Plan::Launch& l = plan_.launches()[index];
  if (l.node == ir::kNone) return bound_[index]->reorder->run(*in[0], *out[0], parallel);
  // A collective on its own stream, through the world's transport, straight on the arena's buffers.
  if (l.group < 0 && plan_.graph().nodes[l.node].op->communicates)
    return plan_.collectives().at(index)->run(in.empty() ? nullptr : in[0], *out[0]);
  if (bound_[index]->conv || bound_[index]->conv_head_im2col) return convolve(index, in, out, parallel, working);
  if (l.group >= 0) return run_fused_kernel(*fused_[static_cast<size_t>(l.group)], in, out, parallel);
  if (bound_[index]->matmul) return multiply(index, in, out, parallel);
  if (bound_[index]->integer_matmul) return bound_[index]->integer_matmul->run(*in[0], *in[2], *out[0], parallel);
  const ir::Graph& g = plan_.graph();
  const ir::Node& n = g.nodes[l.node];
  if (!n.op->subgraphs.empty()) return eval::run_control_flow(g, l.node, in, out, control);
  in.resize(n.num_inputs - n.num_captures);  // kernels take the declared inputs; captures exist only for control flow
  if (const eval::Kernel fast = bound_[index]->fast) fast(eval::KernelCall{g, n, in, out, parallel});
  else eval::run_kernel(g, n, in, out);
}

void Program::multiply(size_t index, const std::vector<const eval::TensorRef*>& in, const std::vector<const eval::TensorRef*>& out,
                       const eval::Parallel* parallel) const {
  const Bound& b = *bound_[index];
  const int64_t width = out[0]->shape[out[0]->shape.rank() - 1], rows = out[0]->shape.num_elements() / width, pieces = b.matmul_pieces;
  auto share = [&](int64_t p) {
    const int64_t first = rows * p / pieces, last = rows * (p + 1) / pieces;
    if (last > first) b.matmul->rows(in[0]->data<float>(), first, last, out[0]->data<float>() + first * width, pieces == 1 ? parallel : nullptr);
  };
  if (pieces == 1 || !parallel)
    for (int64_t p = 0; p < pieces; ++p) share(p);
  else
    parallel->run(pieces, share);
}

void Program::convolve(size_t index, const std::vector<const eval::TensorRef*>& in, const std::vector<const eval::TensorRef*>& out,
                       const eval::Parallel* parallel, uint8_t* working) const {
  const Bound& b = *bound_[index];
  auto data = [&](int at) { return at < 0 || !in[static_cast<size_t>(at)] ? nullptr : static_cast<const void*>(in[static_cast<size_t>(at)]->bytes); };
  const int group = plan_.launches()[index].group;
  if (group < 0 || b.conv_whole_group) {
    float* dst = out[0]->data<float>();
    // The sum post-op adds what the result holds: the residual, unless the plan put the result in its place.
    if (b.conv_residual >= 0 && in[static_cast<size_t>(b.conv_residual)]->bytes != out[0]->bytes)
      std::memcpy(dst, in[static_cast<size_t>(b.conv_residual)]->bytes, static_cast<size_t>(out[0]->nbytes()));
    return b.conv->run(data(b.conv_x), data(b.conv_w), data(b.conv_bias), dst, working, parallel);
  }
  // The head's whole result, in the group's memory order (in the working memory, after the
  // primitive's own), then the group's rows over it.
  float* values = reinterpret_cast<float*>(working + (b.conv ? b.conv->working_bytes() : 0));
  if (b.conv) {
    b.conv->run(data(b.conv_x), data(b.conv_w), data(b.conv_bias), values, working, parallel);
  } else {
    const ir::Graph& g = plan_.graph();
    const ir::Node& n = g.nodes[plan_.groups()[static_cast<size_t>(group)].head];
    const eval::TensorRef result{ir::DType::F32, g.shape(n.first_output), reinterpret_cast<uint8_t*>(values)};
    auto operand = [&](int at) { return at < 0 ? nullptr : in[static_cast<size_t>(at)]; };
    b.conv_head_im2col(eval::KernelCall{g, n, {operand(b.conv_x), operand(b.conv_w), operand(b.conv_bias)}, {&result}, parallel});
  }
  run_fused_kernel(*fused_[static_cast<size_t>(group)], in, out, parallel, values);
}

void Program::run_launch(size_t index, const std::vector<const eval::TensorRef*>& in,
                         const std::vector<const eval::TensorRef*>& out, const eval::RunControl& control) const {
  std::vector<const eval::TensorRef*> operands = in;
  const std::unique_ptr<uint8_t[]> memory(new uint8_t[static_cast<size_t>(working_bytes_ + kAlign)]);
  compute(index, operands, out, nullptr, control, aligned(memory.get()));
}

int64_t Program::arena_size() const { return working_at_ + working_bytes_ * plan_.num_streams() + kAlign; }

void Program::run(const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs,
                  std::vector<runtime::TraceEvent>* trace, const eval::Parallel* parallel,
                  const eval::RunControl& control) const {
  // An arena per concurrent run, reused across runs: one allocation the first time only.
  // The plan's arena, then each stream's working memory.
  const int64_t needed = arena_size();
  // The arena of the run before, when no other run holds it (one exchange, no lock), else one
  // from the list.
  std::unique_ptr<Arena> held(arenas_->hot.exchange(nullptr, std::memory_order_acquire));
  if (!held || held->bytes < needed) {
    std::lock_guard<std::mutex> lock(arenas_->mu);
    auto& free = arenas_->free;
    if (held) free.push_back(std::move(held));
    auto fits = std::find_if(free.begin(), free.end(), [&](const auto& a) { return a->bytes >= needed; });
    if (fits == free.end() && !free.empty()) fits = free.end() - 1;  // the last, grown below
    if (fits != free.end()) {
      held = std::move(*fits);
      free.erase(fits);
    }
  }
  if (!held || held->bytes < needed) held = std::make_unique<Arena>(needed);
  execute(aligned(held->memory.get()), inputs, outputs, trace, parallel, control, nullptr);
  // Back as the hot one; the hot one it displaces (a concurrent run's) to the list.
  std::unique_ptr<Arena> displaced(arenas_->hot.exchange(held.release(), std::memory_order_acq_rel));
  if (!displaced) return;
  std::lock_guard<std::mutex> lock(arenas_->mu);
  arenas_->free.push_back(std::move(displaced));
}

void Program::execute(uint8_t* base, const std::vector<eval::TensorRef>& inputs, const std::vector<eval::TensorRef>& outputs,
                      std::vector<runtime::TraceEvent>* trace, const eval::Parallel* parallel, const eval::RunControl& control,
                      std::vector<LaunchScratch>* prepared) const {
  const auto& launches = plan_.launches();
  const auto& per_stream = plan_.stream_launches();
  const bool in_order =
      !parallel || std::count_if(per_stream.begin(), per_stream.end(), [](const std::vector<int>& s) { return !s.empty(); }) < 2;
  if (prepared && in_order && !trace) {  // a prepared run's common case, straight (a small run is a tenth of a microsecond)
    for (size_t i = 0; i < launches.size(); ++i) {
      control.check();
      launch(i, base, inputs, outputs, parallel, control, (*prepared)[i]);
    }
    return plan_.fill_output_copies(inputs, outputs);
  }
  using clock = std::chrono::steady_clock;
  const auto t0 = trace ? clock::now() : clock::time_point{};  // the clock costs ~20 ns: only when tracing
  const ir::Graph& g = plan_.graph();
  std::mutex trace_mu;
  // `s`: a thread's scratch, given the launch's operands here; or the launch's own, prepared.
  auto timed = [&](size_t index, LaunchScratch& thread_scratch) {
    control.check();  // a cancel stops the run between launches
    LaunchScratch& s = prepared ? (*prepared)[index] : thread_scratch;
    if (!prepared) operands(index, base, inputs, outputs, s);
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
  // (A plan whose launches all lie on one stream, say a lone collective, runs in order too.)
  if (!in_order) {
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
    thread_local LaunchScratch s;  // (unused by a prepared run: timed takes the launch's own)
    for (size_t i = 0; i < launches.size(); ++i) timed(i, s);
  }
  plan_.fill_output_copies(inputs, outputs);
}

// Runs on fixed buffers: an arena of its own, every launch's operands resolved once.
class Program::Prepared final : public runtime::PreparedRun {
 public:
  Prepared(const Program& program, std::vector<eval::TensorRef> inputs, std::vector<eval::TensorRef> outputs, int64_t arena_bytes)
      : program_(program), inputs_(std::move(inputs)), outputs_(std::move(outputs)), arena_(new uint8_t[static_cast<size_t>(arena_bytes)]) {}
  void run(const eval::Parallel* parallel, const eval::RunControl& control) override {
    program_.execute(aligned(arena_.get()), inputs_, outputs_, nullptr, parallel, control, &operands_);
  }

 private:
  friend class Program;
  const Program& program_;
  const std::vector<eval::TensorRef> inputs_, outputs_;
  const std::unique_ptr<uint8_t[]> arena_;
  std::vector<LaunchScratch> operands_;  // per launch
};

std::unique_ptr<runtime::PreparedRun> Program::prepare(std::vector<eval::TensorRef> inputs, std::vector<eval::TensorRef> outputs) const {
  auto made = std::make_unique<Prepared>(*this, std::move(inputs), std::move(outputs), arena_size());
  made->operands_.resize(plan_.launches().size());
  for (size_t i = 0; i < made->operands_.size(); ++i) operands(i, aligned(made->arena_.get()), made->inputs_, made->outputs_, made->operands_[i]);
  return made;
}

std::string Program::describe_launch(size_t index) const {
  const Bound& b = *bound_[index];
  if (b.conv) return "oneDNN " + b.conv->implementation() + (b.conv->precision() == "f32" ? "" : " " + b.conv->precision()) + (b.conv_whole_group ? " + post-ops" : "");
  if (b.matmul)
    return (b.matmul->kernel() == MatmulPrimitive::Kernel::onednn ? "oneDNN " : "esgraph ") + b.matmul->implementation() + (b.matmul->bf16() ? " bf16" : "");
  if (b.integer_matmul) return b.integer_matmul->kernel() == integer_gemm::Kernel::Vnni ? "esgraph integer_gemm:avx512_vnni" : "esgraph integer_gemm:avx2";
  if (plan_.collectives().at(index)) return dist::world().transport();
  return b.fast ? "fast" : "";
}

bool Program::on_reference(size_t index) const {
  const runtime::Plan::Launch& l = plan_.launches()[index];
  const Bound& b = *bound_[index];
  return l.group < 0 && l.node != ir::kNone && !b.fast && !b.conv && !b.matmul && !b.integer_matmul && !plan_.graph().nodes[l.node].op->communicates;
}

void Program::add_facts(runtime::Facts& f) const {
  const ir::Graph& g = plan_.graph();
  f.text("backend", "cpu");
  int64_t fast = 0, reference = 0, library = 0, f32_groups = 0, f32_rows = 0;
  // The ops without a kernel of their own, by name: where a model's time may go.
  std::map<std::string, int64_t> slow;
  for (size_t i = 0; i < bound_.size(); ++i) {
    fast += bound_[i]->fast != nullptr;
    library += bound_[i]->conv != nullptr || bound_[i]->matmul != nullptr || bound_[i]->integer_matmul != nullptr;
    if (on_reference(i)) ++reference, ++slow[g.nodes[plan_.launches()[i].node].op->name];
  }
  f.count("fast_kernels", fast);            // single-op launches on a kernel of ours
  f.count("reference_kernels", reference);  // single-op launches on the reference evaluator
  f.count("library_calls", library);        // products and convolutions on primitives (oneDNN's, our packed GEMMs)
  // Scalar multiply-adds fold into the rows around them, so a group's rows may be fewer than its ops.
  for (const auto& k : fused_) {
    const int64_t rows = k->f32 ? static_cast<int64_t>(k->f32_steps.size()) : 0;
    f32_groups += k->f32;
    f32_rows += rows;
    f.row("group_rows").level("f32_rows", k->f32 ? rows : -1);  // per group in the plan's order; -1: off f32 rows
  }
  f.count("f32_groups", f32_groups);
  f.count("f32_rows", f32_rows);
  // The products: oneDNN's kernels by name and precision (a convolution with the group it
  // computes as post-ops), or our own way and why.
  std::map<std::pair<std::string, std::string>, int64_t> convolutions, matmuls, packed_matmuls, row_matmuls;
  std::map<std::string, int64_t> im2col, reference_convolutions, sgemm, reference_integer_matmuls;
  int64_t post_op_groups = 0, split_convolutions = 0, split_matmuls = 0, weights_in_place = 0, integer_matmuls = 0;
  for (size_t i = 0; i < bound_.size(); ++i) {
    const Bound& b = *bound_[i];
    integer_matmuls += b.integer_matmul != nullptr;
    if (!fallbacks_[i].integer_matmul.empty()) ++reference_integer_matmuls[fallbacks_[i].integer_matmul];
    if (b.matmul) {
      const MatmulPrimitive::Kernel kernel = b.matmul->kernel();
      auto& counts = kernel == MatmulPrimitive::Kernel::onednn ? matmuls : kernel == MatmulPrimitive::Kernel::packed_gemm ? packed_matmuls : row_matmuls;
      ++counts[{b.matmul->implementation(), b.matmul->bf16() ? "bf16" : "f32"}];
      weights_in_place += b.matmul->weights_in_place();
    }
    if (b.matmul && (b.matmul_pieces > 1 || b.matmul->column_shares() > 1)) ++split_matmuls;
    if (!b.matmul && !fallbacks_[i].matmul.empty()) ++sgemm[fallbacks_[i].matmul];
    if (b.conv) ++convolutions[{b.conv->implementation(), b.conv->precision()}], post_op_groups += b.conv_whole_group;
    else if (!fallbacks_[i].conv.empty()) {
      const runtime::Plan::Launch& l = plan_.launches()[i];
      const bool quantized = l.node != ir::kNone && plan_.graph().nodes[l.node].op->kind == ir::OpKind::quantized_conv2d;
      ++(quantized ? reference_convolutions : im2col)[fallbacks_[i].conv];
    }
    if (b.conv && b.conv->pieces() > 1) ++split_convolutions;
  }
  auto primitives = [&f](const char* key, const std::map<std::pair<std::string, std::string>, int64_t>& counts) {
    for (const auto& [what, count] : counts) {
      runtime::Facts& row = f.row(key);
      row.text("implementation", what.first);
      row.text("precision", what.second);
      row.count("count", count);
    }
  };
  primitives("onednn_convolutions", convolutions);
  f.count("post_op_convolutions", post_op_groups);  // with their group as post-ops
  f.count("split_convolutions", split_convolutions);  // split over threads
  f.tally("im2col_convolutions", im2col, "reason");
  f.tally("reference_convolutions", reference_convolutions, "reason");  // quantized ones oneDNN does not take
  primitives("onednn_matmuls", matmuls);  // constant weights reordered once
  primitives("packed_matmuls", packed_matmuls);  // on our packed GEMM, the weights packed once
  primitives("row_matmuls", row_matmuls);  // one row a call, on our kernel reading the constant in place
  f.count("split_matmuls", split_matmuls);
  f.tally("sgemm_matmuls", sgemm, "reason");  // with constant weights
  f.count("integer_matmuls", integer_matmuls);  // matmul_integer on our integer GEMM, the weights packed once
  f.tally("reference_integer_matmuls", reference_integer_matmuls, "reason");
  // Constant weights in primitives' layouts: packed while lowering, taken from a compiled-model
  // file, or read where the constant lies (a plain layout, the products' on CPUs without brgemm).
  f.count("weights_packed", weights_packed_);
  f.count("weights_loaded", weights_loaded_);
  f.count("weights_shared", weights_shared_);  // another launch's packed copy of the same
  f.count("weights_in_place", weights_in_place);
  // Per stream, after the arena: oneDNN's scratchpads, bf16 images, a convolution's result
  // before its group's rows.
  f.bytes("working_bytes", working_bytes_);
  f.tally("reference_ops", slow, "op");
}

}  // namespace esg::cpu
