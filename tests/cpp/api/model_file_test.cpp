// The compiled-model file through the C++ API: Model::save and esg::load_model give back a model
// that runs to the same bits without compiling, and a load refuses a damaged file or a compile
// choice with the error that says so.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

#include <esgraph/esgraph.hpp>

using esg::HostTensor;
using esg::Tensor;

namespace {

// A file under /tmp named for this process, removed when the test case ends.
struct TempFile {
  explicit TempFile(const std::string& name) : path("/tmp/esg_model_file_test_" + std::to_string(::getpid()) + "_" + name + ".esgm") {}
  ~TempFile() { std::remove(path.c_str()); }
  const std::string path;
};

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  REQUIRE(f.flush());
}

// Values that are not round, so that a kernel computing another way shows in the bits.
std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>((i * 7919) % 23) / 23.0f - 0.37f;
  return v;
}

// The same dtypes, shapes and bytes.
bool same_bits(const std::vector<HostTensor>& a, const std::vector<HostTensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].dtype() != b[i].dtype() || a[i].shape() != b[i].shape()) return false;
    const size_t n = a[i].count() * esg_dtype_size(static_cast<esg_dtype>(a[i].dtype()));
    if (n && std::memcmp(a[i].raw_bytes(), b[i].raw_bytes(), n) != 0) return false;
  }
  return true;
}

// A small net with constants: a matmul with its epilogue, a normalization, a second output.
esg::Graph net(bool symbolic) {
  esg::GraphBuilder b("net");
  const Tensor x = b.input("x", esg::f32, {symbolic ? b.symbol("batch") : 3, 8});
  const Tensor w = b.constant(ramp(8 * 6, 2.0f), {8, 6});
  const Tensor bias = b.constant(ramp(6, 1.0f), {6});
  const Tensor h = esg::gelu(esg::matmul(x, w) + bias);
  const Tensor y = esg::softmax(esg::layer_norm(h) * 1.5f);
  return b.build({y, esg::reduce_sum(h, esg::ReduceSumOptions().axes({1}))});
}

std::vector<HostTensor> run_net(const esg::Model& m, int64_t batch) {
  return m.run({HostTensor::from(esg::f32, ramp(static_cast<size_t>(batch) * 8, 3.0f), {batch, 8})});
}

// A saved static model's bytes, small enough to cut at every length.
std::vector<uint8_t> saved_static_model(const TempFile& file) {
  esg::compile(net(false)).save(file.path);
  std::vector<uint8_t> bytes = read_bytes(file.path);
  REQUIRE(bytes.size() > 64);
  return bytes;
}

}  // namespace

TEST_CASE("a saved model loads and runs to the same bits without compiling") {
  const TempFile file("static");
  const esg::Model compiled = esg::compile(net(false));
  const std::vector<HostTensor> want = run_net(compiled, 3);
  compiled.save(file.path);
  const esg::Model loaded = esg::load_model(file.path);
  CHECK(loaded.stats().plans == 0);
  CHECK(same_bits(run_net(loaded, 3), want));
  const esg_model_stats s = loaded.stats(), c = compiled.stats();
  CHECK(s.plans == 0);
  CHECK(s.plans_loaded == 1);
  CHECK(s.launches == c.launches);
  CHECK(s.fused_groups == c.fused_groups);
  CHECK(s.arena_bytes == c.arena_bytes);
  // Threads and limits are the load's to set; the constants' check may be skipped.
  const esg::Model one_thread = esg::load_model(file.path, esg::CompileOptions().threads(1).max_plans(4).skip_weight_check(true));
  CHECK(same_bits(run_net(one_thread, 3), want));
  // Naming the backend the file was compiled for is no change.
  CHECK(same_bits(run_net(esg::load_model(file.path, esg::CompileOptions().backend("cpu")), 3), want));
  // A loaded model saves again to a file that loads.
  const TempFile again("static_again");
  loaded.save(again.path);
  CHECK(same_bits(run_net(esg::load_model(again.path), 3), want));
}

TEST_CASE("a symbolic model saved after runs at two sizes loads with their plans") {
  const TempFile file("symbolic");
  const esg::Model compiled = esg::compile(net(true));  // the batch left open: a plan per size class
  CHECK(compiled.stats().plans == 0);
  const std::vector<HostTensor> want2 = run_net(compiled, 2), want5 = run_net(compiled, 5);
  CHECK(compiled.stats().plans == 2);  // the classes up to 2 and up to 8
  compiled.save(file.path);
  const esg::Model loaded = esg::load_model(file.path);
  CHECK(same_bits(run_net(loaded, 2), want2));
  CHECK(same_bits(run_net(loaded, 5), want5));
  CHECK(same_bits(run_net(loaded, 2), want2));
  const esg_model_stats s = loaded.stats();
  CHECK(s.plans == 0);     // both sizes were bound to the file's symbolic plans: nothing compiled
  CHECK(s.plans_loaded == 2);
  CHECK(s.bindings == 2);
  // A size of a class the file holds no plan for compiles one, as a compiled model would.
  const std::vector<HostTensor> want11 = run_net(compiled, 11);
  CHECK(same_bits(run_net(loaded, 11), want11));
  CHECK(loaded.stats().plans == 1);
}

TEST_CASE("a compiled-model file cut at any length is a FormatError") {
  const TempFile file("whole"), cut("cut");
  const std::vector<uint8_t> bytes = saved_static_model(file);
  size_t refused = 0;
  for (size_t n = 0; n < bytes.size(); ++n) {
    write_bytes(cut.path, bytes.data(), n);
    try {
      (void)esg::load_model(cut.path);
    } catch (const esg::FormatError&) {
      ++refused;
    }
  }
  CHECK(refused == bytes.size());
  // Bytes past the end the header names are refused too.
  std::vector<uint8_t> longer = bytes;
  longer.resize(bytes.size() + 64, 0);
  write_bytes(cut.path, longer.data(), longer.size());
  CHECK_THROWS_AS(esg::load_model(cut.path), esg::FormatError);
}

TEST_CASE("a byte flipped anywhere in a compiled-model file is a FormatError") {
  const TempFile file("whole"), flipped("flipped");
  const std::vector<uint8_t> bytes = saved_static_model(file);
  // The bytes the format gives a meaning (docs/model-format.md): the header, its reserved bytes
  // included, the section table, the sections and the constants; then the alignment's padding.
  std::vector<bool> covered(bytes.size(), false);
  auto cover = [&](uint64_t at, uint64_t n) {
    REQUIRE(at + n <= bytes.size());
    std::fill(covered.begin() + static_cast<std::ptrdiff_t>(at), covered.begin() + static_cast<std::ptrdiff_t>(at + n), true);
  };
  auto u64 = [&](size_t at) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = v << 8 | bytes[at + static_cast<size_t>(i)];
    return v;
  };
  const size_t sections = static_cast<size_t>(u64(8) >> 32);  // the u32 at 12
  cover(0, 64 + 32 * sections);
  for (size_t i = 0; i < sections; ++i) {
    const size_t entry = 64 + 32 * i;
    cover(u64(entry + 8), u64(entry + 16));
    if ((u64(entry) & 0xffffffffu) == 3)  // the constants' table: count, then offset, size, hash each
      for (uint64_t k = 0, at = u64(entry + 8); k < u64(at); ++k) cover(u64(at + 8 + 24 * k), u64(at + 16 + 24 * k));
  }
  // 200 of those positions, over the whole file, each flipped alone, two ways.
  std::vector<size_t> positions;
  for (size_t at = 0; at < bytes.size(); ++at)
    if (covered[at]) positions.push_back(at);
  REQUIRE(positions.size() >= 200);
  std::vector<size_t> missed;
  for (size_t k = 0; k < 200; ++k) {
    const size_t at = positions[k * positions.size() / 200 + (k * 13) % (positions.size() / 200)];
    for (uint8_t mask : {uint8_t{0x01}, uint8_t{0xff}}) {
      std::vector<uint8_t> copy = bytes;
      copy[at] ^= mask;
      write_bytes(flipped.path, copy.data(), copy.size());
      try {
        (void)esg::load_model(flipped.path);
        missed.push_back(at);
      } catch (const esg::FormatError&) {
      }
    }
  }
  CHECK_MESSAGE(missed.empty(), missed.size() << " flips loaded, the first at byte " << (missed.empty() ? 0 : missed[0]) << " of "
                                               << bytes.size());
  // The alignment's padding must be zero: a flip there is refused too.
  for (size_t at = 0; at < bytes.size(); ++at) {
    if (covered[at]) continue;
    std::vector<uint8_t> copy = bytes;
    copy[at] ^= 0xff;
    write_bytes(flipped.path, copy.data(), copy.size());
    CHECK_THROWS_AS(esg::load_model(flipped.path), esg::FormatError);
  }
}

TEST_CASE("a load refuses what is no compiled-model file, and the compile's own choices") {
  const TempFile file("whole"), other("other");
  const std::vector<uint8_t> bytes = saved_static_model(file);
  // Another file's magic bytes.
  std::vector<uint8_t> copy = bytes;
  std::memcpy(copy.data(), "ESGRAPH\0", 8);
  write_bytes(other.path, copy.data(), copy.size());
  CHECK_THROWS_WITH_AS(esg::load_model(other.path), doctest::Contains("bad magic"), esg::FormatError);
  // A graph file is no compiled-model file.
  net(false).save(other.path);
  CHECK_THROWS_AS(esg::load_model(other.path), esg::FormatError);
  write_bytes(other.path, bytes.data(), 0);
  CHECK_THROWS_AS(esg::load_model(other.path), esg::FormatError);
  // A missing file, a directory.
  CHECK_THROWS_AS(esg::load_model("/nonexistent/model.esgm"), esg::IoError);
  CHECK_THROWS_AS(esg::load_model("/tmp"), esg::IoError);
  // Choices the compile made are the file's: a load that sets one is refused, naming it.
  CHECK_THROWS_WITH_AS(esg::load_model(file.path, esg::CompileOptions().streams(2)), doctest::Contains("streams"), esg::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(esg::load_model(file.path, esg::CompileOptions().fusion(false)), doctest::Contains("fusion"), esg::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(esg::load_model(file.path, esg::CompileOptions().symbol("batch", 2)), doctest::Contains("symbols"),
                       esg::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(esg::load_model(file.path, esg::CompileOptions().precision("bf16")), doctest::Contains("precision"),
                       esg::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(esg::load_model(file.path, esg::CompileOptions().backend("ascend-sim")), doctest::Contains("backend"),
                       esg::InvalidArgumentError);
  // The file itself is fine: the same load without them runs.
  CHECK(esg::load_model(file.path).stats().plans == 0);
  // Saving where no directory is fails, leaving nothing behind.
  CHECK_THROWS_AS(esg::compile(net(false)).save("/nonexistent/dir/model.esgm"), esg::IoError);
}

TEST_CASE("the compile cache loads what an earlier compile stored, keyed on the graph or its file") {
  const std::string dir = "/tmp/esg_model_file_test_" + std::to_string(::getpid()) + "_cache";
  const TempFile source("source");
  net(false).save(source.path);
  const esg::CompileOptions options = esg::CompileOptions().cache_dir(dir);
  const esg::Model first = esg::compile(net(false), options);
  CHECK(first.stats().cache_misses == 1);
  const esg::Model second = esg::compile(net(false), options);
  CHECK(second.stats().cache_hits == 1);
  CHECK(second.stats().plans == 0);
  CHECK(same_bits(run_net(second, 3), run_net(first, 3)));
  // Keyed on the file the graph came from: found before the file is read again.
  CHECK_FALSE(esg::find_cached(source.path, options).has_value());
  const esg::Model stored = esg::compile(esg::Graph::load(source.path), esg::CompileOptions(options).cache_source(source.path));
  CHECK(stored.stats().cache_misses == 1);
  std::optional<esg::Model> found = esg::find_cached(source.path, options);
  REQUIRE(found.has_value());
  CHECK(found->stats().cache_hits == 1);
  CHECK(same_bits(run_net(*found, 3), run_net(first, 3)));
  // Another compile choice is another entry.
  CHECK_FALSE(esg::find_cached(source.path, esg::CompileOptions(options).fusion(false)).has_value());
  CHECK_THROWS_AS(esg::find_cached("/tmp/esg_no_such_model.onnx", options), esg::IoError);
  std::filesystem::remove_all(dir);
}
