// Graph files saved by every recorded release load in this one, verify, and read back as
// the graph they were (their text dump, saved beside them).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <esgraph/esgraph.hpp>

namespace fs = std::filesystem;

TEST_CASE("graph files of every release load and match their recorded text") {
  size_t files = 0;
  for (const auto& release : fs::directory_iterator(ESG_COMPAT_DIR)) {
    const fs::path graphs = release.path() / "graphs";
    if (!fs::is_directory(graphs)) continue;
    for (const auto& f : fs::directory_iterator(graphs)) {
      if (f.path().extension() != ".esg") continue;
      CAPTURE(f.path().string());
      const esg::Graph g = esg::Graph::load(f.path().string());
      g.verify();
      std::ifstream txt(fs::path(f.path()).replace_extension(".txt"));
      std::stringstream expected;
      expected << txt.rdbuf();
      CHECK(g.to_text() == expected.str());
      ++files;
    }
  }
  CHECK(files >= 4);
}
