// Graph files saved by every recorded release load in this one, verify, and read back as the
// graph they were: their text dump, saved beside them, matches line by line. Attributes that
// ops gained after the release appear in today's dump at their defaults and are set aside, as
// are absent trailing optional inputs, which older versions printed as `none`.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <esgraph/esgraph.hpp>

namespace fs = std::filesystem;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(std::regex_replace(line, std::regex("(, none)+\\)"), ")"));
  return out;
}

// `line` with the attributes of its `{…}` block that `reference` does not have removed.
std::string without_new_attrs(const std::string& line, const std::string& reference) {
  const std::regex attr(R"(([@\w]+)=("[^"]*"|\[[^\]]*\]|[^,}]+))");
  const size_t open = line.find(" {");
  const size_t close = open == std::string::npos ? open : line.find('}', open);
  if (close == std::string::npos) return line;  // no attribute block (a graph or body header)
  std::set<std::string> keep;
  for (std::sregex_iterator it(reference.begin(), reference.end(), attr), end; it != end; ++it) keep.insert((*it)[1]);
  std::string kept;
  const std::string block = line.substr(open + 2, close - open - 2);
  for (std::sregex_iterator it(block.begin(), block.end(), attr), end; it != end; ++it)
    if (keep.count((*it)[1])) kept += (kept.empty() ? "" : ", ") + it->str();
  return line.substr(0, open) + (kept.empty() ? "" : " {" + kept + "}") + line.substr(close + 1);
}

}  // namespace

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
      std::stringstream recorded;
      recorded << txt.rdbuf();
      const std::vector<std::string> then = lines_of(recorded.str()), now = lines_of(g.to_text());
      REQUIRE(then.size() == now.size());
      for (size_t i = 0; i < now.size(); ++i) CHECK(without_new_attrs(now[i], then[i]) == then[i]);
      ++files;
    }
  }
  CHECK(files >= 4);
}
