// The compile cache: compiled-model files (model_file.hpp) in one directory, each named by a
// key of everything its compile was given: the source (a graph, or the bytes of the file it was
// imported from), the compile's choices, the backend, the target it compiles for and the
// library version. A hit loads the entry (no pass, no plan); a miss compiles and stores one.
//
// The directory is CompileOptions::cache_dir, else ESG_CACHE_DIR; neither: no cache. Entries
// are written to a temporary name and renamed, so a process never reads half of one, and
// processes that compile the same model at once each store a whole entry (the last stays). The
// directory is bounded (cache_max_bytes): storing an entry drops the least recently used ones
// beyond it; a hit marks its entry used. A damaged entry is reported in the model's report,
// compiled again and replaced.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "ir/graph.hpp"
#include "runtime/model.hpp"
#include "runtime/model_file.hpp"

namespace esg::runtime {

// The cache directory the options name: cache_dir, else ESG_CACHE_DIR, else "" (none).
std::string cache_dir(const CompileOptions& options);

// A source's part of a key: the XXH3 of a file's bytes (the model a graph was imported from), in
// hex; Io error when it cannot be read.
std::string source_key_of_file(const std::string& path);

// The model of `graph` compiled with `options`, through the cache when the options name one.
// `source_key` (source_key_of_file) keys it on the file the graph came from instead of on the
// graph itself.
std::unique_ptr<Model> compile_cached(std::unique_ptr<ir::Graph> graph, CompileOptions options, const FindBackend& find,
                                      const std::string& source_key = "");

// The cache's model for the file `path` compiled with `options` (its entry stored by a compile
// given that file's source_key), or nullptr: a caller looks here before importing the file.
std::unique_ptr<Model> find_cached(const std::string& path, const CompileOptions& options, const FindBackend& find);

}  // namespace esg::runtime
