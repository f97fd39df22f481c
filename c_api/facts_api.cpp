#include <memory>
#include <string>
#include <vector>

#include "c_api/facts_handle.hpp"
#include "c_api/handles.hpp"

namespace ir = esg::ir;
using esg::capi::guarded;
using esg::runtime::Fact;
using esg::runtime::FactKind;
using esg::runtime::Facts;

// A record and a handle for every row of its lists, made with the snapshot so that readers on
// several threads find them all there. The root alone owns the facts.
struct esg_facts {
  std::shared_ptr<const Facts> owned;  // the root's
  const Facts* record = nullptr;
  std::vector<std::vector<std::unique_ptr<esg_facts>>> rows;  // per entry: its rows' handles
};

namespace {

void index_rows(esg_facts& h) {
  for (const Fact& f : h.record->entries()) {
    std::vector<std::unique_ptr<esg_facts>>& rows = h.rows.emplace_back();
    for (const Facts& r : f.rows) {
      rows.push_back(std::make_unique<esg_facts>());
      rows.back()->record = &r;
      index_rows(*rows.back());
    }
  }
}

void need(const esg_facts* facts, const char* fn) {
  if (!facts) throw ir::Error(ir::ErrorCode::InvalidArgument, std::string(fn) + ": the facts are NULL");
}

// Entry `index` of `facts`, or an error of `fn` saying why there is none.
const Fact& entry_at(const esg_facts* facts, int64_t index, const char* fn) {
  need(facts, fn);
  const auto& entries = facts->record->entries();
  if (index < 0 || index >= static_cast<int64_t>(entries.size()))
    throw ir::Error(ir::ErrorCode::InvalidArgument, std::string(fn) + ": index " + std::to_string(index) + " is not below the record's " +
                                                        std::to_string(entries.size()) + " entries");
  return entries[static_cast<size_t>(index)];
}

void fill(const Fact& f, esg_fact* out, const char* fn) {
  if (!out) throw ir::Error(ir::ErrorCode::InvalidArgument, std::string(fn) + ": out is NULL");
  out->key = f.key.c_str();
  out->kind = static_cast<int32_t>(f.kind);
  out->number = f.kind == FactKind::List ? static_cast<int64_t>(f.rows.size()) : f.number;
  out->text = f.text.c_str();
}

}  // namespace

esg_facts* esg::capi::make_facts(Facts facts) {
  auto h = std::make_unique<esg_facts>();
  h->owned = std::make_shared<const Facts>(std::move(facts));
  h->record = h->owned.get();
  index_rows(*h);
  return h.release();
}

extern "C" {

ESG_API void esg_facts_free(esg_facts* facts) {
  if (facts && facts->owned) delete facts;  // a row lives and goes with its snapshot
}

ESG_API int64_t esg_facts_count(const esg_facts* facts) {
  return facts ? static_cast<int64_t>(facts->record->entries().size()) : -1;
}

ESG_API esg_status esg_facts_entry(const esg_facts* facts, int64_t index, esg_fact* out) {
  guarded(nullptr, [&] {
    fill(entry_at(facts, index, "esg_facts_entry"), out, "esg_facts_entry");
  });
  return esg_last_status();
}

ESG_API esg_status esg_facts_find(const esg_facts* facts, const char* key, esg_fact* out) {
  guarded(nullptr, [&] {
    need(facts, "esg_facts_find");
    if (!key) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_facts_find: key is NULL");
    const Fact* f = facts->record->find(key);
    if (!f) throw ir::Error(ir::ErrorCode::InvalidArgument, std::string("esg_facts_find: the record has no `") + key + "`");
    fill(*f, out, "esg_facts_find");
  });
  return esg_last_status();
}

ESG_API const esg_facts* esg_facts_row(const esg_facts* facts, int64_t index, int64_t row) {
  const esg_facts* found = nullptr;
  guarded(nullptr, [&] {
    const Fact& f = entry_at(facts, index, "esg_facts_row");
    if (f.kind != FactKind::List) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_facts_row: `" + f.key + "` is no list");
    if (row < 0 || row >= static_cast<int64_t>(f.rows.size()))
      throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_facts_row: `" + f.key + "` has " + std::to_string(f.rows.size()) +
                                                          " rows, not " + std::to_string(row + 1));
    found = facts->rows[static_cast<size_t>(index)][static_cast<size_t>(row)].get();
  });
  return found;
}

}  // extern "C"
