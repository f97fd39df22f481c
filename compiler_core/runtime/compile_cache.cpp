#include "runtime/compile_cache.hpp"

#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <vector>


#include "ir/error.hpp"
#include "ir/serialize.hpp"
#include "runtime/mapped_file.hpp"

namespace esg::runtime {

namespace fs = std::filesystem;
using ir::Error;
using ir::ErrorCode;

namespace {

std::string hex(XXH128_hash_t h) {
  char out[33];
  std::snprintf(out, sizeof out, "%016llx%016llx", static_cast<unsigned long long>(h.high64), static_cast<unsigned long long>(h.low64));
  return out;
}

// The source's part of a key for a graph: its record stream and each constant's hash (the
// constants hashed where they are: no copy of the weights).
std::string source_key_of_graph(const ir::Graph& g) {
  ir::BlobTable blobs;
  const ir::GraphRecords records = ir::serialize_records(g, blobs);
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  XXH3_128bits_update(state, records.bytes.data(), records.bytes.size());
  for (const ir::Bytes* b : blobs.blobs()) {
    const uint64_t h = XXH3_64bits(b->data(), b->size());
    XXH3_128bits_update(state, &h, sizeof h);
  }
  const XXH128_hash_t h = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  return "graph " + hex(h);
}

// The entry's name: the source's key and everything else the compile was given.
std::string entry_key(const std::string& source_key, const CompileOptions& options) {
  const std::vector<uint8_t> choices = compile_choices_bytes(options);
  const std::string text = std::string("esgraph ") + ESG_LIBRARY_VERSION + "\n" + source_key + "\nbackend " + options.backend->name() +
                           "\ntarget " + options.backend->target(options) + "\n";
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  XXH3_128bits_update(state, text.data(), text.size());
  XXH3_128bits_update(state, choices.data(), choices.size());
  const XXH128_hash_t h = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  return hex(h);
}

// The options a load takes from a compile's: its threads and limits.
LoadOptions load_options_of(const CompileOptions& options) {
  LoadOptions lo;
  lo.run.threads = options.threads;
  lo.run.max_loop_iterations = options.max_loop_iterations;
  lo.run.max_nodes = options.max_nodes;
  lo.run.max_plans = options.max_plans;
  lo.run.max_memory_bytes = options.max_memory_bytes;
  return lo;
}

// Drops the least recently used entries (by modification time, which a hit renews) until the
// directory's entries take at most `max_bytes`, and temporary files a process left behind an
// hour ago or more.
void bound(const fs::path& dir, int64_t max_bytes) {
  struct Entry {
    fs::path path;
    fs::file_time_type used;
    uintmax_t size;
  };
  std::vector<Entry> entries;
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  uintmax_t total = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const fs::file_time_type used = e.last_write_time(ec);
    if (ec) continue;
    if (name.find(".esgm.tmp.") != std::string::npos) {
      if (now - used > std::chrono::hours(1)) fs::remove(e.path(), ec);
      continue;
    }
    if (e.path().extension() != ".esgm") continue;
    const uintmax_t size = e.file_size(ec);
    if (ec) continue;
    entries.push_back({e.path(), used, size});
    total += size;
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.used < b.used; });
  for (const Entry& e : entries) {
    if (max_bytes <= 0 || total <= static_cast<uintmax_t>(max_bytes)) break;
    if (fs::remove(e.path, ec)) total -= e.size;
  }
}

struct Lookup {
  std::unique_ptr<Model> model;
  std::string damaged;  // why the entry there was refused, when it was
};

Lookup look_up(const fs::path& entry, const CompileOptions& options, const FindBackend& find) {
  std::error_code ec;
  if (!fs::is_regular_file(entry, ec)) return {};
  try {
    Lookup hit{load_model(entry.string(), load_options_of(options), find), ""};
    fs::last_write_time(entry, fs::file_time_type::clock::now(), ec);  // used now: the last to go
    return hit;
  } catch (const Error& e) {
    if (e.code() == ErrorCode::Io) return {};  // gone or unreadable since: a miss
    if (e.code() != ErrorCode::Format) throw;  // a limit: the caller's, as a compile's would be
    return {nullptr, e.what()};
  }
}

}  // namespace

std::string cache_dir(const CompileOptions& options) {
  if (!options.cache_dir.empty()) return options.cache_dir;
  const char* env = std::getenv("ESG_CACHE_DIR");
  return env ? env : "";
}

std::string source_key_of_file(const std::string& path) {
  const MappedFile f = map_file(path, "compile cache");
  return "file " + hex(XXH3_128bits(f.data, f.size));
}

std::unique_ptr<Model> compile_cached(std::unique_ptr<ir::Graph> graph, CompileOptions options, const FindBackend& find,
                                      const std::string& source_key) {
  const std::string dir = cache_dir(options);
  if (dir.empty() || !options.backend)
    return std::make_unique<Model>(std::move(graph), std::move(options));
  check_compile_options(options, *graph);
  const fs::path entry = fs::path(dir) / (entry_key(source_key.empty() ? source_key_of_graph(*graph) : source_key, options) + ".esgm");
  Lookup found = look_up(entry, options, find);
  if (found.model) {
    found.model->set_origin({1, 0, 0, "compile cache: hit, loaded " + entry.string()});
    return std::move(found.model);
  }
  const int64_t max_bytes = options.cache_max_bytes;
  auto model = std::make_unique<Model>(std::move(graph), std::move(options));
  std::error_code ec;
  fs::create_directories(dir, ec);
  std::string note = "compile cache: miss, compiled";
  try {
    if (model->staged()) {
      note += "; not stored: it runs in stages, which a compiled-model file does not hold";
    } else {
      save_model(*model, entry.string());
      bound(dir, max_bytes);
      note += " and stored " + entry.string();
    }
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Io && e.code() != ErrorCode::Unsupported) throw;
    note += "; not stored: " + std::string(e.what());  // the model is good; the cache could not keep it
  }
  if (!found.damaged.empty()) note += " (replacing a damaged entry: " + found.damaged + ")";
  model->set_origin({0, 1, found.damaged.empty() ? 0 : 1, note});
  return model;
}

std::unique_ptr<Model> find_cached(const std::string& path, const CompileOptions& options, const FindBackend& find) {
  const std::string dir = cache_dir(options);
  if (dir.empty() || !options.backend) return nullptr;
  const fs::path entry = fs::path(dir) / (entry_key(source_key_of_file(path), options) + ".esgm");
  Lookup found = look_up(entry, options, find);
  if (found.model) found.model->set_origin({1, 0, 0, "compile cache: hit, loaded " + entry.string() + " (for " + path + ")"});
  return std::move(found.model);
}

}  // namespace esg::runtime
