// The compiled-model file (docs/model-format.md): a model compiled once, written with the graph
// it was compiled from, its compile options and target, every plan compiled so far
// (plan_record.hpp) and the constants they share, each 64-byte aligned; and read back without
// running a pass or planning anything. The header, the section table and every section are
// hashed (XXH3-64); constants are hashed one by one and checked at load unless the caller
// turns that off. A backend's programs are lowered again from each loaded plan, taking back the
// artifacts the file keeps of them (Program::artifacts: the CPU's packed weights, Ascend's
// kernel binaries).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/model.hpp"

namespace esg::runtime {

// The compile's own choices as a file holds them (the options section): what a load cannot
// change, and what the compile cache keys on (compile_cache.hpp).
std::vector<uint8_t> compile_choices_bytes(const CompileOptions& options);

// `model`'s file. Refused (ir::Error Unsupported, by name) for a model run in stages (ops whose
// output sizes the data decides).
std::vector<uint8_t> model_file_bytes(const Model& model);
// The same, written to `path` through a temporary file renamed into place: a reader never sees
// half a file.
void save_model(const Model& model, const std::string& path);

struct LoadOptions {
  // What a load may set: threads and the limits (max_loop_iterations, max_nodes, max_plans,
  // max_memory_bytes). The compile's own choices (backend, streams, fusion, memory reuse,
  // symbols, ranges, grow_memory, precision, backend options) are the file's: a caller that
  // sets one is refused (compile again to change it).
  CompileOptions run;
  bool verify_weights = true;  // hash every constant's bytes against the file's (about 30 ms per 330 MB)
  // When the file's target is not this machine's (a CPU feature its kernels need is missing):
  // compile again from the graph it carries instead of refusing.
  bool recompile = false;
};

// The backend a file names, by name (backends/registry.hpp's find), or nullptr.
using FindBackend = std::function<const Backend*(const std::string&)>;

// The model in `bytes`, every plan it holds restored. A damaged, truncated or hostile file fails
// with ir::Error Format (Limit for a file beyond this library's limits), naming what is wrong;
// one for another machine fails with Unsupported naming what it needs and what this one has.
std::unique_ptr<Model> load_model(const uint8_t* bytes, size_t size, const LoadOptions& options, const FindBackend& find);
// The same from a regular file, mapped read-only for the load.
std::unique_ptr<Model> load_model(const std::string& path, const LoadOptions& options, const FindBackend& find);

}  // namespace esg::runtime
