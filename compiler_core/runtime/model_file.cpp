#include "runtime/model_file.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include <sys/mman.h>
#include <unistd.h>

#include "ir/byte_io.hpp"
#include "ir/serialize.hpp"
#include "runtime/file_replace.hpp"
#include "runtime/mapped_file.hpp"
#include "runtime/plan_record.hpp"

namespace esg::runtime {

namespace {

using ir::Error;
using ir::ErrorCode;

constexpr char kMagic[8] = {'E', 'S', 'G', 'M', 'O', 'D', 'E', 'L'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderSize = 64;
constexpr size_t kSectionEntry = 32;  // kind, reserved, offset, size, hash
constexpr size_t kAlign = 64;
constexpr const char* kFile = "compiled-model file";

enum Section : uint32_t { kTarget = 1, kOptions = 2, kBlobs = 3, kGraph = 4, kSymbolicPlan = 5, kExactPlan = 6 };

uint64_t hash(const uint8_t* p, size_t n) { return XXH3_64bits(p, n); }

[[noreturn]] void corrupt(const std::string& what) { throw Error(ErrorCode::Format, std::string(kFile) + " is corrupted: " + what); }

// The compile's own choices, as the file keeps them: everything a load cannot change. Each
// backend option is written with its value, declared defaults included (a default may depend on
// the machine: the CPU's channel block).
void write_options(ir::ByteWriter& w, const CompileOptions& o) {
  w.u32(static_cast<uint32_t>(o.streams));
  w.u8(o.fusion);
  w.u8(o.memory_reuse);
  w.u8(o.grow_memory);
  w.u8(static_cast<uint8_t>(o.precision));
  w.u32(static_cast<uint32_t>(o.symbols.size()));
  for (const auto& [name, size] : o.symbols) w.str(name), w.i64(size);
  w.u32(static_cast<uint32_t>(o.ranges.size()));
  for (const CompileOptions::Range& r : o.ranges) w.str(r.symbol), w.i64(r.min), w.i64(r.max);
  const std::vector<BackendOption> declared = o.backend->options();
  w.u32(static_cast<uint32_t>(declared.size()));
  for (const BackendOption& b : declared) w.str(b.name), w.i64(o.backend_options.get(b.name, declared));
}

void read_options(ir::ByteReader& r, CompileOptions& o) {
  o.streams = static_cast<int>(r.u32());
  o.fusion = r.u8() != 0;
  o.memory_reuse = r.u8() != 0;
  o.grow_memory = r.u8() != 0;
  const uint8_t precision = r.u8();
  if (precision > static_cast<uint8_t>(Precision::BF16)) r.bad("an unknown precision");
  o.precision = static_cast<Precision>(precision);
  for (uint32_t i = 0, n = r.count(12); i < n; ++i) {
    std::string name = r.str();
    o.symbols.emplace_back(std::move(name), r.i64());
  }
  for (uint32_t i = 0, n = r.count(20); i < n; ++i) {
    CompileOptions::Range range;
    range.symbol = r.str();
    range.min = r.i64();
    range.max = r.i64();
    o.ranges.push_back(std::move(range));
  }
  for (uint32_t i = 0, n = r.count(12); i < n; ++i) {
    std::string name = r.str();
    o.backend_options.set(std::move(name), r.i64());
  }
  if (!r.done()) r.bad("the options have bytes after their last field");
}

// What a load may not set: the caller's options against a default's.
void refuse_compile_choices(const CompileOptions& asked, const std::string& backend) {
  const CompileOptions d;
  std::string set;
  auto check = [&](bool differs, const char* name) {
    if (differs) set += std::string(set.empty() ? "" : ", ") + name;
  };
  check(asked.backend && backend != asked.backend->name(), "backend");
  check(asked.streams != d.streams, "streams");
  check(asked.fusion != d.fusion, "fusion");
  check(asked.memory_reuse != d.memory_reuse, "memory_reuse");
  check(asked.verify_each_pass, "verify_each_pass");
  check(!asked.symbols.empty(), "symbols");
  check(!asked.ranges.empty(), "ranges");
  check(asked.grow_memory, "grow_memory");
  check(asked.precision != d.precision, "precision");
  check(!asked.backend_options.values().empty(), "backend options");
  if (!set.empty())
    throw Error(ErrorCode::InvalidArgument, "load: " + set + " came from the compile and are the file's (backend '" + backend +
                                                "'); a load sets threads and limits only: compile again to change them");
}

struct SectionEntry {
  uint32_t kind;
  uint64_t offset, size, hash;
};

// The file's layout: sections, then the constants' bytes, each at a 64-byte boundary or as far
// past one as the constant belongs (ir::Bytes::line_offset: 16 for rows 4 KiB apart).
class FileWriter {
 public:
  void section(Section kind, std::vector<uint8_t> bytes) { sections_.push_back({kind, std::move(bytes)}); }
  std::vector<uint8_t> finish(const ir::BlobTable& blobs) {
    const auto& data = blobs.blobs();
    // The blob table is a section too: offset, size and hash of each constant.
    uint64_t at = kHeaderSize + kSectionEntry * (sections_.size() + 1);
    std::vector<uint64_t> offsets;
    auto place = [&](uint64_t size) {
      at = (at + kAlign - 1) / kAlign * kAlign;
      offsets.push_back(at);
      at += size;
    };
    for (const auto& s : sections_) place(s.second.size());
    place(8 + 24 * data.size());
    std::vector<uint64_t> blob_at;
    for (const auto* b : data) {
      at = (at + kAlign - 1) / kAlign * kAlign + b->line_offset();
      blob_at.push_back(at);
      at += b->size();
    }
    ir::ByteWriter table;
    table.u64(data.size());
    for (size_t i = 0; i < data.size(); ++i) table.u64(blob_at[i]), table.u64(data[i]->size()), table.u64(hash(data[i]->data(), data[i]->size()));
    sections_.push_back({kBlobs, std::move(table.buf)});

    ir::ByteWriter entries;
    for (size_t i = 0; i < sections_.size(); ++i) {
      const auto& [kind, bytes] = sections_[i];
      entries.u32(kind);
      entries.u32(0);
      entries.u64(offsets[i]);
      entries.u64(bytes.size());
      entries.u64(hash(bytes.data(), bytes.size()));
    }
    ir::ByteWriter out;
    out.raw(kMagic, 8);
    out.u32(kFormatVersion);
    out.u32(static_cast<uint32_t>(sections_.size()));
    out.u64(at);  // the file's size
    out.u64(hash(entries.buf.data(), entries.buf.size()));
    out.u64(hash(out.buf.data(), out.buf.size()));  // of the 32 bytes before
    out.buf.resize(kHeaderSize, 0);
    out.raw(entries.buf.data(), entries.buf.size());
    for (size_t i = 0; i < sections_.size(); ++i) {
      out.buf.resize(offsets[i], 0);
      out.raw(sections_[i].second.data(), sections_[i].second.size());
    }
    for (size_t i = 0; i < data.size(); ++i) {
      out.buf.resize(blob_at[i], 0);
      out.raw(data[i]->data(), data[i]->size());
    }
    return std::move(out.buf);
  }

 private:
  std::vector<std::pair<Section, std::vector<uint8_t>>> sections_;
};

}  // namespace

std::vector<uint8_t> compile_choices_bytes(const CompileOptions& options) {
  ir::ByteWriter w;
  write_options(w, options);
  return std::move(w.buf);
}

std::vector<uint8_t> model_file_bytes(const Model& model) {
  const CompileOptions& o = model.options();
  if (model.staged())
    throw Error(ErrorCode::Unsupported, "save: the model runs in stages (ops whose output sizes the data decides), which a compiled-model "
                                        "file does not hold yet; save its graph (Graph.save) and compile it where it runs");
  ir::BlobTable blobs;
  FileWriter file;
  ir::ByteWriter target;
  target.str(ESG_LIBRARY_VERSION);
  target.str(o.backend->name());
  target.str(o.backend->target(o));
  file.section(kTarget, std::move(target.buf));
  file.section(kOptions, compile_choices_bytes(o));
  file.section(kGraph, ir::serialize_records(model.graph(), blobs).bytes);
  const PlanCache::Saved plans = model.saved_plans();
  for (const auto& [key, plan] : plans.symbolic) {
    ir::ByteWriter w;
    w.u32(static_cast<uint32_t>(key.size()));
    for (int64_t k : key) w.i64(k);
    const std::vector<uint8_t> record = PlanRecord::write(*plan, blobs);
    w.raw(record.data(), record.size());
    file.section(kSymbolicPlan, std::move(w.buf));
  }
  for (const auto& [shapes, compiled] : plans.exact) {
    ir::ByteWriter w;
    w.u32(static_cast<uint32_t>(shapes.size()));
    for (const ir::Shape& s : shapes) {
      w.u8(static_cast<uint8_t>(s.rank()));
      for (ir::Dim d : s) w.i64(d);
    }
    // The backend's artifacts of the plan's program, their bytes among the constants.
    const Artifacts* artifacts = compiled->program->artifacts();
    w.u32(artifacts ? static_cast<uint32_t>(artifacts->all().size()) : 0);
    if (artifacts)
      for (const auto& [key, bytes] : artifacts->all()) w.str(key), w.u32(blobs.add(*bytes));
    const std::vector<uint8_t> record = PlanRecord::write(*compiled->plan, blobs);
    w.raw(record.data(), record.size());
    file.section(kExactPlan, std::move(w.buf));
  }
  return file.finish(blobs);
}

void save_model(const Model& model, const std::string& path) {
  const std::vector<uint8_t> bytes = model_file_bytes(model);
  try {
    replace_file(path, bytes.data(), bytes.size());
  } catch (const Error& e) {
    throw Error(e.code(), "save: " + std::string(e.what()));
  }
}

namespace {

// The sections of a file whose header and table check out, every range within the file and
// none overlapping another.
struct Sections {
  std::vector<SectionEntry> entries;
  const SectionEntry* only(Section kind, const char* name) const {
    const SectionEntry* found = nullptr;
    for (const SectionEntry& e : entries)
      if (e.kind == kind) {
        if (found) corrupt(std::string("two ") + name + " sections");
        found = &e;
      }
    if (!found) corrupt(std::string("no ") + name + " section");
    return found;
  }
};

// Whether a checksum is enforced: a fuzzing build reads past a wrong one, so that mutated files
// reach the parsers behind it.
bool enforce_checksums() {
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
  return false;
#else
  return true;
#endif
}

Sections read_sections(const uint8_t* data, size_t size) {
  if (size < kHeaderSize) throw Error(ErrorCode::Format, std::string(kFile) + " is truncated: " + std::to_string(size) + " bytes, shorter than the header");
  if (std::memcmp(data, kMagic, 8) != 0) throw Error(ErrorCode::Format, "not an esgraph compiled-model file (bad magic bytes)");
  ir::ByteReader h(data + 8, kHeaderSize - 8, kFile);
  const uint32_t version = h.u32();
  if (version == 0 || version > kFormatVersion)
    throw Error(ErrorCode::Format, std::string(kFile) + " format " + std::to_string(version) + " is newer than this library reads (up to " +
                                       std::to_string(kFormatVersion) + "); upgrade esgraph");
  const uint32_t count = h.u32();
  const uint64_t file_size = h.u64(), table_hash = h.u64(), header_hash = h.u64();
  if (enforce_checksums() && header_hash != hash(data, 32)) corrupt("the header's checksum does not match");
  for (size_t i = 40; i < kHeaderSize; ++i)
    if (data[i]) corrupt("the header's reserved bytes are not zero");
  if (file_size != size)
    throw Error(ErrorCode::Format, std::string(kFile) + " is truncated or extended: its header says " + std::to_string(file_size) +
                                       " bytes, the file has " + std::to_string(size));
  if (count > (size - kHeaderSize) / kSectionEntry) corrupt("the section table runs past the end of the file");
  if (enforce_checksums() && table_hash != hash(data + kHeaderSize, kSectionEntry * count)) corrupt("the section table's checksum does not match");
  Sections s;
  ir::ByteReader t(data + kHeaderSize, kSectionEntry * count, kFile);
  std::vector<std::pair<uint64_t, uint64_t>> ranges{{0, kHeaderSize + kSectionEntry * count}};
  for (uint32_t i = 0; i < count; ++i) {
    SectionEntry e;
    e.kind = t.u32();
    if (t.u32() != 0) corrupt("a section entry's reserved bytes are not zero");
    e.offset = t.u64();
    e.size = t.u64();
    e.hash = t.u64();
    if (e.kind < kTarget || e.kind > kExactPlan) corrupt("a section of unknown kind " + std::to_string(e.kind));
    if (e.offset > size || e.size > size - e.offset) corrupt("a section runs past the end of the file");
    if (enforce_checksums() && e.hash != hash(data + e.offset, e.size)) corrupt("a section's checksum does not match (kind " + std::to_string(e.kind) + ")");
    ranges.push_back({e.offset, e.size});
    s.entries.push_back(e);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].first + ranges[i - 1].second) corrupt("two sections overlap");
  return s;
}

// The constants: each within the file, clear of the sections and of each other, hashed unless
// the caller said not to; shared by every graph of the file, in place when `mapping` keeps the
// file's bytes alive, else copied once.
std::vector<ir::ConstBlob> read_blobs(const uint8_t* data, size_t size, const Sections& s, bool verify,
                                      const std::shared_ptr<const void>& mapping) {
  const SectionEntry* table = s.only(kBlobs, "constants");
  ir::ByteReader r(data + table->offset, table->size, kFile);
  const uint64_t count = r.u64();
  if (count > r.left() / 24) corrupt("the constants' table runs past its section");
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const SectionEntry& e : s.entries) ranges.push_back({e.offset, e.size});
  ranges.push_back({0, kHeaderSize + kSectionEntry * s.entries.size()});
  struct Entry {
    uint64_t offset, size, hash;
  };
  std::vector<Entry> entries;
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t off = r.u64(), n = r.u64(), h = r.u64();
    if (off > size || n > size - off) corrupt("a constant's bytes run past the end of the file");
    ranges.push_back({off, n});
    entries.push_back({off, n, h});
  }
  std::sort(ranges.begin(), ranges.end());
  // Against the furthest byte covered so far: a constant of no bytes between two ranges hides
  // nothing. The bytes between (alignment) are zero, so that no byte of a file goes unchecked.
  auto zeros = [&](uint64_t from, uint64_t to) {
    for (uint64_t i = from; i < to; ++i)
      if (data[i]) corrupt("byte " + std::to_string(i) + ", between sections and constants, is not zero");
  };
  uint64_t end = 0;
  for (const auto& [at, n] : ranges) {
    if (!n) continue;
    if (at < end) corrupt("a constant overlaps a section or another constant");
    zeros(end, at);
    end = at + n;
  }
  zeros(end, size);
  std::vector<ir::ConstBlob> blobs;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    if (verify && enforce_checksums() && e.hash != hash(data + e.offset, e.size))
      corrupt("constant " + std::to_string(i) + "'s bytes do not match their checksum");
    const uint8_t* at = data + e.offset;
    blobs.push_back({at, e.size, mapping ? std::make_shared<const ir::Bytes>(at, e.size, mapping, e.offset % kAlign)
                                         : ir::copy_to_blob(at, e.size, e.offset % kAlign)});
  }
  return blobs;
}

std::vector<ir::Shape> read_shapes(ir::ByteReader& r) {
  std::vector<ir::Shape> shapes;
  for (uint32_t i = 0, n = r.count(1); i < n; ++i) {
    const uint8_t rank = r.u8();
    if (rank > ir::kMaxRank) r.bad("a plan's key has a shape of rank " + std::to_string(rank));
    ir::Shape s;
    for (uint8_t d = 0; d < rank; ++d) s.push_back(r.i64());
    shapes.push_back(s);
  }
  return shapes;
}

// A plan runs on the caller's buffers, which a run checks against the model's graph, and the
// plan's kernels read and write them as its own graph's types: its inputs and outputs must be the
// model's, in number, dtype and rank, and in every size the model's graph fixes.
void check_signature(const ir::Graph& model, const Plan& plan) {
  const ir::Graph& g = plan.graph();
  auto same = [&](const std::vector<ir::ValueId>& ours, const std::vector<ir::ValueId>& its) {
    if (ours.size() != its.size()) return false;
    for (size_t i = 0; i < ours.size(); ++i) {
      const ir::Shape &a = model.shape(ours[i]), &b = g.shape(its[i]);
      if (model.values[ours[i]].dtype != g.values[its[i]].dtype || a.rank() != b.rank()) return false;
      for (size_t d = 0; d < a.rank(); ++d)
        if (!ir::dim_is_symbolic(a[d]) && a[d] != b[d]) return false;
    }
    return true;
  };
  if (!same(model.inputs(), g.inputs())) corrupt("a plan whose inputs are not its model's");
  if (!same(model.outputs(), g.outputs())) corrupt("a plan whose outputs are not its model's");
}

std::unique_ptr<Model> load(const uint8_t* data, size_t size, const LoadOptions& options, const FindBackend& find,
                            const std::shared_ptr<const void>& mapping) {
  const Sections s = read_sections(data, size);
  const SectionEntry* t = s.only(kTarget, "target");
  ir::ByteReader target(data + t->offset, t->size, kFile);
  const std::string version = target.str(), backend_name = target.str(), machine = target.str();
  CompileOptions o = options.run;
  refuse_compile_choices(o, backend_name);
  o.backend = find(backend_name);
  if (!o.backend)
    throw Error(ErrorCode::Unsupported, "load: the model was compiled for backend '" + backend_name + "', which this esgraph (" +
                                            ESG_LIBRARY_VERSION + ") lacks");
  const SectionEntry* opt = s.only(kOptions, "options");
  ir::ByteReader options_reader(data + opt->offset, opt->size, kFile);
  read_options(options_reader, o);
  const std::vector<ir::ConstBlob> blobs = read_blobs(data, size, s, options.verify_weights, mapping);
  // Hashing touched every page; a model uses only some of them (its packed weights, not the
  // originals they were packed from): the rest need not stay resident in this process.
  if (mapping && options.verify_weights) ::madvise(const_cast<uint8_t*>(data), size, MADV_DONTNEED);
  const SectionEntry* g = s.only(kGraph, "graph");
  std::unique_ptr<ir::Graph> graph;
  try {
    graph = ir::deserialize_records(data + g->offset, g->size, blobs).graph;
  } catch (const Error& e) {
    throw Error(e.code(), std::string(kFile) + ", its graph: " + e.what());
  }
  const std::string mismatch = o.backend->cannot_run_target(machine);
  if (!mismatch.empty()) {
    if (options.recompile) return std::make_unique<Model>(std::move(graph), std::move(o));
    throw Error(ErrorCode::Unsupported, "load: " + mismatch + " (esgraph " + version +
                                            " wrote it); load with recompile to compile it again here from the graph it carries");
  }
  check_compile_options(o, *graph);  // before any plan is lowered with them
  PlanCache::Saved plans;
  for (const SectionEntry& e : s.entries) {
    if (e.kind != kSymbolicPlan && e.kind != kExactPlan) continue;
    ir::ByteReader r(data + e.offset, e.size, kFile);
    std::vector<int64_t> key;
    std::vector<ir::Shape> shapes;
    Artifacts artifacts;
    if (e.kind == kSymbolicPlan) {
      for (uint32_t i = 0, n = r.count(8); i < n; ++i) key.push_back(r.i64());
    } else {
      shapes = read_shapes(r);
      for (uint32_t i = 0, n = r.count(8); i < n; ++i) {
        std::string name = r.str();
        const uint32_t blob = r.u32();
        if (blob >= blobs.size()) corrupt("a plan's artifact names a missing constant");
        artifacts.add(name, blobs[blob].shared);
      }
    }
    const size_t at = e.size - r.left();
    std::unique_ptr<Plan> plan;
    try {
      plan = PlanRecord::read(data + e.offset + at, r.left(), blobs, o);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::Format || e.code() == ErrorCode::Limit) throw;
      throw Error(ErrorCode::Format, std::string(kFile) + " holds a plan its graph refuses: " + e.what());
    }
    check_signature(*graph, *plan);
    if (e.kind == kSymbolicPlan) {
      if (!plan->symbolic()) corrupt("a symbolic plan without symbolic sizes");
      plans.symbolic.push_back({std::move(key), std::move(plan)});
      continue;
    }
    if (plan->symbolic() || shapes.size() != plan->graph().inputs().size()) corrupt("a plan for other shapes than its graph's");
    for (size_t i = 0; i < shapes.size(); ++i)
      if (shapes[i] != plan->graph().shape(plan->graph().inputs()[i])) corrupt("a plan for other shapes than its graph's");
    check_memory(*plan, o.max_memory_bytes);  // before the backend allocates anything for it
    auto compiled = std::make_shared<CompiledPlan>();
    compiled->plan = std::move(plan);
    compiled->program = o.backend->lower(*compiled->plan, o, nullptr, &artifacts);
    plans.exact.push_back({std::move(shapes), std::move(compiled)});
  }
  return std::make_unique<Model>(std::move(graph), std::move(o), plans);
}

}  // namespace

std::unique_ptr<Model> load_model(const uint8_t* data, size_t size, const LoadOptions& options, const FindBackend& find) {
  if (!data && size) throw Error(ErrorCode::InvalidArgument, "load: data is NULL");
  return load(data, size, options, find, nullptr);
}

std::unique_ptr<Model> load_model(const std::string& path, const LoadOptions& options, const FindBackend& find) {
  // The constants use the mapping in place: it lives as long as one of them does.
  const MappedFile f = map_file(path, "load");
  try {
    return load(f.data, f.size, options, find, f.owner);
  } catch (const Error& e) {
    throw Error(e.code(), std::string(e.what()) + " (`" + path + "`)");
  }
}

}  // namespace esg::runtime
