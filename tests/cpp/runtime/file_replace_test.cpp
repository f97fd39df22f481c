// Replacing a file that other threads write and read at the same time (the compile cache's
// entries, the kernel cache's binaries): every writer succeeds, a reader sees one writer's whole
// file, never a mix or a part, and no private file is left behind.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "ir/error.hpp"
#include "runtime/file_replace.hpp"

using namespace esg;

TEST_CASE("writers replacing one file from several threads at once all succeed; a reader sees whole files only") {
  const std::filesystem::path dir = "/tmp/esg_file_replace_test_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "entry.esgm").string();
  constexpr size_t kSize = 1 << 16;
  std::atomic<bool> writing{true};
  std::vector<std::string> failures(4);
  std::vector<std::thread> writers;
  for (size_t t = 0; t < failures.size(); ++t)
    writers.emplace_back([&, t] {
      const std::vector<char> bytes(kSize, static_cast<char>('a' + t));  // each writer's own file
      try {
        for (int i = 0; i < 200; ++i) runtime::replace_file(path, bytes.data(), bytes.size());
      } catch (const ir::Error& e) {
        failures[t] = e.what();
      }
    });
  int torn = 0, read = 0;
  std::thread reader([&] {
    while (writing) {
      std::ifstream f(path, std::ios::binary);
      if (!f) continue;  // before the first rename
      const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      ++read;
      torn += text.size() != kSize || std::count(text.begin(), text.end(), text[0]) != static_cast<long>(kSize);
    }
  });
  for (auto& w : writers) w.join();
  writing = false;
  reader.join();
  CHECK(failures == std::vector<std::string>(4));
  CHECK(read > 0);
  CHECK(torn == 0);
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) CHECK_MESSAGE(++files == 1, e.path().string());
  std::filesystem::remove_all(dir);
}

TEST_CASE("replacing a file where no directory is: an Io error naming it, nothing left behind") {
  const char bytes[] = "x";
  try {
    runtime::replace_file("/nonexistent/dir/entry.esgm", bytes, 1);
    FAIL("no error");
  } catch (const ir::Error& e) {
    CHECK(e.code() == ir::ErrorCode::Io);
    CHECK(std::string(e.what()).find("/nonexistent/dir/entry.esgm") != std::string::npos);
  }
}
