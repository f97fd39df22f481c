#include "runtime/facts.hpp"

#include <algorithm>

#include "ir/error.hpp"

namespace esg::runtime {

Fact& Facts::put(std::string key, FactKind kind) {
  if (find(key)) throw ir::Error(ir::ErrorCode::Internal, "facts: `" + key + "` entered twice");
  Fact& f = entries_.emplace_back();
  f.key = std::move(key);
  f.kind = kind;
  return f;
}

Facts& Facts::row(const std::string& key) {
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Fact& f) { return f.key == key; });
  Fact& list = it != entries_.end() ? *it : put(key, FactKind::List);
  if (list.kind != FactKind::List) throw ir::Error(ir::ErrorCode::Internal, "facts: `" + key + "` is no list");
  return list.rows.emplace_back();
}

const Fact* Facts::find(std::string_view key) const {
  for (const Fact& f : entries_)
    if (f.key == key) return &f;
  return nullptr;
}

int64_t Facts::number(std::string_view key) const {
  const Fact* f = find(key);
  return f && f->kind != FactKind::Text && f->kind != FactKind::List ? f->number : 0;
}

void Facts::add(const Facts& other) {
  for (const Fact& f : other.entries_) {
    if (f.kind == FactKind::Text || f.kind == FactKind::List) continue;
    auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Fact& mine) { return mine.key == f.key; });
    if (it == entries_.end()) {
      entries_.push_back(f);
    } else if (it->kind == f.kind) {
      it->number = f.kind == FactKind::Level ? std::max(it->number, f.number) : it->number + f.number;
    }
  }
}

void Facts::drop(std::string_view key) {
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(), [&](const Fact& f) { return f.key == key; }), entries_.end());
}

namespace {

bool scalars_only(const Facts& facts) {
  return std::none_of(facts.entries().begin(), facts.entries().end(), [](const Fact& f) { return f.kind == FactKind::List; });
}

std::string value_of(const Fact& f) { return f.kind == FactKind::Text ? f.text : std::to_string(f.number); }

void render_into(const Facts& facts, const std::string& indent, std::string& out) {
  for (const Fact& f : facts.entries()) {
    if (f.kind != FactKind::List) {
      out += indent + f.key + ": " + value_of(f) + "\n";
      continue;
    }
    out += indent + f.key + ":\n";
    for (const Facts& row : f.rows) {
      if (!scalars_only(row)) {
        out += indent + "  -\n";
        render_into(row, indent + "    ", out);
        continue;
      }
      out += indent + "  -";
      const char* sep = " ";
      for (const Fact& e : row.entries()) out += sep + e.key + ": " + value_of(e), sep = ", ";
      out += "\n";
    }
  }
}

}  // namespace

std::string render(const Facts& facts) {
  std::string out;
  render_into(facts, "", out);
  return out;
}

}  // namespace esg::runtime
