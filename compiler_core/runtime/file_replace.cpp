#include "runtime/file_replace.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "ir/error.hpp"

namespace esg::runtime {

using ir::Error;
using ir::ErrorCode;

std::string private_path(const std::string& path) {
  static std::atomic<unsigned long long> writes{0};
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(writes++);
}

void replace_file(const std::string& path, const void* data, size_t size) {
  const std::string temporary = private_path(path);
  {
    std::ofstream f(temporary, std::ios::binary | std::ios::trunc);
    if (!f) throw Error(ErrorCode::Io, "cannot open `" + temporary + "` for writing: " + std::strerror(errno));
    f.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!f.flush()) {
      const int err = errno;
      std::remove(temporary.c_str());
      throw Error(ErrorCode::Io, "cannot write `" + temporary + "`: " + std::strerror(err));
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(temporary.c_str());
    throw Error(ErrorCode::Io, "cannot move `" + temporary + "` to `" + path + "`: " + std::strerror(err));
  }
}

}  // namespace esg::runtime
