// The graph file format (docs/graph-format.md).
//
// A file is a header, a record stream and a blob area. The record stream replays the graph's
// construction through the Builder (inputs, constants, bodies, nodes by op name with attributes
// by name), so loading re-runs every check that building did: a file cannot describe a graph the
// builder would refuse. Constants' bytes sit in the blob area, each 64-byte aligned, so they can
// be used in place. Everything read is bounds-checked; a CRC-32 guards against corruption.
#include "ir/serialize.hpp"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <unordered_map>

#include <sys/stat.h>

#include "ir/builder.hpp"
#include "ir/byte_io.hpp"
#include "ir/error.hpp"

namespace esg::ir {
namespace {

constexpr char kMagic[8] = {'E', 'S', 'G', 'R', 'A', 'P', 'H', '\0'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderSize = 48;  // magic, version, crc, records offset/size, blobs offset/count
constexpr size_t kBlobAlign = 64;

enum Record : uint8_t { kInput = 1, kConstant = 2, kBegin = 3, kEnd = 4, kNode = 5, kOutputs = 6 };

using Writer = ByteWriter;
struct Reader : ByteReader {
  Reader(const uint8_t* p, size_t n) : ByteReader(p, n, "graph file") {}
};
[[noreturn]] void corrupt(const std::string& what) { throw Error(ErrorCode::Format, "graph file is corrupted: " + what); }

void write_shape(Writer& w, DType t, const Shape& s) {
  w.u8(static_cast<uint8_t>(t));
  w.u8(static_cast<uint8_t>(s.rank()));
  for (Dim d : s) w.i64(d);
}

Builder::ParamType read_type(Reader& r, size_t num_symbols) {
  Builder::ParamType t;
  t.dtype = static_cast<DType>(r.u8());
  if (!dtype_valid(t.dtype)) corrupt("unknown dtype code " + std::to_string(static_cast<int>(t.dtype)));
  const uint8_t rank = r.u8();
  if (rank > kMaxRank) corrupt("rank " + std::to_string(rank) + " exceeds " + std::to_string(kMaxRank));
  for (uint8_t i = 0; i < rank; ++i) {
    const Dim d = r.i64();
    if (dim_is_symbolic(d) && dim_symbol(d) >= num_symbols) corrupt("a dimension names an unknown symbol");
    t.shape.push_back(d);
  }
  return t;
}

class GraphWriter {
 public:
  GraphWriter(const Graph& g, BlobTable& blobs) : g_(g), ids_(g.values.size(), kNone), blobs_(blobs) {}

  GraphRecords run() {
    Writer& w = rec_;
    w.str(g_.name);
    w.u32(static_cast<uint32_t>(g_.symbols.size()));
    for (const std::string& s : g_.symbols) w.str(s);
    for (ValueId v : g_.inputs()) {
      w.u8(kInput);
      w.str(g_.values[v].name ? g_.strings[g_.values[v].name] : "");
      write_shape(w, g_.values[v].dtype, g_.shape(v));
      assign(v);
    }
    region(0);
    w.u8(kOutputs);
    w.u32(static_cast<uint32_t>(g_.outputs().size()));
    for (ValueId v : g_.outputs()) w.u32(id(v));
    GraphRecords made;
    made.bytes = std::move(rec_.buf);
    made.value_index = ids_;
    made.node_index.assign(g_.nodes.size(), kNone);
    for (const auto& [node, index] : node_ids_) made.node_index[node] = index;
    return made;
  }

 private:
  void assign(ValueId v) { ids_[v] = next_++; }

  // File ids name values as the loader recreates them; a body's capture stands for the outer
  // value it captured, which the loader's builder captures again.
  uint32_t id(ValueId v) const {
    while (ids_[v] == kNone) {
      const Region& r = g_.regions[g_.values[v].region];
      size_t i = 0;
      while (i < r.captures_inner.size() && r.captures_inner[i] != v) ++i;
      if (i == r.captures_inner.size()) throw Error(ErrorCode::Internal, "serialize: value without an id");
      v = r.captures_outer[i];
    }
    return ids_[v];
  }

  void region(RegionId r) {
    for (NodeId n : g_.regions[r].nodes) node(n);
  }

  void node(NodeId nid) {
    Writer& w = rec_;
    const Node& n = g_.nodes[nid];
    std::vector<uint32_t> bodies;
    for (RegionId b : g_.bodies(n)) {
      const Region& body = g_.regions[b];
      w.u8(kBegin);
      w.u32(static_cast<uint32_t>(body.params.size()));
      for (ValueId p : body.params) {
        write_shape(w, g_.values[p].dtype, g_.shape(p));
        assign(p);
      }
      region(b);
      w.u8(kEnd);
      w.u32(static_cast<uint32_t>(body.results.size()));
      for (ValueId v : body.results) w.u32(id(v));
      bodies.push_back(next_region_++);
    }
    if (n.blob != kNone) {
      w.u8(kConstant);
      write_shape(w, g_.values[n.first_output].dtype, g_.shape(n.first_output));
      w.u32(blobs_.add(*g_.blobs[n.blob]));
    } else {
      w.u8(kNode);
      w.str(n.op->name);
      const uint32_t declared = n.num_inputs - n.num_captures;
      w.u32(declared);
      for (uint32_t i = 0; i < declared; ++i) {
        const ValueId v = g_.operands[n.first_input + i];
        w.u32(v == kNone ? kNone : id(v));
      }
      const Span<AttrValue> attrs = g_.node_attrs(n);
      w.u32(static_cast<uint32_t>(attrs.size()));
      for (size_t i = 0; i < attrs.size(); ++i) {
        const AttrValue& a = attrs[i];
        w.str(n.op->attrs[i].name);
        w.u8(static_cast<uint8_t>(a.kind));
        switch (a.kind) {
          case AttrKind::Float: w.f64(a.f); break;
          case AttrKind::String: w.str(g_.string_of(a)); break;
          case AttrKind::IntList:
            w.u32(a.size);
            for (int64_t v : g_.ints_of(a)) w.i64(v);
            break;
          case AttrKind::FloatList:
            w.u32(a.size);
            for (double v : g_.floats_of(a)) w.f64(v);
            break;
          default: w.i64(a.i);
        }
      }
      w.u32(static_cast<uint32_t>(bodies.size()));
      for (uint32_t b : bodies) w.u32(b);
    }
    // Naming, scope, annotations and control dependencies of the node. A node the loader will
    // number differently (its bodies were made in another order than the node lists them, or
    // made apart from it) keeps its derived name, so that names survive a save and load.
    w.str(n.name ? g_.strings[n.name] : next_node_ != nid ? std::string(n.op->name) + "_" + std::to_string(nid) : std::string());
    w.str(n.scope ? g_.strings[n.scope] : "");
    w.u32(n.num_notes);
    for (uint32_t i = 0; i < 2 * n.num_notes; ++i) w.str(g_.strings[g_.notes[n.first_note + i]]);
    w.u32(n.num_deps);
    for (NodeId d : g_.deps(n)) w.u32(node_ids_.at(d));
    w.u32(n.num_outputs);
    for (uint32_t i = 0; i < n.num_outputs; ++i) {
      const Value& v = g_.values[n.first_output + i];
      w.str(v.name ? g_.strings[v.name] : "");
      assign(n.first_output + i);
    }
    node_ids_.emplace(nid, next_node_++);
  }

  const Graph& g_;
  Writer rec_;
  std::vector<uint32_t> ids_;
  uint32_t next_ = 0, next_region_ = 0, next_node_ = 0;
  BlobTable& blobs_;
  std::unordered_map<NodeId, uint32_t> node_ids_;
};

// A graph file: the header, the record stream, then the blob table and the blobs, each at a
// 64-byte boundary of the file.
std::vector<uint8_t> graph_file(const std::vector<uint8_t>& records, const BlobTable& table) {
  const std::vector<const Bytes*>& blobs = table.blobs();
  Writer out;
  out.raw(kMagic, 8);
  out.u32(kFormatVersion);
  out.u32(0);  // CRC-32 of everything after the header, patched below
  const uint64_t records_offset = kHeaderSize;
  uint64_t blobs_offset = records_offset + records.size();
  blobs_offset = (blobs_offset + kBlobAlign - 1) / kBlobAlign * kBlobAlign;
  out.u64(records_offset);
  out.u64(records.size());
  out.u64(blobs_offset);
  out.u64(blobs.size());
  out.buf.resize(kHeaderSize, 0);
  out.raw(records.data(), records.size());
  out.buf.resize(blobs_offset, 0);
  // Blob table (offset, size) then the data.
  uint64_t at = blobs_offset + 16 * blobs.size();
  std::vector<uint64_t> offsets;
  for (const auto* b : blobs) {
    at = (at + kBlobAlign - 1) / kBlobAlign * kBlobAlign;
    offsets.push_back(at);
    at += b->size();
  }
  for (size_t i = 0; i < blobs.size(); ++i) {
    out.u64(offsets[i]);
    out.u64(blobs[i]->size());
  }
  for (size_t i = 0; i < blobs.size(); ++i) {
    out.buf.resize(offsets[i], 0);
    out.raw(blobs[i]->data(), blobs[i]->size());
  }
  const uint32_t crc = static_cast<uint32_t>(crc32(0, out.buf.data() + kHeaderSize, static_cast<uInt>(out.buf.size() - kHeaderSize)));
  std::memcpy(out.buf.data() + 12, &crc, 4);
  return std::move(out.buf);
}

// The blobs of a graph file (its header checked), with the record stream's place.
struct GraphFile {
  std::vector<ConstBlob> blobs;
  const uint8_t* records;
  size_t records_size;
};

GraphFile open_graph_file(const uint8_t* data, size_t size) {
  if (size < kHeaderSize) throw Error(ErrorCode::Format, "graph file is truncated: " + std::to_string(size) + " bytes, shorter than the header");
  if (std::memcmp(data, kMagic, 8) != 0) throw Error(ErrorCode::Format, "not an esgraph graph file (bad magic bytes)");
  Reader h(data + 8, kHeaderSize - 8);
  const uint32_t version = h.u32();
  if (version == 0 || version > kFormatVersion)
    throw Error(ErrorCode::Format, "graph file format " + std::to_string(version) + " is newer than this library reads (up to " +
                                       std::to_string(kFormatVersion) + "); upgrade esgraph");
  const uint32_t crc = h.u32();
  const uint64_t rec_off = h.u64(), rec_size = h.u64(), blob_off = h.u64(), blob_count = h.u64();
  if (rec_off != kHeaderSize || rec_size > size - rec_off || blob_off < rec_off + rec_size || blob_off > size ||
      blob_count > (size - blob_off) / 16)
    throw Error(ErrorCode::Format, "graph file is truncated or its header is corrupted (sections run past the " +
                                       std::to_string(size) + "-byte file)");
  const uint32_t actual = static_cast<uint32_t>(crc32(0, data + kHeaderSize, static_cast<uInt>(size - kHeaderSize)));
  // A fuzzing build reads past a wrong checksum, so that mutated files reach the records.
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
  if (actual != crc) throw Error(ErrorCode::Format, "graph file is corrupted (checksum mismatch)");
#else
  (void)actual;
  (void)crc;
#endif
  GraphFile f{{}, data + rec_off, static_cast<size_t>(rec_size)};
  Reader blobs(data + blob_off, 16 * blob_count);
  for (uint64_t i = 0; i < blob_count; ++i) {
    const uint64_t off = blobs.u64(), n = blobs.u64();
    if (off > size || n > size - off) corrupt("a constant's bytes run past the end of the file");
    f.blobs.push_back({data + off, n, nullptr});
  }
  return f;
}

class GraphReader {
 public:
  explicit GraphReader(const std::vector<ConstBlob>& blobs) : blobs_(blobs) {}

  LoadedGraph run(const uint8_t* records_data, size_t records_size) {
    Reader r(records_data, records_size);
    try {
      LoadedGraph made;
      made.graph = records(r);
      made.values = std::move(ids_);
      made.nodes = std::move(nodes_);
      return made;
    } catch (const Error& e) {
      if (e.code() == ErrorCode::Format) throw;
      // A limit stays one: the file may be sound, only beyond what this library takes.
      if (e.code() == ErrorCode::Limit) throw Error(ErrorCode::Limit, std::string("graph file: ") + e.what());
      throw Error(ErrorCode::Format, std::string("graph file is invalid: ") + e.what());
    }
  }

 private:
  ValueId value(uint32_t id) const {
    if (id >= ids_.size()) corrupt("a reference to value " + std::to_string(id) + ", which is not defined yet");
    return ids_[id];
  }

  std::unique_ptr<Graph> records(Reader& r) {
    Builder b(r.str());
    Graph& g = b.graph();
    const uint32_t nsym = r.count(4);
    for (uint32_t i = 0; i < nsym; ++i) g.symbol(r.str());
    std::vector<RegionId> regions;
    std::vector<NodeId>& nodes = nodes_;
    int depth = 0;
    while (true) {
      const uint8_t kind = r.u8();
      if (kind == kOutputs) {
        if (depth != 0) corrupt("a body is not closed");
        break;
      }
      if (kind == 0 || kind > kOutputs) corrupt("unknown record kind " + std::to_string(kind));
      if (kind == kInput) {
        const std::string name = r.str();
        const Builder::ParamType t = read_type(r, g.symbols.size());
        ids_.push_back(b.add_input(name, t.dtype, t.shape));
        continue;
      }
      if (kind == kBegin) {
        const uint32_t n = r.count(2);
        std::vector<Builder::ParamType> params;
        for (uint32_t i = 0; i < n; ++i) params.push_back(read_type(r, g.symbols.size()));
        b.begin_region(params);
        ++depth;
        for (ValueId p : b.region_params()) ids_.push_back(p);
        continue;
      }
      if (kind == kEnd) {
        if (depth == 0) corrupt("a body ends that was not begun");
        const uint32_t n = r.count(4);
        std::vector<ValueId> results;
        for (uint32_t i = 0; i < n; ++i) results.push_back(value(r.u32()));
        regions.push_back(b.end_region(results));
        --depth;
        continue;
      }
      NodeId id;
      if (kind == kConstant) {
        const Builder::ParamType t = read_type(r, g.symbols.size());
        const uint32_t blob = r.u32();
        if (blob >= blobs_.size()) corrupt("a constant names a missing blob");
        const ConstBlob& bytes = blobs_[blob];
        const ValueId v = bytes.shared ? b.add_constant(t.dtype, t.shape, bytes.shared) : b.add_constant(t.dtype, t.shape, bytes.data, bytes.size);
        id = g.values[v].producer;
      } else {
        id = node(r, b, regions);
      }
      const Node& n = g.nodes[id];
      // Naming and scheduling details.
      const std::string name = r.str(), scope = r.str();
      g.nodes[id].name = name.empty() ? 0 : g.intern(name);
      g.nodes[id].scope = scope.empty() ? 0 : g.intern(scope);
      const uint32_t nnotes = r.count(8);
      g.nodes[id].first_note = static_cast<uint32_t>(g.notes.size());
      g.nodes[id].num_notes = nnotes;
      for (uint32_t i = 0; i < 2 * nnotes; ++i) g.notes.push_back(g.intern(r.str()));
      const uint32_t ndeps = r.count(4);
      g.nodes[id].first_dep = static_cast<uint32_t>(g.dep_refs.size());
      g.nodes[id].num_deps = ndeps;
      for (uint32_t i = 0; i < ndeps; ++i) {
        const uint32_t d = r.u32();
        if (d >= nodes.size() || g.nodes[nodes[d]].region != n.region) corrupt("a control dependency on an unknown node");
        g.dep_refs.push_back(nodes[d]);
      }
      if (r.u32() != n.num_outputs) corrupt("a node's output count differs from what its op produces");
      for (uint32_t i = 0; i < n.num_outputs; ++i) {
        const std::string vname = r.str();
        g.values[n.first_output + i].name = vname.empty() ? 0 : g.intern(vname);
        ids_.push_back(n.first_output + i);
      }
      nodes.push_back(id);
    }
    const uint32_t nout = r.count(4);
    std::vector<ValueId> outputs;
    for (uint32_t i = 0; i < nout; ++i) outputs.push_back(value(r.u32()));
    if (!r.done()) corrupt("unexpected bytes after the outputs");
    return b.finish(outputs);
  }

  NodeId node(Reader& r, Builder& b, const std::vector<RegionId>& regions) {
    const std::string op_name = r.str();
    const OpSchema* op = find_op(op_name);
    if (!op || op == &constant_op())
      throw Error(ErrorCode::Format, "graph file uses op `" + op_name + "`, which this version of esgraph does not know");
    const uint32_t nin = r.count(4);
    std::vector<ValueId> inputs;
    for (uint32_t i = 0; i < nin; ++i) {
      const uint32_t id = r.u32();
      inputs.push_back(id == kNone ? kNone : value(id));
    }
    // Attributes by name; ones the file lacks (added to the op later) take their defaults.
    std::vector<AttrArg> attrs(op->attrs.size());
    std::vector<std::vector<int64_t>> int_lists;
    std::vector<std::vector<double>> float_lists;
    std::vector<std::string> strings;
    const uint32_t nattr = r.count(6);
    int_lists.reserve(nattr);
    float_lists.reserve(nattr);
    strings.reserve(nattr);
    for (uint32_t i = 0; i < nattr; ++i) {
      const std::string name = r.str();
      const int idx = op->attr_index(name);
      if (idx < 0) throw Error(ErrorCode::Format, "graph file sets attribute `" + name + "` of `" + op_name + "`, which this version does not know");
      AttrArg& a = attrs[static_cast<size_t>(idx)];
      a.present = true;
      a.kind = static_cast<AttrKind>(r.u8());
      switch (a.kind) {
        case AttrKind::Float: a.f = r.f64(); break;
        case AttrKind::String: strings.push_back(r.str()); a.s = strings.back().c_str(); break;
        case AttrKind::IntList: {
          const uint32_t n = r.count(8);
          int_lists.emplace_back();
          for (uint32_t k = 0; k < n; ++k) int_lists.back().push_back(r.i64());
          a.ints = int_lists.back().data();
          a.size = n;
          break;
        }
        case AttrKind::FloatList: {
          const uint32_t n = r.count(8);
          float_lists.emplace_back();
          for (uint32_t k = 0; k < n; ++k) float_lists.back().push_back(r.f64());
          a.floats = float_lists.back().data();
          a.size = n;
          break;
        }
        case AttrKind::Int: case AttrKind::Bool: case AttrKind::DType: case AttrKind::Enum: a.i = r.i64(); break;
        default: corrupt("attribute `" + name + "` has unknown kind " + std::to_string(static_cast<int>(a.kind)));
      }
    }
    const uint32_t nbodies = r.count(4);
    std::vector<RegionId> bodies;
    for (uint32_t i = 0; i < nbodies; ++i) {
      const uint32_t k = r.u32();
      if (k >= regions.size()) corrupt("a node names a body that was not defined");
      bodies.push_back(regions[k]);
    }
    return b.add_op(*op, inputs, attrs, bodies);
  }

  const std::vector<ConstBlob>& blobs_;
  std::vector<ValueId> ids_;
  std::vector<NodeId> nodes_;
};

}  // namespace

uint32_t BlobTable::add(const Bytes& bytes) {
  const auto [at, added] = index_.emplace(&bytes, static_cast<uint32_t>(blobs_.size()));
  if (added) blobs_.push_back(&bytes);
  return at->second;
}

GraphRecords serialize_records(const Graph& g, BlobTable& blobs) { return GraphWriter(g, blobs).run(); }

LoadedGraph deserialize_records(const uint8_t* data, size_t size, const std::vector<ConstBlob>& blobs) {
  return GraphReader(blobs).run(data, size);
}

std::vector<uint8_t> serialize(const Graph& g) {
  BlobTable blobs;
  const GraphRecords records = serialize_records(g, blobs);
  return graph_file(records.bytes, blobs);
}

std::unique_ptr<Graph> deserialize(const void* data, size_t size) {
  if (!data && size) throw Error(ErrorCode::InvalidArgument, "deserialize: data is NULL");
  const GraphFile f = open_graph_file(static_cast<const uint8_t*>(data), size);
  return deserialize_records(f.records, f.records_size, f.blobs).graph;
}

void save(const Graph& g, const std::string& path) {
  const std::vector<uint8_t> bytes = serialize(g);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw Error(ErrorCode::Io, "cannot open `" + path + "` for writing: " + std::strerror(errno));
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f.flush()) throw Error(ErrorCode::Io, "cannot write `" + path + "`: " + std::strerror(errno));
}

std::unique_ptr<Graph> load(const std::string& path) {
  // A regular file only, read in one allocation of its size: a device or a pipe has no size to
  // bound what the loader allocates (/dev/zero would never end), and opening a pipe with no
  // writer would wait. Bytes from elsewhere go through deserialize.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw Error(ErrorCode::Io, "`" + path + "` is not a regular file; read its bytes and deserialize them instead");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw Error(ErrorCode::Io, "cannot open `" + path + "`: " + std::strerror(errno));
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {  // replaced since the check above
    std::fclose(f);
    throw Error(ErrorCode::Io, "`" + path + "` is not a regular file; read its bytes and deserialize them instead");
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  const size_t n = bytes.empty() ? 0 : std::fread(bytes.data(), 1, bytes.size(), f);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) throw Error(ErrorCode::Io, "cannot read `" + path + "`: " + std::strerror(err));
  bytes.resize(n);  // a file that shrank while read is judged on what was there
  return deserialize(bytes.data(), bytes.size());
}

}  // namespace esg::ir
