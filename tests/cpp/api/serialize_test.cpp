// Graph files: round trips are exact; truncated, corrupted and hostile files fail cleanly.
#include <doctest/doctest.h>

#include <cstdio>
#include <random>

#include <esgraph/esgraph.hpp>

using esg::Tensor;

namespace {
esg::Graph sample_graph() {
  esg::GraphBuilder b("sample");
  const int64_t batch = b.symbol("N");
  const Tensor x = b.input("x", esg::f32, {batch, 3});
  const std::vector<float> wv = {1, 2, 3, 4, 5, 6};
  const Tensor w = b.constant(wv, {3, 2});
  auto scope = b.name_scope("head");
  const Tensor y = esg::softmax(esg::matmul(x, w) * 0.5f, esg::SoftmaxOptions().axis(-1));
  const auto parts = esg::split(y, {1, 1}, esg::SplitOptions().axis(1));
  return b.build({parts[0], esg::cast(parts[1], esg::f16)});
}
}  // namespace

TEST_CASE("a graph saved and loaded is the same graph") {
  const esg::Graph g = sample_graph();
  const std::vector<uint8_t> bytes = g.serialize();
  const esg::Graph back = esg::Graph::deserialize(bytes);
  CHECK(back.to_text() == g.to_text());
  CHECK(back.serialize() == bytes);
  const std::string path = "esg_serialize_test.esg";
  g.save(path);
  CHECK(esg::Graph::load(path).to_text() == g.to_text());
  std::remove(path.c_str());
}

TEST_CASE("constants are stored as raw bytes at 64-byte aligned offsets") {
  const std::vector<uint8_t> bytes = sample_graph().serialize();
  const std::vector<uint8_t> weights = {0, 0, 0x80, 0x3f, 0, 0, 0, 0x40};  // 1.0f, 2.0f
  size_t at = 0;
  for (size_t i = 0; i + weights.size() <= bytes.size(); ++i)
    if (std::equal(weights.begin(), weights.end(), bytes.begin() + static_cast<std::ptrdiff_t>(i))) at = i;
  REQUIRE(at != 0);
  CHECK(at % 64 == 0);
}

TEST_CASE("every truncation of a graph file is refused with a format error") {
  const std::vector<uint8_t> bytes = sample_graph().serialize();
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    CHECK_THROWS_AS(esg::Graph::deserialize(cut), esg::FormatError);
  }
}

TEST_CASE("corrupted bytes are caught by the checksum") {
  std::vector<uint8_t> bytes = sample_graph().serialize();
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::vector<uint8_t> bad = bytes;
    bad[rng() % bad.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
    CHECK_THROWS_AS(esg::Graph::deserialize(bad), esg::FormatError);
  }
}

TEST_CASE("a file that is not a graph, or from a newer format, says so") {
  std::vector<uint8_t> junk(100, 'x');
  try {
    esg::Graph::deserialize(junk);
    FAIL("accepted junk");
  } catch (const esg::FormatError& e) {
    CHECK(std::string(e.what()).find("not an esgraph graph file") != std::string::npos);
  }
  std::vector<uint8_t> bytes = sample_graph().serialize();
  bytes[8] = 99;  // the format version
  try {
    esg::Graph::deserialize(bytes);
    FAIL("accepted a newer format");
  } catch (const esg::FormatError& e) {
    CHECK(std::string(e.what()).find("newer than this library reads") != std::string::npos);
  }
  CHECK_THROWS_AS(esg::Graph::load("/nonexistent/dir/g.esg"), esg::IoError);
  // What has no size to bound the loader's allocation is refused before anything is read.
  CHECK_THROWS_WITH_AS(esg::Graph::load("/dev/zero"), doctest::Contains("is not a regular file"), esg::IoError);
  CHECK_THROWS_AS(esg::Graph::load("/tmp"), esg::IoError);
}
