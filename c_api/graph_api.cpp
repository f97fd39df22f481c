// C entry points of finished graphs: inspection, text renderings, verification and files.
#include <cstdlib>
#include <cstring>

#include "c_api/handles.hpp"
#include "ir/printer.hpp"
#include "ir/serialize.hpp"
#include "ir/verify.hpp"

using esg::capi::guarded;
namespace ir = esg::ir;

namespace {

void need_graph(const esg_graph* g, const char* fn) {
  if (!g || !g->g) throw ir::Error(ir::ErrorCode::InvalidArgument, std::string(fn) + ": the graph is NULL");
}

char* copy_out(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (!p) throw std::bad_alloc();
  std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

}  // namespace

extern "C" {

ESG_API void esg_graph_destroy(esg_graph* graph) { delete graph; }
ESG_API void esg_free(void* memory) { std::free(memory); }

ESG_API size_t esg_graph_node_count(const esg_graph* graph) { return graph && graph->g ? graph->g->nodes.size() : 0; }

ESG_API char* esg_graph_to_text(const esg_graph* graph) {
  char* out = nullptr;
  guarded(nullptr, [&] {
    need_graph(graph, "esg_graph_to_text");
    out = copy_out(ir::to_text(*graph->g));
  });
  return out;
}

ESG_API char* esg_graph_to_dot(const esg_graph* graph) {
  char* out = nullptr;
  guarded(nullptr, [&] {
    need_graph(graph, "esg_graph_to_dot");
    out = copy_out(ir::to_dot(*graph->g));
  });
  return out;
}

ESG_API esg_status esg_graph_verify(const esg_graph* graph) {
  guarded(nullptr, [&] {
    need_graph(graph, "esg_graph_verify");
    ir::verify(*graph->g);
  });
  return esg_last_status();
}

ESG_API esg_status esg_graph_save(const esg_graph* graph, const char* path) {
  guarded(nullptr, [&] {
    need_graph(graph, "esg_graph_save");
    if (!path) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_graph_save: the path is NULL");
    ir::save(*graph->g, path);
  });
  return esg_last_status();
}

ESG_API esg_graph* esg_graph_load(const char* path) {
  esg_graph* g = nullptr;
  guarded(nullptr, [&] {
    if (!path) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_graph_load: the path is NULL");
    auto loaded = ir::load(path);
    ir::verify(*loaded);
    g = new esg_graph{std::move(loaded)};
  });
  return g;
}

ESG_API esg_status esg_graph_serialize(const esg_graph* graph, void** data, size_t* size) {
  guarded(nullptr, [&] {
    need_graph(graph, "esg_graph_serialize");
    if (!data || !size) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_graph_serialize: data or size is NULL");
    const std::vector<uint8_t> bytes = ir::serialize(*graph->g);
    void* p = std::malloc(bytes.empty() ? 1 : bytes.size());
    if (!p) throw std::bad_alloc();
    std::memcpy(p, bytes.data(), bytes.size());
    *data = p;
    *size = bytes.size();
  });
  return esg_last_status();
}

ESG_API esg_graph* esg_graph_deserialize(const void* data, size_t size) {
  esg_graph* g = nullptr;
  guarded(nullptr, [&] {
    auto loaded = ir::deserialize(data, size);
    ir::verify(*loaded);
    g = new esg_graph{std::move(loaded)};
  });
  return g;
}

}  // extern "C"
