/*
 * esgraph C ABI: the one stable boundary of the project.
 *
 * C99. Opaque handles, explicit append-only enum values, and status codes with a thread-local
 * message. Every op has one function, generated from op_defs/ into <esgraph/c/ops.h>:
 *
 *     esg_tensor y = esg_add(a, b, NULL);
 *     if (!esg_tensor_valid(y)) fprintf(stderr, "%s\n", esg_last_error());
 *
 * A call that fails returns an invalid tensor (or a non-zero esg_status), sets the calling
 * thread's last error, and records the error in the builder if it is the builder's first, so a
 * chain of calls can be checked once with esg_builder_status().
 */
#ifndef ESGRAPH_C_ESGRAPH_H
#define ESGRAPH_C_ESGRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "esgraph/c/version.h"

#if defined(_WIN32)
#  if defined(ESGRAPH_BUILDING)
#    define ESG_API __declspec(dllexport)
#  else
#    define ESG_API __declspec(dllimport)
#  endif
#elif defined(ESGRAPH_BUILDING)
#  define ESG_API __attribute__((visibility("default")))
#else
#  define ESG_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- versions (the headers': esgraph/c/version.h; the library's: esg_version()) ----------- */
/* The library's version, "major.minor.patch". */
ESG_API const char* esg_version(void);

/* ---- status codes (values are fixed forever; new codes are appended) ----------------------- */
typedef enum esg_status {
  ESG_OK = 0,
  ESG_ERR_INVALID_ARGUMENT = 1, /* a null pointer, an index out of range, a bad option value   */
  ESG_ERR_SHAPE = 2,            /* shapes that the op's inference rule rejects                   */
  ESG_ERR_DTYPE = 3,            /* a dtype the op does not accept, or inputs that disagree        */
  ESG_ERR_ATTRIBUTE = 4,        /* an attribute of the wrong type, out of range, or unknown       */
  ESG_ERR_LIFETIME = 5,         /* tensors of two builders, or of a graph already built           */
  ESG_ERR_FORMAT = 6,           /* a truncated, corrupted or unsupported graph file               */
  ESG_ERR_IO = 7,               /* a file that cannot be read or written                          */
  ESG_ERR_UNSUPPORTED = 8,      /* an option of a newer library, a feature not built in          */
  ESG_ERR_INTERNAL = 9,         /* a bug in esgraph: please report it                             */
  ESG_ERR_OUT_OF_MEMORY = 10,
  ESG_ERR_BACKEND = 11,         /* a device runtime that is missing or failed (API 2)             */
  ESG_ERR_LIMIT = 12,           /* beyond a limit: bodies nested too deep, a graph over max_nodes,
                                   a loop over max_loop_iterations (API 2)                         */
  ESG_ERR_CANCELLED = 13,       /* a run stopped by esg_model_cancel (API 2)                      */
  ESG_ERR_COMMUNICATION = 14    /* a collective whose ranks disagree or never arrived, or a failed
                                   transport (API 2)                                               */
} esg_status;

/* The calling thread's last error message ("" after a success), and its status code. */
ESG_API const char* esg_last_error(void);
ESG_API esg_status esg_last_status(void);

/* ---- dtypes (values fixed forever) --------------------------------------------------------- */
typedef enum esg_dtype {
  ESG_DTYPE_INVALID = 0,
  ESG_F32 = 1, ESG_F16 = 2, ESG_BF16 = 3, ESG_F64 = 4,
  ESG_I8 = 5, ESG_I16 = 6, ESG_I32 = 7, ESG_I64 = 8, ESG_U8 = 9,
  ESG_BOOL = 10,
  ESG_U16 = 11, ESG_U32 = 12, ESG_U64 = 13 /* API 2 */
} esg_dtype;

ESG_API const char* esg_dtype_name(esg_dtype dtype);
ESG_API size_t esg_dtype_size(esg_dtype dtype);

/* ---- handles ------------------------------------------------------------------------------- */
typedef struct esg_builder esg_builder; /* builds one graph at a time                          */
typedef struct esg_graph esg_graph;     /* a finished, immutable graph                          */

/*
 * A tensor: one value in a builder's graph. A small value type, cheap to copy; its fields are
 * private. A zero-initialized esg_tensor ({0}) means "no tensor" (e.g. an optional input left
 * out). A tensor stays usable until its builder builds, resets or is destroyed; using it
 * afterwards, or with a tensor of another builder, fails with ESG_ERR_LIFETIME (never a read of
 * a destroyed builder: handles are checked against the builders alive).
 */
typedef struct esg_tensor {
  esg_builder* priv_builder;
  uint32_t priv_value;
  uint32_t priv_epoch;
} esg_tensor;

/* A body of a control-flow op (esg_if, esg_while), built with esg_builder_begin_subgraph. */
typedef uint32_t esg_subgraph;

typedef struct esg_i64_list {
  const int64_t* data;
  size_t size;
} esg_i64_list;

typedef struct esg_f64_list {
  const double* data;
  size_t size;
} esg_f64_list;

/* ---- builders ------------------------------------------------------------------------------ */
ESG_API esg_builder* esg_builder_create(const char* graph_name);
ESG_API void esg_builder_destroy(esg_builder* builder);

/* The builder's first error since it was created or last built (ESG_OK if none), and its message. */
ESG_API esg_status esg_builder_status(const esg_builder* builder);
ESG_API const char* esg_builder_error(const esg_builder* builder);
/* Forgets the builder's first error (after the caller has dealt with it); the graph itself
   was never changed by the failed call. */
ESG_API void esg_builder_clear_error(esg_builder* builder);
/* API 2: whether a failed call becomes the builder's first error (true, the default: check a
   chain of calls once). With false, a failed call reports through its return value and
   esg_last_error only and leaves the builder as it was: what the C++ and Python APIs use, whose
   failed calls throw (an exception caught and handled leaves nothing behind). */
ESG_API void esg_builder_set_sticky_errors(esg_builder* builder, bool sticky);

/*
 * A symbolic dimension named `name` (the same name gives the same dimension), usable wherever a
 * dims array is taken. Symbolic dimensions are negative numbers; never compute with them.
 */
ESG_API int64_t esg_symbol(esg_builder* builder, const char* name);

/* A graph input. `dims` holds `rank` sizes or symbolic dimensions. */
ESG_API esg_tensor esg_input(esg_builder* builder, const char* name, esg_dtype dtype,
                             const int64_t* dims, size_t rank);

/* A constant; `data` holds the elements in row-major order, copied into the graph. */
ESG_API esg_tensor esg_constant(esg_builder* builder, esg_dtype dtype, const int64_t* dims,
                                size_t rank, const void* data, size_t nbytes);

/*
 * A constant over `data` in place, not copied: the graph, its copies and every model compiled
 * from it read those bytes until the last of them is gone, then call release(context) once
 * (release may be NULL). It is called once also when this call fails, so the caller hands the
 * memory over either way. The bytes must stay alive and unchanged until then, and `data` must be
 * aligned to the element size. For weights the caller already holds, such as a mapped file or an
 * importer's arrays, this saves a copy of each.
 */
ESG_API esg_tensor esg_constant_in_place(esg_builder* builder, esg_dtype dtype, const int64_t* dims, size_t rank,
                                         const void* data, size_t nbytes, void (*release)(void* context), void* context);

/* A rank-0 constant of `like`'s dtype and builder, holding `value` converted to that dtype. */
ESG_API esg_tensor esg_scalar_like(esg_tensor like, double value);

/* ---- scopes: apply to every node created until the matching pop ---------------------------- */
/* Prefixes node names with "scope/". */
ESG_API esg_status esg_builder_push_name_scope(esg_builder* builder, const char* scope);
/* Attaches the string annotation key=value (e.g. a stream or device hint) to nodes. */
ESG_API esg_status esg_builder_push_annotation(esg_builder* builder, const char* key, const char* value);
/* Makes nodes run after the producers of `deps`. */
ESG_API esg_status esg_builder_push_control_deps(esg_builder* builder, const esg_tensor* deps, size_t count);
ESG_API esg_status esg_builder_pop_name_scope(esg_builder* builder);
ESG_API esg_status esg_builder_pop_annotation(esg_builder* builder);
ESG_API esg_status esg_builder_pop_control_deps(esg_builder* builder);

/*
 * Bodies of control-flow ops. Between begin and end, new nodes go into the body; a body may use
 * tensors of the enclosing graph directly (they are captured). `params_like` gives the body one
 * parameter per tensor, with the same dtype and shape (esg_while's loop-carried values); pass
 * NULL, 0 for none (esg_if's branches).
 */
ESG_API esg_status esg_builder_begin_subgraph(esg_builder* builder, const esg_tensor* params_like,
                                              size_t count);
ESG_API esg_tensor esg_subgraph_param(esg_builder* builder, size_t index);
/* Abandons the innermost body and all made in it (e.g. when building it failed). */
ESG_API esg_status esg_builder_cancel_subgraph(esg_builder* builder);
/* Ends the innermost body with its results; returns 0 on failure. */
ESG_API esg_subgraph esg_builder_end_subgraph(esg_builder* builder, const esg_tensor* results,
                                              size_t count);
/* API 2: abandons the bodies from `first` on, ended but given to no op (the op's call failed,
   or building a later body did), and everything made since `first` began; without it such
   bodies make esg_builder_build fail. */
ESG_API esg_status esg_builder_discard_subgraphs(esg_builder* builder, esg_subgraph first);

/*
 * Finishes the graph with the given outputs and resets the builder for the next graph: tensors
 * made before this call can no longer be used. Returns NULL if the builder holds an error (the
 * first one is reported) or an output is invalid. The caller owns the graph.
 */
ESG_API esg_graph* esg_builder_build(esg_builder* builder, const esg_tensor* outputs, size_t count);

/* ---- tensors ------------------------------------------------------------------------------- */
ESG_API bool esg_tensor_valid(esg_tensor tensor);
ESG_API esg_dtype esg_tensor_dtype(esg_tensor tensor);
/* The rank, or SIZE_MAX for an invalid tensor. */
ESG_API size_t esg_tensor_rank(esg_tensor tensor);
/* Dimension `axis` (symbolic dimensions are negative; see esg_symbol_name), or 0 on error. */
ESG_API int64_t esg_tensor_dim(esg_tensor tensor, size_t axis);
/* The name of a symbolic dimension of the tensor's builder, or NULL. */
ESG_API const char* esg_symbol_name(esg_tensor tensor, int64_t dim);
/* The value's name: the one set, else one derived from its node ("matmul_3:0"). */
ESG_API const char* esg_tensor_name(esg_tensor tensor);
ESG_API esg_status esg_tensor_set_name(esg_tensor tensor, const char* name);
/* Ops with several outputs return their first; these reach the others. */
ESG_API size_t esg_tensor_output_count(esg_tensor tensor);
ESG_API esg_tensor esg_tensor_output(esg_tensor tensor, size_t index);

/* ---- graphs -------------------------------------------------------------------------------- */
ESG_API void esg_graph_destroy(esg_graph* graph);
ESG_API size_t esg_graph_node_count(const esg_graph* graph);
/* Inspection (API 2): what a graph holds, for exporters and tools. Values and nodes are named by
 * id. A graph is a tree of bodies: body 0 is its top level, and each if/while node owns bodies
 * of its own; a body lists its nodes in topological order, its parameters, its results and the
 * values it captures from the body around it. Ids and indexes out of range give -1, NULL or 0
 * and set the last error. Strings stay valid while the graph lives. */
typedef enum esg_attr_kind {
  ESG_ATTR_INT = 1, ESG_ATTR_FLOAT = 2, ESG_ATTR_BOOL = 3, ESG_ATTR_STRING = 4, ESG_ATTR_DTYPE = 5,
  ESG_ATTR_ENUM = 6, ESG_ATTR_INT_LIST = 7, ESG_ATTR_FLOAT_LIST = 8
} esg_attr_kind;
ESG_API const char* esg_graph_name(const esg_graph* graph);
/* The graph's inputs and outputs: body 0's parameters and results. */
ESG_API size_t esg_graph_input_count(const esg_graph* graph);
ESG_API int64_t esg_graph_input(const esg_graph* graph, size_t index);
ESG_API size_t esg_graph_output_count(const esg_graph* graph);
ESG_API int64_t esg_graph_output(const esg_graph* graph, size_t index);
ESG_API size_t esg_graph_body_node_count(const esg_graph* graph, int64_t body);
ESG_API int64_t esg_graph_body_node(const esg_graph* graph, int64_t body, size_t index);
ESG_API size_t esg_graph_body_param_count(const esg_graph* graph, int64_t body);
ESG_API int64_t esg_graph_body_param(const esg_graph* graph, int64_t body, size_t index);
ESG_API size_t esg_graph_body_result_count(const esg_graph* graph, int64_t body);
ESG_API int64_t esg_graph_body_result(const esg_graph* graph, int64_t body, size_t index);
/* Capture `index` of a body: the value inside it, and (in *outer) the value of the enclosing
 * body it stands for. */
ESG_API size_t esg_graph_body_capture_count(const esg_graph* graph, int64_t body);
ESG_API int64_t esg_graph_body_capture(const esg_graph* graph, int64_t body, size_t index, int64_t* outer);
ESG_API const char* esg_graph_value_name(const esg_graph* graph, int64_t value);
ESG_API esg_dtype esg_graph_value_dtype(const esg_graph* graph, int64_t value);
ESG_API size_t esg_graph_value_rank(const esg_graph* graph, int64_t value);
/* A size, or for a symbolic dimension a negative code whose name esg_graph_dim_symbol gives. */
ESG_API int64_t esg_graph_value_dim(const esg_graph* graph, int64_t value, size_t axis);
ESG_API const char* esg_graph_dim_symbol(const esg_graph* graph, int64_t dim);
/* The node's op name ("constant" for constants). */
ESG_API const char* esg_graph_node_op(const esg_graph* graph, int64_t node);
/* Declared inputs (an absent optional one is -1; captures are the bodies'), then outputs. */
ESG_API size_t esg_graph_node_input_count(const esg_graph* graph, int64_t node);
ESG_API int64_t esg_graph_node_input(const esg_graph* graph, int64_t node, size_t index);
ESG_API size_t esg_graph_node_output_count(const esg_graph* graph, int64_t node);
ESG_API int64_t esg_graph_node_output(const esg_graph* graph, int64_t node, size_t index);
/* The bodies of an if/while node, in the op's declared order (none for other ops). */
ESG_API size_t esg_graph_node_body_count(const esg_graph* graph, int64_t node);
ESG_API int64_t esg_graph_node_body(const esg_graph* graph, int64_t node, size_t index);
/* A constant's bytes (row-major, its value's dtype); NULL for other nodes. */
ESG_API const void* esg_graph_node_data(const esg_graph* graph, int64_t node, size_t* nbytes);
/* Attributes in the op's declared order, every one present (defaults filled in). Int, bool,
 * dtype and enum (the index into the op's values) read as int; enums also as their name. */
ESG_API size_t esg_graph_node_attr_count(const esg_graph* graph, int64_t node);
ESG_API const char* esg_graph_node_attr_name(const esg_graph* graph, int64_t node, size_t attr);
ESG_API esg_attr_kind esg_graph_node_attr_kind(const esg_graph* graph, int64_t node, size_t attr);
ESG_API int64_t esg_graph_node_attr_int(const esg_graph* graph, int64_t node, size_t attr);
ESG_API double esg_graph_node_attr_float(const esg_graph* graph, int64_t node, size_t attr);
ESG_API const char* esg_graph_node_attr_string(const esg_graph* graph, int64_t node, size_t attr);
/* A list attribute: its length, with *values pointing at its elements. */
ESG_API size_t esg_graph_node_attr_ints(const esg_graph* graph, int64_t node, size_t attr, const int64_t** values);
ESG_API size_t esg_graph_node_attr_floats(const esg_graph* graph, int64_t node, size_t attr, const double** values);

/* Text renderings; the caller frees them with esg_free. NULL on error. */
ESG_API char* esg_graph_to_text(const esg_graph* graph);
ESG_API char* esg_graph_to_dot(const esg_graph* graph);
ESG_API void esg_free(void* memory);
/* Checks the graph's invariants (see docs/graph-format.md); ESG_OK or the first violation. */
ESG_API esg_status esg_graph_verify(const esg_graph* graph);

/* The versioned binary format of docs/graph-format.md. */
ESG_API esg_status esg_graph_save(const esg_graph* graph, const char* path);
ESG_API esg_graph* esg_graph_load(const char* path);
/* The same format in memory; *data is freed with esg_free. */
ESG_API esg_status esg_graph_serialize(const esg_graph* graph, void** data, size_t* size);
ESG_API esg_graph* esg_graph_deserialize(const void* data, size_t size);

/* ---- compiled models -------------------------------------------------------------------- */
typedef struct esg_model esg_model; /* a compiled graph: thread-safe to run */

/* API 2: the backends this library was built with, the names esg_compile_options.backend takes,
   in its table's order ("cpu" first: the default). esg_backend_name(i) for i < esg_backend_count();
   NULL past the end. The strings live as long as the library. */
ESG_API size_t esg_backend_count(void);
ESG_API const char* esg_backend_name(size_t index);

typedef struct esg_compile_options {
  size_t struct_size;
  int32_t streams;          /* streams to spread independent branches over: 1 (default) .. 16;
                               each runs on its own thread when `threads` has one free per stream,
                               else the launch list runs in order */
  int32_t threads;          /* threads a run may use, the caller's included: 0 (default) for the
                               machine's cores, 1 .. 256; large kernels and streams share them */
  bool fusion;              /* fuse elementwise groups (default true) */
  bool memory_reuse;        /* share arena bytes between values whose lifetimes do not overlap (default true) */
  bool verify_each_pass;    /* check the graph's invariants after every pass (default false) */
  const char* const* symbol_names; /* sizes of symbolic dimensions, bound at compile time:   */
  const int64_t* symbol_sizes;     /* names and sizes, num_symbols each; unbound ones stay    */
  size_t num_symbols;              /* symbolic, bound to each run's sizes (see max_plans)    */
  /* API 2: where the model runs. NULL or "cpu" (default): the host CPU. "ascend": an Ascend NPU
     through AscendCL, loaded at run time (ASCEND_HOME_PATH, CANN's install paths, then the
     dynamic linker); ESG_ERR_BACKEND says what was looked for when it is missing.
     "ascend-sim": the same backend on esgraph's simulated device (docs/ascend.md). */
  const char* backend;
  int32_t device;           /* Ascend: the device id (default 0) */
  int32_t ai_cores;         /* Ascend: blocks per kernel at most, 0 (default): the device's vector cores */
  bool host_fallback;       /* Ascend: ops with no device lowering run on the host CPU, their operands
                               copied off the device and back around them, each synchronizing its
                               stream (and no run is captured). Default false: such a model is
                               refused with ESG_ERR_UNSUPPORTED, naming the ops and why. */
  /* API 2: any option of the backend as "name=value,name=value" (integers; a flag is 0 or 1),
     read after the fields above, which are the same as "device=..", "ai_cores=..",
     "host_fallback=..". Each backend declares its own (docs/backends.md); an unknown name or a
     value out of range is refused with ESG_ERR_INVALID_ARGUMENT. NULL (default): none. */
  const char* backend_options;
  /* API 2: limits against hostile models (docs/reliability.md); 0 for none. A run whose loops
     (ONNX Loop, while_; nested ones counting every inner iteration) iterate more than
     max_loop_iterations times in all fails with ESG_ERR_LIMIT (default 10,000,000); a graph of
     more than max_nodes nodes, its bodies' included, is not compiled (ESG_ERR_LIMIT; default
     4,194,304). */
  int64_t max_loop_iterations;
  int64_t max_nodes;
  /* API 2: the precision of convolutions' and constant-weight products' multiplications. NULL or "f32"
     (default): f32 throughout. "bf16": their operands rounded to bfloat16, products summed in
     f32 (about 3 significant digits; faster where the CPU multiplies bf16: AVX512-BF16, AMX).
     A precision the backend or the CPU cannot honour is refused with ESG_ERR_UNSUPPORTED,
     naming what is missing. */
  const char* precision;
  /* API 2: a graph with symbolic sizes compiles one symbolic plan per size class (a range below
     is one class; an unranged symbol's sizes fall in classes up to the next power of two), its
     memory planned for the class's largest size; each new set of sizes binds it (shapes inferred
     again and checked, kernels bound where sizes changed). A graph no symbolic plan follows (a
     body, a size an `if` picks) compiles a plan per set of input shapes instead. At most
     max_plans bindings or plans are kept (default 16), and as many symbolic plans, the least
     recently run dropped first. 0: no limit. A size bound in symbol_names/symbol_sizes is fixed:
     a run with another size fails with ESG_ERR_SHAPE. */
  int64_t max_plans;
  /* API 2: ranges of symbolic dimensions, range_min[i] <= range_names[i] <= range_max[i],
     num_ranges each: a run with a size outside fails with ESG_ERR_SHAPE naming the symbol, the
     range and the input. A symbol is either bound (symbol_names) or ranged, not both. */
  const char* const* range_names;
  const int64_t* range_min;
  const int64_t* range_max;
  size_t num_ranges;
  /* API 2: false (default): a range's memory is planned for its largest size, once. true: grown
     on demand: a ranged symbol's sizes fall in power-of-two classes up to the range's end, as an
     unranged symbol's do, each class planned for its own largest size when a run first needs it. */
  bool grow_memory;
  /* API 2: a limit against hostile models (docs/reliability.md): the most bytes a plan's working
     memory and outputs, or a tensor whose size a run reads from data (fill_to, expand_to,
     pad_to, range_to and the other ops whose attributes come as tensors), may take. A model
     whose sizes need more is not compiled, a run whose sizes do fails (ESG_ERR_LIMIT) and the
     model stays usable. 0 (default): no cap. */
  int64_t max_memory_bytes;
  /* API 2, read by esg_model_load only. true: a file compiled for another machine (a CPU feature
     its kernels need is missing here) is compiled again from the graph it carries; false
     (default): refused with ESG_ERR_UNSUPPORTED naming what it needs and what this machine has. */
  bool recompile;
  /* API 2, read by esg_model_load only. true: the constants' bytes are not checked against the
     file's checksums (about 30 ms saved per 330 MB; a flipped byte in a weight then goes
     unnoticed). The header, graph and plans are checked always. Default false. */
  bool skip_weight_check;
  /* API 2: the compile cache (docs/model-format.md): a directory of compiled-model files keyed by
     the graph (or cache_source's bytes), the compile's choices, the backend, the target and the
     library version. esg_compile loads a hit instead of compiling, and stores a miss. NULL
     (default): the ESG_CACHE_DIR environment variable, else no cache. */
  const char* cache_dir;
  /* API 2: the most bytes the cache's entries take; storing one drops the least recently used
     beyond it. Default 2 GiB; 0: no bound. */
  int64_t cache_max_bytes;
  /* API 2: the file the graph was imported from (an ONNX or graph file): the cache keys on its
     bytes instead of the graph's, so that esg_model_find_cached finds the model before the file
     is imported again. NULL (default): keyed on the graph. */
  const char* cache_source;
} esg_compile_options;
ESG_API void esg_compile_options_init_(esg_compile_options* options, size_t struct_size);
#define esg_compile_options_init(options) esg_compile_options_init_((options), sizeof(*(options)))

/* A caller-owned tensor, read (inputs) or written (outputs) in place: no copies. */
typedef struct esg_buffer {
  void* data;
  size_t nbytes;
  esg_dtype dtype;
  const int64_t* dims;
  size_t rank;
} esg_buffer;

/* Compiles `graph` for the options' backend (the host CPU by default); the graph may be
   destroyed afterwards. NULL on error. */
ESG_API esg_model* esg_compile(const esg_graph* graph, const esg_compile_options* options);
ESG_API void esg_model_destroy(esg_model* model);
/* API 2: writes the compiled model to `path` as a compiled-model file (docs/model-format.md):
   its graph, options, target and every plan compiled so far, so that esg_model_load runs it
   without compiling. Written to a temporary file and renamed into place. ESG_ERR_UNSUPPORTED
   for a model run in stages (ops whose output sizes the data decides); ESG_ERR_IO when the file
   cannot be written. */
ESG_API esg_status esg_model_save(const esg_model* model, const char* path);
/* API 2: the model of a compiled-model file, with no pass run and no plan made for the sizes it
   holds plans for. `options` (NULL: defaults) sets the threads and limits only, and recompile
   and skip_weight_check; a compile choice set there (backend, streams, fusion, symbols, ...)
   is refused, since the file's are used. A damaged, truncated or hostile file fails with
   ESG_ERR_FORMAT naming what is wrong; a file for a machine with features this one lacks with
   ESG_ERR_UNSUPPORTED (see recompile). NULL on error. */
ESG_API esg_model* esg_model_load(const char* path, const esg_compile_options* options);
/* API 2: the compile cache's model for the file at `source_path` (an entry esg_compile stored
   with options.cache_source naming that file) compiled with `options`, loaded with no import
   and no compile; NULL when there is none (esg_last_status() is then ESG_OK) or on an error.
   The cache is options->cache_dir, else ESG_CACHE_DIR. */
ESG_API esg_model* esg_model_find_cached(const char* source_path, const esg_compile_options* options);
/* API 2: the graph `model` was compiled from (a loaded model's too), to inspect or save; its
   constants' bytes are shared with the model. Destroy with esg_graph_destroy. NULL on error. */
ESG_API esg_graph* esg_model_graph(const esg_model* model);
ESG_API size_t esg_model_num_inputs(const esg_model* model);
ESG_API size_t esg_model_num_outputs(const esg_model* model);
/* The graph's names of input and output `index` (valid while the model lives), or NULL. */
ESG_API const char* esg_model_input_name(const esg_model* model, size_t index);
ESG_API const char* esg_model_output_name(const esg_model* model, size_t index);
/* The dtype of input `index`, or ESG_DTYPE_INVALID. */
ESG_API esg_dtype esg_model_input_dtype(const esg_model* model, size_t index);
/* The dtype and shape of output `index` for inputs of the given buffers' shapes (data unused).
   A size the data decides (the count of nonzero, unique, non_max_suppression and what follows
   from it) reads -1: run with esg_model_run_allocated to get it. */
ESG_API esg_status esg_model_output_shape(const esg_model* model, const esg_buffer* inputs, size_t num_inputs,
                                          size_t index, esg_dtype* dtype, int64_t* dims, size_t capacity, size_t* rank);
/* Runs the model: inputs in the graph's input order, outputs in its output order, each buffer
   of exactly the expected dtype and shape (an output whose size the data decides: of the size
   the run comes to, else ESG_ERR_SHAPE). */
ESG_API esg_status esg_model_run(const esg_model* model, const esg_buffer* inputs, size_t num_inputs,
                                 const esg_buffer* outputs, size_t num_outputs);
/* API 2: runs to come on these buffers (as esg_model_run's), checked and their plan found once:
   each esg_prepared_run then goes straight to the compiled program, with an arena of its own,
   for models so small that checking and finding cost as much as running (a collective of a few
   KiB). The buffers' bytes may change between runs, not their addresses or shapes; they must
   outlive the prepared run, which keeps the model alive (esg_model_destroy may come first).
   One run at a time: a second thread's esg_prepared_run while one is under way fails with
   ESG_ERR_INVALID_ARGUMENT (with collectives it waits for the process's turn instead, as every
   run with collectives does). NULL on an error (esg_last_error says why). */
typedef struct esg_prepared esg_prepared;
ESG_API esg_prepared* esg_model_prepare(const esg_model* model, const esg_buffer* inputs, size_t num_inputs,
                                        const esg_buffer* outputs, size_t num_outputs);
ESG_API esg_status esg_prepared_run(esg_prepared* prepared);
ESG_API void esg_prepared_destroy(esg_prepared* prepared); /* NULL is ignored */
/* API 2: runs the model into outputs it allocates, at the sizes the run comes to: for a model
   whose output sizes the data decides (esg_model_output_shape gives -1 there). Each of the
   num_outputs (= esg_model_num_outputs) buffers is filled: data (NULL for an empty output),
   nbytes, dtype, dims and rank, data and dims held by one allocation of the library. Release
   each with esg_buffer_free. On an error nothing is allocated and every buffer is zeroed. */
ESG_API esg_status esg_model_run_allocated(const esg_model* model, const esg_buffer* inputs, size_t num_inputs,
                                           esg_buffer* outputs, size_t num_outputs);
/* API 2: frees what esg_model_run_allocated put in `buffer` and zeroes it; NULL or a zeroed
   buffer is left as it is. Not for buffers the caller allocated. */
ESG_API void esg_buffer_free(esg_buffer* buffer);
/* The compiled launch list as Graphviz DOT (kernels, fused groups, streams); free with
   esg_free. Empty until a plan exists (symbolic sizes bind at the first run). */
ESG_API char* esg_model_to_dot(const esg_model* model);
/* API 2: stops the runs of `model` under way, from any thread: each returns ESG_ERR_CANCELLED
   at its next kernel launch or loop iteration. Runs that start afterwards are not affected. */
ESG_API esg_status esg_model_cancel(const esg_model* model);
/* esg_model_run that also writes each kernel's time to `trace_path` as a Chrome trace (one row
   per stream; open it in Perfetto or chrome://tracing). */
ESG_API esg_status esg_model_profile(const esg_model* model, const esg_buffer* inputs, size_t num_inputs,
                                     const esg_buffer* outputs, size_t num_outputs, const char* trace_path);
/* What compiling did, for people: the model's record of facts (esg_model_facts) as text, one
   "key: value" line an entry. Its wording may change; tools and tests read the facts. Free with
   esg_free. */
ESG_API char* esg_model_report(const esg_model* model);

/* ---- post-training quantization (API 2; docs/quantization.md) ------------------------------
   A float graph quantized to 8 bits from the values it takes on calibration batches: its
   convolutions and products with constant weights, and the residual sums and max pools between
   them, written in ONNX's QDQ form (activations through quantize_linear and dequantize_linear,
   weights as s8 codes with a scale per output channel), which compiles onto the integer kernels
   and exports to an ONNX QDQ file. Each quantized op's result is compared with the float
   graph's on the same batches. */
typedef enum esg_calibration {
  ESG_CALIBRATE_MINMAX = 0,     /* each activation's range: its extremes over the batches */
  ESG_CALIBRATE_PERCENTILE = 1, /* the range holding `percentile` percent of its values */
  ESG_CALIBRATE_ENTROPY = 2     /* the clipping threshold whose 8-bit histogram is closest to the
                                   full one in KL divergence (TensorRT's entropy calibration) */
} esg_calibration;
typedef struct esg_quantize_options {
  size_t struct_size;
  int32_t calibration;            /* an esg_calibration; default MINMAX */
  int32_t threads;                /* the calibration runs' threads (on the host CPU); 0: every core */
  double percentile;              /* PERCENTILE: in (0, 100]; default 99.99: each side of a tensor's
                                     range cuts half of the rest (one-sided tensors keep more) */
  int64_t bins;                   /* PERCENTILE and ENTROPY: histogram bins over [0, max |x|], in
                                     [256, 8192], for ENTROPY at least 512; default 2048 */
  bool per_tensor_weights;        /* true: one scale per weight tensor; false (default): one per
                                     output channel */
  bool symmetric;                 /* activations: true, i8 over [-m, m], zero point 0; false
                                     (default), u8 over [min, max] with a zero point */
  const char* const* keep_float;  /* node, result or op names ("matmul") left in f32; a name
                                     matching nothing is ESG_ERR_INVALID_ARGUMENT */
  size_t num_keep_float;
  int32_t weight_only_bits;       /* 2, 4 or 8: weight-only instead, each product's constant
                                     weights as codes of this many bits in blocks along K
                                     (matmul_nbits; `symmetric` for the blocks), activations f32,
                                     batches optional (the report's errors NaN without); 0
                                     (default): int8 weights and activations */
  int32_t block_size;             /* weight-only: the codes' blocks, a power of two >= 16; default 32 */
} esg_quantize_options;
ESG_API void esg_quantize_options_init_(esg_quantize_options* options, size_t struct_size);
#define esg_quantize_options_init(options) esg_quantize_options_init_((options), sizeof(*(options)))
typedef struct esg_quantized esg_quantized;
/* Quantizes `graph`, calibrated by running it on `num_batches` sets of inputs: `batches` holds
   num_batches x (the graph's input count) buffers, one batch after another, each in the graph's
   input order. `options` may be NULL (the defaults). NULL on error: ESG_ERR_INVALID_ARGUMENT
   for no batch (but weight-only), bad options or a graph with nothing to quantize; a run's own error for a batch
   of the wrong dtypes or shapes. */
ESG_API esg_quantized* esg_quantize(const esg_graph* graph, const esg_buffer* batches, size_t num_batches,
                                    const esg_quantize_options* options);
ESG_API void esg_quantized_destroy(esg_quantized* quantized); /* NULL is ignored */
/* The quantized graph, a new handle (destroy with esg_graph_destroy); NULL on error. */
ESG_API esg_graph* esg_quantized_graph(const esg_quantized* quantized);
/* One quantized op: what its result became and what that cost, over the calibration batches
   against the float graph (errors accumulate from the ops before it). Fixed: a later addition
   comes as a function of its own. Its strings live as long as `quantized`. */
typedef struct esg_quantized_layer {
  const char* name;        /* its result's, as the graph prints it (%name = op(...)) */
  const char* op;          /* "conv2d", "matmul", "add" */
  bool quantized_result;   /* its result is stored as codes (a product's stays f32) */
  double scale;            /* the result's, when quantized_result */
  int64_t zero_point;
  double min, max;         /* the result's range in the float graph */
  double max_error;        /* the largest |quantized - float| of the result; NaN if either is NaN
                              (or with no batch to measure on) */
  double sqnr_db;          /* 10 log10(sum float^2 / sum (quantized - float)^2); +inf when exact,
                              NaN if a result is NaN */
} esg_quantized_layer;
ESG_API size_t esg_quantized_num_layers(const esg_quantized* quantized);
ESG_API esg_status esg_quantized_layer_get(const esg_quantized* quantized, size_t index, esg_quantized_layer* out);

/* ---- the distributed world (API 2; docs/distributed.md) ------------------------------------
   Collectives (esg_all_reduce, ...) run among the processes of a job. Started by an MPI launcher
   (mpirun), the world is MPI_COMM_WORLD, through Open MPI; otherwise it is this one process. */
/* Makes the caller's communicator the world, before any collective is built or run:
   `mpi_comm` points at an MPI_Comm, duplicated before this returns; MPI must be initialized at
   MPI_THREAD_SERIALIZED or above (MULTIPLE for the fastest calls). ESG_ERR_BACKEND if it is not. */
ESG_API esg_status esg_dist_use_mpi_comm(const void* mpi_comm);
/* The world's size and this process's rank in it (either pointer may be NULL). Finding the world
   the first time starts MPI under a launcher; ESG_ERR_BACKEND if it cannot. */
ESG_API esg_status esg_dist_world(int* size, int* rank);

/* API 2: the main counts of the model's facts (esg_model_facts) in a struct. Fields are only
   ever appended; a field this library does not know reads 0. Counts of the CPU's launch list stay meaningful on Ascend (the device program is
   made from it). */
typedef struct esg_model_stats {
  size_t struct_size;
  int64_t plans;                   /* plans compiled so far: one per size class of a symbolic plan, else per set of input shapes; the rest describe the latest */
  int64_t launches;                /* kernels one run launches */
  int64_t fused_groups;            /* launches that run a group of ops as one kernel */
  int64_t fused_ops;               /* ops inside those groups */
  int64_t epilogue_groups;         /* groups headed by a matmul or convolution */
  int64_t f32_rows;                /* f32 row passes of the groups (scalar stages fold into rows) */
  int64_t fast_kernels;            /* single-op launches on a backend kernel */
  int64_t reference_kernels;       /* single-op launches on the reference evaluator */
  int64_t arena_bytes;             /* the planned peak of the working memory */
  int64_t lower_bound_bytes;       /* the largest live set of the chosen order */
  int64_t no_reuse_bytes;          /* the working memory if no value shared bytes */
  int64_t in_place_values;         /* values that reuse a dying input's buffer */
  int64_t streams;
  int64_t events;
  int64_t device_kernels;          /* Ascend: distinct generated kernel binaries */
  int64_t device_kernel_launches;  /* Ascend: launches of them */
  int64_t library_calls;           /* ops run by the vendor library: aclnn on Ascend, oneDNN primitives on the CPU */
  int64_t device_copies;           /* Ascend: copies on the device */
  int64_t host_launches;           /* Ascend: ops run on the host (host_fallback) */
  int64_t device_bytes;            /* Ascend: the one device allocation */
  int64_t device_events;           /* Ascend: events made on the device (several may share one) */
  int64_t captured;                /* Ascend: 1 when a run replays one captured model */
  int64_t reorders;                /* launches that copy a value into another memory format */
  int64_t bindings;                /* API 2: symbolic plans bound to a new set of sizes (no compile) */
  int64_t stages;                  /* API 2: launch lists a run goes through: 1, or one per stage of a graph
                                      cut before ops whose output sizes the data decides; the
                                      numbers above then add up every stage's */
  int64_t sized_ops;               /* API 2: those ops, run on the host between stages */
  int64_t collectives;             /* API 2: collectives, sends and receives one run makes */
  int64_t collective_bytes;        /* API 2: the bytes this rank gives them (each tensor once) */
  int64_t plans_loaded;            /* API 2: plans read from a compiled-model file (no compile) */
  int64_t cache_hits;              /* API 2: 1 when the compile cache had the model (loaded, not compiled) */
  int64_t cache_misses;            /* API 2: 1 when the model was compiled and stored in the cache */
  int64_t cache_replaced;          /* API 2: 1 when the entry stored replaced a damaged one */
  int64_t weights_packed;          /* API 2: constant weights packed into library primitives' layouts while lowering */
  int64_t weights_loaded;          /* API 2: such weights taken packed from a compiled-model file instead */
  int64_t device_kernels_cached;   /* API 2: of the generated kernels, those found built in the kernel cache */
  int64_t device_kernels_loaded;   /* API 2: and those taken from a compiled-model file (the rest were compiled) */
} esg_model_stats;
ESG_API esg_status esg_model_get_stats_(const esg_model* model, esg_model_stats* stats, size_t struct_size);
#define esg_model_get_stats(model, stats) esg_model_get_stats_((model), (stats), sizeof(*(stats)))

/* ---- the model's record of facts (API 2; docs/facts.md) ------------------------------------
   Everything the model knows of itself: where it came from, its plans (the one run last at the
   top level: launches, groups, streams, memory, the backend's kernels), its stages. Each entry
   is keyed and typed; a list's rows are records of their own, read the same way. A backend adds
   its own keys (the CPU's "onednn_convolutions", Ascend's "kernels" and "aclnn_calls"). */
typedef struct esg_facts esg_facts;
typedef enum esg_fact_kind {
  ESG_FACT_COUNT = 0, /* an amount of things */
  ESG_FACT_BYTES = 1, /* an amount of memory */
  ESG_FACT_LEVEL = 2, /* a figure that does not add up: streams, a limit, a flag (0 or 1) */
  ESG_FACT_TEXT = 3,  /* words: a name, a reason */
  ESG_FACT_LIST = 4   /* rows, each a record (esg_facts_row) */
} esg_fact_kind;
/* One entry. Fixed: a later addition comes as a function of its own. Its strings live as long
   as the snapshot they came from. */
typedef struct esg_fact {
  const char* key;    /* snake_case, unique within its record */
  int32_t kind;       /* an esg_fact_kind */
  int64_t number;     /* COUNT, BYTES, LEVEL; a LIST's row count */
  const char* text;   /* TEXT; "" otherwise */
} esg_fact;
/* A snapshot of the facts as they are now (later runs do not change it); free it with
   esg_facts_free. NULL on error (esg_last_error says why). */
ESG_API esg_facts* esg_model_facts(const esg_model* model);
/* Frees a snapshot and its rows; NULL is ignored. Rows are not freed on their own. */
ESG_API void esg_facts_free(esg_facts* facts);
/* The entries of a record, in the order they were added; -1 for NULL. */
ESG_API int64_t esg_facts_count(const esg_facts* facts);
/* Entry `index` (0 .. count-1) into `out`. */
ESG_API esg_status esg_facts_entry(const esg_facts* facts, int64_t index, esg_fact* out);
/* The entry named `key` into `out`; ESG_ERR_INVALID_ARGUMENT when the record has none. */
ESG_API esg_status esg_facts_find(const esg_facts* facts, const char* key, esg_fact* out);
/* Row `row` of the LIST entry `index`: a record living as long as the snapshot; NULL on error. */
ESG_API const esg_facts* esg_facts_row(const esg_facts* facts, int64_t index, int64_t row);

#ifdef __cplusplus
}
#endif

#include "esgraph/c/ops.h"

#endif /* ESGRAPH_C_ESGRAPH_H */
