// One record of what a model knows about itself (DESIGN decision 13): the plan, the plan cache,
// the stages and each backend's program add keyed, typed entries to it; the text report is
// rendered from it (render), and the stats of every language read it. A backend publishes a
// figure by adding an entry: no shared struct, C header or Python dict names it first.
//
// Keys are snake_case and unique within their record. A list's rows are records of their own
// (a kernel with its properties, a kept plan with all of its facts).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace esg::runtime {

// Equal to the C ABI's esg_fact_kind values.
enum class FactKind : int {
  Count = 0,  // an amount of things: adds up over a staged model's stages
  Bytes = 1,  // an amount of memory: adds up too
  Level = 2,  // a figure that does not add (streams, a limit, a flag): stages keep the largest
  Text = 3,   // words: a name, a reason, a note
  List = 4,   // rows, each a record
};

class Facts;

struct Fact {
  std::string key;
  FactKind kind = FactKind::Count;
  int64_t number = 0;       // Count, Bytes, Level
  std::string text;         // Text
  std::vector<Facts> rows;  // List
};

class Facts {
 public:
  void count(std::string key, int64_t n) { put(std::move(key), FactKind::Count).number = n; }
  void bytes(std::string key, int64_t n) { put(std::move(key), FactKind::Bytes).number = n; }
  void level(std::string key, int64_t n) { put(std::move(key), FactKind::Level).number = n; }
  void text(std::string key, std::string t) { put(std::move(key), FactKind::Text).text = std::move(t); }
  // A new row at the end of the list `key`, which the first row makes.
  Facts& row(const std::string& key);
  // A list of `name` and `count` rows, one per entry of a name -> count map (the ops a backend
  // runs one way, by op name): the form most lists here take.
  template <class Map>
  void tally(const std::string& key, const Map& counts, const char* name = "name") {
    for (const auto& [n, c] : counts) {
      Facts& r = row(key);
      r.text(name, n);
      r.count("count", c);
    }
  }

  const std::vector<Fact>& entries() const { return entries_; }
  const Fact* find(std::string_view key) const;
  int64_t number(std::string_view key) const;  // a Count, Bytes or Level entry's value; 0 when there is none
  // Takes another record's amounts and levels (a staged model's stages added up): an amount adds
  // to this one's of the same key, a level keeps the larger, a key this record lacks is copied.
  // Texts and lists describe their own record and stay there.
  void add(const Facts& other);
  void drop(std::string_view key);  // the entry `key`, if there is one

 private:
  Fact& put(std::string key, FactKind kind);  // ir::Error Internal on a key already there
  std::vector<Fact> entries_;
};

// The report: one line per entry ("key: value"), a list's rows indented under it, a row of
// scalars on one line.
std::string render(const Facts& facts);

}  // namespace esg::runtime
