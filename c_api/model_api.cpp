// C entry points of compiled models.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "c_api/facts_handle.hpp"
#include "c_api/handles.hpp"
#include "c_api/op_call.hpp"
#include "backends/registry.hpp"
#include "runtime/model.hpp"
#include "runtime/compile_cache.hpp"
#include "runtime/model_file.hpp"

using esg::capi::guarded;
namespace ir = esg::ir;

struct esg_model {
  explicit esg_model(std::shared_ptr<esg::runtime::Model> model) : m(std::move(model)) {
    const ir::Graph& g = m->graph();
    for (ir::ValueId v : g.inputs()) input_names.push_back(g.value_name(v));
    for (ir::ValueId v : g.outputs()) output_names.push_back(g.value_name(v));
  }
  std::shared_ptr<esg::runtime::Model> m;  // shared with its prepared runs, which may outlive the handle
  std::vector<std::string> input_names, output_names;
};

struct esg_prepared {
  std::shared_ptr<const esg::runtime::Model> model;
  std::unique_ptr<esg::runtime::PreparedModelRun> run;  // destroyed before the model
};

namespace esg::capi {

// The message is written only for a buffer that fails (a small model's run is about a microsecond).
eval::TensorRef ref_of(const esg_buffer& b, const char* what, size_t index) {
  auto where = [&] { return std::string(what) + " " + std::to_string(index); };
  if (b.rank && !b.dims) throw ir::Error(ir::ErrorCode::InvalidArgument, where() + ": dims is NULL");
  eval::TensorRef r{static_cast<ir::DType>(b.dtype), ir::Shape::from(b.dims, b.rank), static_cast<uint8_t*>(b.data)};
  if (!ir::dtype_valid(r.dtype)) throw ir::Error(ir::ErrorCode::DType, where() + ": invalid dtype");
  for (ir::Dim d : r.shape)
    if (d < 0) throw ir::Error(ir::ErrorCode::Shape, where() + ": a negative dimension");
  if (b.nbytes != r.nbytes())
    throw ir::Error(ir::ErrorCode::InvalidArgument, where() + ": nbytes is " + std::to_string(b.nbytes) + " but " +
                                                        ir::dtype_name(r.dtype) + " of that shape takes " + std::to_string(r.nbytes()));
  return r;
}

}  // namespace esg::capi

namespace {

using esg::capi::ref_of;

// An output of esg_model_run_allocated: its data points into `tensor`; its dims are an array of
// its own whose slot before the first holds the owner, which is how esg_buffer_free finds it.
struct OwnedOutput {
  esg::eval::HostTensor tensor;
};
static_assert(sizeof(OwnedOutput*) <= sizeof(int64_t), "the owner fits the slot before the dims");

// esg_model_stats: each field the fact of its name.
constexpr std::pair<const char*, int64_t esg_model_stats::*> kStatsFields[] = {
    {"plans", &esg_model_stats::plans},
    {"launches", &esg_model_stats::launches},
    {"fused_groups", &esg_model_stats::fused_groups},
    {"fused_ops", &esg_model_stats::fused_ops},
    {"epilogue_groups", &esg_model_stats::epilogue_groups},
    {"f32_rows", &esg_model_stats::f32_rows},
    {"fast_kernels", &esg_model_stats::fast_kernels},
    {"reference_kernels", &esg_model_stats::reference_kernels},
    {"arena_bytes", &esg_model_stats::arena_bytes},
    {"lower_bound_bytes", &esg_model_stats::lower_bound_bytes},
    {"no_reuse_bytes", &esg_model_stats::no_reuse_bytes},
    {"in_place_values", &esg_model_stats::in_place_values},
    {"streams", &esg_model_stats::streams},
    {"events", &esg_model_stats::events},
    {"device_kernels", &esg_model_stats::device_kernels},
    {"device_kernel_launches", &esg_model_stats::device_kernel_launches},
    {"library_calls", &esg_model_stats::library_calls},
    {"device_copies", &esg_model_stats::device_copies},
    {"host_launches", &esg_model_stats::host_launches},
    {"device_bytes", &esg_model_stats::device_bytes},
    {"device_events", &esg_model_stats::device_events},
    {"captured", &esg_model_stats::captured},
    {"reorders", &esg_model_stats::reorders},
    {"bindings", &esg_model_stats::bindings},
    {"stages", &esg_model_stats::stages},
    {"sized_ops", &esg_model_stats::sized_ops},
    {"collectives", &esg_model_stats::collectives},
    {"collective_bytes", &esg_model_stats::collective_bytes},
    {"plans_loaded", &esg_model_stats::plans_loaded},
    {"cache_hits", &esg_model_stats::cache_hits},
    {"cache_misses", &esg_model_stats::cache_misses},
    {"cache_replaced", &esg_model_stats::cache_replaced},
    {"weights_packed", &esg_model_stats::weights_packed},
    {"weights_loaded", &esg_model_stats::weights_loaded},
    {"device_kernels_cached", &esg_model_stats::device_kernels_cached},
    {"device_kernels_loaded", &esg_model_stats::device_kernels_loaded},
};

void need_model(const esg_model* m, const char* fn) {
  if (!m || !m->m) throw ir::Error(ir::ErrorCode::InvalidArgument, std::string(fn) + ": the model is NULL");
}

std::vector<esg::eval::TensorRef> refs_of(const esg_buffer* bufs, size_t n, const char* what) {
  if (n && !bufs) throw ir::Error(ir::ErrorCode::InvalidArgument, std::string(what) + ": a count but no array");
  std::vector<esg::eval::TensorRef> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back(ref_of(bufs[i], what, i));
  return out;
}

// A run's buffers as tensor refs, no output sharing a byte with an input or another output: a
// run reads its inputs while it writes its outputs, in whatever order its kernels take, so an
// alias gives a wrong result rather than an in-place one. `fn` names the call.
struct RunBuffers {
  std::vector<esg::eval::TensorRef> in, out;
};
RunBuffers run_buffers(const esg_buffer* inputs, size_t num_inputs, const esg_buffer* outputs, size_t num_outputs, const std::string& fn) {
  RunBuffers b{refs_of(inputs, num_inputs, (fn + ": input").c_str()), refs_of(outputs, num_outputs, (fn + ": output").c_str())};
  auto overlap = [](const esg::eval::TensorRef& x, const esg::eval::TensorRef& y) {
    const size_t nx = x.nbytes(), ny = y.nbytes();
    return nx && ny && x.bytes < y.bytes + ny && y.bytes < x.bytes + nx;
  };
  for (size_t o = 0; o < b.out.size(); ++o) {
    auto refuse = [&](const char* kind, size_t k) {
      throw ir::Error(ir::ErrorCode::InvalidArgument, fn + ": output " + std::to_string(o) + " shares memory with " + kind + " " +
                                                          std::to_string(k) + ": a run reads its inputs while it writes its outputs, so "
                                                          "each output needs memory of its own");
    };
    for (size_t i = 0; i < b.in.size(); ++i)
      if (overlap(b.out[o], b.in[i])) refuse("input", i);
    for (size_t k = 0; k < o; ++k)
      if (overlap(b.out[o], b.out[k])) refuse("output", k);
  }
  return b;
}

// The table's names, made once: the strings esg_backend_name hands out live as long as the library.
const std::vector<std::string>& backend_names() {
  static const std::vector<std::string> names = esg::backends::names();
  return names;
}

// The C options as the pipeline's. `compile`: a NULL backend is the CPU; otherwise (a load) it
// stays unset, the file's.
esg::runtime::CompileOptions compile_options_of(const esg_compile_options* options, const char* call, bool compile) {
  esg_compile_options o;
  esg_compile_options_init_(&o, sizeof o);
  esg::capi::read_options(&o, sizeof o, options, call);
  auto invalid = [&](const std::string& what) { return ir::Error(ir::ErrorCode::InvalidArgument, std::string(call) + ": " + what); };
  esg::runtime::CompileOptions co;
  co.streams = o.streams;
  co.threads = o.threads;
  co.fusion = o.fusion;
  co.memory_reuse = o.memory_reuse;
  co.verify_each_pass = o.verify_each_pass;
  co.max_loop_iterations = o.max_loop_iterations;
  co.max_nodes = o.max_nodes;
  co.max_plans = o.max_plans;
  co.grow_memory = o.grow_memory;
  co.max_memory_bytes = o.max_memory_bytes;
  const std::string precision = o.precision ? o.precision : "f32";
  if (precision == "bf16") co.precision = esg::runtime::Precision::BF16;
  else if (precision != "f32") throw invalid("precision '" + precision + "'; valid: 'f32', 'bf16'");
  if (o.backend || compile) {
    const std::string backend = o.backend ? o.backend : "cpu";
    co.backend = esg::backends::find(backend);
    if (!co.backend) {
      std::string valid;
      for (const std::string& name : backend_names()) valid += (valid.empty() ? "'" : ", '") + name + "'";
      throw invalid("backend '" + backend + "'; valid: " + valid);
    }
  }
  // The backend's own options: the struct's fields where set, then the string's.
  if (o.device != 0) co.backend_options.set("device", o.device);
  if (o.ai_cores != 0) co.backend_options.set("ai_cores", o.ai_cores);
  if (o.host_fallback) co.backend_options.set("host_fallback", 1);
  if (o.backend_options) co.backend_options.parse(o.backend_options);
  if (o.num_symbols && (!o.symbol_names || !o.symbol_sizes)) throw invalid("num_symbols without symbol_names or symbol_sizes");
  for (size_t i = 0; i < o.num_symbols; ++i) {
    if (!o.symbol_names[i]) throw invalid("a symbol name is NULL");
    co.symbols.emplace_back(o.symbol_names[i], o.symbol_sizes[i]);
  }
  if (o.num_ranges && (!o.range_names || !o.range_min || !o.range_max)) throw invalid("num_ranges without range_names, range_min or range_max");
  for (size_t i = 0; i < o.num_ranges; ++i) {
    if (!o.range_names[i]) throw invalid("a range's symbol name is NULL");
    co.ranges.push_back({o.range_names[i], o.range_min[i], o.range_max[i]});
  }
  co.cache_max_bytes = o.cache_max_bytes;
  if (o.cache_dir) co.cache_dir = o.cache_dir;
  return co;
}

esg::runtime::FindBackend find_backend() {
  return [](const std::string& name) { return esg::backends::find(name); };
}

}  // namespace

extern "C" {

ESG_API size_t esg_backend_count(void) { return backend_names().size(); }

ESG_API const char* esg_backend_name(size_t index) {
  return index < backend_names().size() ? backend_names()[index].c_str() : nullptr;
}

ESG_API void esg_compile_options_init_(esg_compile_options* options, size_t struct_size) {
  esg_compile_options d;
  std::memset(&d, 0, sizeof d);
  d.streams = 1;
  d.fusion = true;
  d.memory_reuse = true;
  d.max_loop_iterations = esg::runtime::kDefaultMaxLoopIterations;
  d.max_nodes = esg::runtime::kDefaultMaxNodes;
  d.max_plans = esg::runtime::kDefaultMaxPlans;
  d.cache_max_bytes = esg::runtime::kDefaultCacheMaxBytes;
  esg::capi::init_options(options, struct_size, &d, sizeof d);
}

ESG_API esg_model* esg_compile(const esg_graph* graph, const esg_compile_options* options) {
  esg_model* model = nullptr;
  guarded(nullptr, [&] {
    if (!graph || !graph->g) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_compile: the graph is NULL");
    esg::runtime::CompileOptions co = compile_options_of(options, "esg_compile", true);
    esg_compile_options o;
    esg_compile_options_init_(&o, sizeof o);
    esg::capi::read_options(&o, sizeof o, options, "esg_compile");
    const std::string source_key = o.cache_source && !esg::runtime::cache_dir(co).empty() ? esg::runtime::source_key_of_file(o.cache_source) : "";
    model = new esg_model(esg::runtime::compile_cached(std::make_unique<ir::Graph>(*graph->g), std::move(co), find_backend(), source_key));
  });
  return model;
}

ESG_API esg_status esg_model_save(const esg_model* model, const char* path) {
  guarded(nullptr, [&] {
    need_model(model, "esg_model_save");
    if (!path) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_model_save: the path is NULL");
    esg::runtime::save_model(*model->m, path);
  });
  return esg_last_status();
}

ESG_API esg_model* esg_model_load(const char* path, const esg_compile_options* options) {
  esg_model* model = nullptr;
  guarded(nullptr, [&] {
    if (!path) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_model_load: the path is NULL");
    esg_compile_options o;
    esg_compile_options_init_(&o, sizeof o);
    esg::capi::read_options(&o, sizeof o, options, "esg_model_load");
    esg::runtime::LoadOptions lo;
    lo.run = compile_options_of(options, "esg_model_load", false);
    lo.recompile = o.recompile;
    lo.verify_weights = !o.skip_weight_check;
    model = new esg_model(esg::runtime::load_model(path, lo, find_backend()));
  });
  return model;
}

ESG_API esg_model* esg_model_find_cached(const char* source_path, const esg_compile_options* options) {
  esg_model* model = nullptr;
  guarded(nullptr, [&] {
    if (!source_path) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_model_find_cached: the path is NULL");
    std::unique_ptr<esg::runtime::Model> found =
        esg::runtime::find_cached(source_path, compile_options_of(options, "esg_model_find_cached", true), find_backend());
    if (found) model = new esg_model(std::move(found));
  });
  return model;
}

ESG_API esg_graph* esg_model_graph(const esg_model* model) {
  esg_graph* g = nullptr;
  guarded(nullptr, [&] {
    need_model(model, "esg_model_graph");
    g = new esg_graph{std::make_unique<ir::Graph>(model->m->graph())};
  });
  return g;
}

ESG_API void esg_model_destroy(esg_model* model) { delete model; }

ESG_API esg_status esg_model_cancel(const esg_model* model) {
  guarded(nullptr, [&] {
    need_model(model, "esg_model_cancel");
    model->m->cancel();
  });
  return esg_last_status();
}

ESG_API size_t esg_model_num_inputs(const esg_model* model) { return model && model->m ? model->m->graph().inputs().size() : 0; }
ESG_API size_t esg_model_num_outputs(const esg_model* model) { return model && model->m ? model->m->graph().outputs().size() : 0; }

ESG_API const char* esg_model_input_name(const esg_model* model, size_t index) {
  return model && index < model->input_names.size() ? model->input_names[index].c_str() : nullptr;
}
ESG_API const char* esg_model_output_name(const esg_model* model, size_t index) {
  return model && index < model->output_names.size() ? model->output_names[index].c_str() : nullptr;
}

ESG_API esg_dtype esg_model_input_dtype(const esg_model* model, size_t index) {
  if (!model || index >= model->input_names.size()) return ESG_DTYPE_INVALID;
  const ir::Graph& g = model->m->graph();
  return static_cast<esg_dtype>(g.values[g.inputs()[index]].dtype);
}

ESG_API esg_status esg_model_output_shape(const esg_model* model, const esg_buffer* inputs, size_t num_inputs, size_t index,
                                          esg_dtype* dtype, int64_t* dims, size_t capacity, size_t* rank) {
  guarded(nullptr, [&] {
    need_model(model, "esg_model_output_shape");
    std::vector<ir::Shape> shapes;
    if (num_inputs != model->m->graph().inputs().size())
      throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_model_output_shape: the model takes " +
                                                          std::to_string(model->m->graph().inputs().size()) + " input(s)");
    if (num_inputs && !inputs) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_model_output_shape: inputs is NULL");
    for (size_t i = 0; i < num_inputs; ++i) {
      if (inputs[i].rank && !inputs[i].dims) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_model_output_shape: dims is NULL");
      shapes.push_back(ir::Shape::from(inputs[i].dims, inputs[i].rank));
    }
    const std::vector<ir::Shape> outs = model->m->output_shapes(shapes);
    if (index >= outs.size()) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_model_output_shape: no output " + std::to_string(index));
    if (dtype) *dtype = static_cast<esg_dtype>(model->m->graph().values[model->m->graph().outputs()[index]].dtype);
    if (rank) *rank = outs[index].rank();
    if (outs[index].rank() > capacity || (outs[index].rank() && !dims))
      throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_model_output_shape: output " + std::to_string(index) + " has rank " +
                                                          std::to_string(outs[index].rank()) + ", more than dims holds");
    // A size the data decides is a symbol inside; -1 outside, as ONNX Runtime reports it.
    for (size_t d = 0; d < outs[index].rank(); ++d) dims[d] = ir::dim_is_symbolic(outs[index][d]) ? -1 : outs[index][d];
  });
  return esg_last_status();
}

ESG_API esg_status esg_model_run(const esg_model* model, const esg_buffer* inputs, size_t num_inputs, const esg_buffer* outputs,
                                 size_t num_outputs) {
  guarded(nullptr, [&] {
    need_model(model, "esg_model_run");
    const RunBuffers b = run_buffers(inputs, num_inputs, outputs, num_outputs, "esg_model_run");
    model->m->run(b.in, b.out);
  });
  return esg_last_status();
}

ESG_API esg_prepared* esg_model_prepare(const esg_model* model, const esg_buffer* inputs, size_t num_inputs, const esg_buffer* outputs,
                                        size_t num_outputs) {
  esg_prepared* made = nullptr;
  guarded(nullptr, [&] {
    need_model(model, "esg_model_prepare");
    auto p = std::make_unique<esg_prepared>();
    p->model = model->m;
    const RunBuffers b = run_buffers(inputs, num_inputs, outputs, num_outputs, "esg_model_prepare");
    p->run = model->m->prepare(b.in, b.out);
    made = p.release();
  });
  return made;
}

ESG_API esg_status esg_prepared_run(esg_prepared* prepared) {
  guarded(nullptr, [&] {
    if (!prepared) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_prepared_run: the prepared run is NULL");
    prepared->run->run();
  });
  return esg_last_status();
}

ESG_API void esg_prepared_destroy(esg_prepared* prepared) { delete prepared; }

ESG_API esg_status esg_model_run_allocated(const esg_model* model, const esg_buffer* inputs, size_t num_inputs, esg_buffer* outputs,
                                           size_t num_outputs) {
  if (outputs && num_outputs) std::memset(outputs, 0, num_outputs * sizeof *outputs);
  guarded(nullptr, [&] {
    need_model(model, "esg_model_run_allocated");
    const size_t want = model->m->graph().outputs().size();
    if (num_outputs != want)
      throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_model_run_allocated: the model gives " + std::to_string(want) + " output(s), got " +
                                                          std::to_string(num_outputs) + " buffer(s)");
    if (num_outputs && !outputs) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_model_run_allocated: outputs is NULL");
    std::vector<esg::eval::HostTensor> made = model->m->run(refs_of(inputs, num_inputs, "esg_model_run_allocated: input"));
    // Each output handed over whole, its sizes beside it: no copy of its bytes. Everything is
    // allocated before anything is handed out.
    std::vector<std::unique_ptr<OwnedOutput>> owned;
    std::vector<std::unique_ptr<int64_t[]>> dims;
    for (esg::eval::HostTensor& t : made) {
      owned.push_back(std::make_unique<OwnedOutput>());
      owned.back()->tensor = std::move(t);
      dims.push_back(std::make_unique<int64_t[]>(owned.back()->tensor.shape.rank() + 1));
    }
    for (size_t i = 0; i < owned.size(); ++i) {
      OwnedOutput* o = owned[i].release();
      int64_t* slots = dims[i].release();
      std::memcpy(slots, &o, sizeof o);
      const esg::eval::HostTensor& t = o->tensor;
      std::copy(t.shape.begin(), t.shape.end(), slots + 1);
      outputs[i] = esg_buffer{t.bytes.empty() ? nullptr : const_cast<uint8_t*>(t.bytes.data()), t.bytes.size(),
                              static_cast<esg_dtype>(t.dtype), slots + 1, t.shape.rank()};
    }
  });
  return esg_last_status();
}

ESG_API void esg_buffer_free(esg_buffer* buffer) {
  if (!buffer) return;
  if (buffer->dims) {
    int64_t* slots = const_cast<int64_t*>(buffer->dims) - 1;  // the owner, then the sizes
    OwnedOutput* owner;
    std::memcpy(&owner, slots, sizeof owner);
    delete owner;
    delete[] slots;
  }
  std::memset(buffer, 0, sizeof *buffer);
}

ESG_API esg_status esg_model_profile(const esg_model* model, const esg_buffer* inputs, size_t num_inputs, const esg_buffer* outputs,
                                     size_t num_outputs, const char* trace_path) {
  guarded(nullptr, [&] {
    need_model(model, "esg_model_profile");
    if (!trace_path) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_model_profile: trace_path is NULL");
    const RunBuffers b = run_buffers(inputs, num_inputs, outputs, num_outputs, "esg_model_profile");
    model->m->profile(b.in, b.out, trace_path);
  });
  return esg_last_status();
}

namespace {
char* text_of(const esg_model* model, const char* fn, std::string (esg::runtime::Model::*get)() const) {
  char* out = nullptr;
  guarded(nullptr, [&] {
    need_model(model, fn);
    const std::string r = (model->m.get()->*get)();
    out = static_cast<char*>(std::malloc(r.size() + 1));
    if (!out) throw std::bad_alloc();
    std::memcpy(out, r.c_str(), r.size() + 1);
  });
  return out;
}
}  // namespace

ESG_API char* esg_model_report(const esg_model* model) { return text_of(model, "esg_model_report", &esg::runtime::Model::report); }
ESG_API char* esg_model_to_dot(const esg_model* model) { return text_of(model, "esg_model_to_dot", &esg::runtime::Model::to_dot); }

ESG_API esg_facts* esg_model_facts(const esg_model* model) {
  esg_facts* out = nullptr;
  guarded(nullptr, [&] {
    need_model(model, "esg_model_facts");
    out = esg::capi::make_facts(model->m->facts());
  });
  return out;
}

ESG_API esg_status esg_model_get_stats_(const esg_model* model, esg_model_stats* stats, size_t struct_size) {
  guarded(nullptr, [&] {
    need_model(model, "esg_model_get_stats");
    if (!stats) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_model_get_stats: stats is NULL");
    if (struct_size < sizeof(size_t))
      throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_model_get_stats: struct_size " + std::to_string(struct_size) + " is too small");
    const esg::runtime::Facts facts = model->m->facts();
    esg_model_stats out;
    std::memset(&out, 0, sizeof out);
    out.struct_size = struct_size;
    for (const auto& [key, field] : kStatsFields) out.*field = facts.number(key);
    // An older caller's smaller struct gets its prefix; a newer caller's fields past ours read 0.
    std::memset(stats, 0, struct_size);
    std::memcpy(stats, &out, std::min(struct_size, sizeof out));
  });
  return esg_last_status();
}

}  // extern "C"
