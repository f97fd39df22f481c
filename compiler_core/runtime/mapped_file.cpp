#include "runtime/mapped_file.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/error.hpp"

namespace esg::runtime {

MappedFile map_file(const std::string& path, const std::string& who) {
  using ir::Error;
  using ir::ErrorCode;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(ErrorCode::Io, who + ": cannot open `" + path + "`: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(ErrorCode::Io, who + ": `" + path + "` is not a regular file");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* mapped = size ? ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0) : nullptr;
  const int err = errno;
  ::close(fd);
  if (mapped == MAP_FAILED) throw Error(ErrorCode::Io, who + ": cannot map `" + path + "`: " + std::strerror(err));
  MappedFile f;
  f.owner = std::shared_ptr<const void>(mapped, [size](const void* p) {
    if (p) ::munmap(const_cast<void*>(p), size);
  });
  f.data = static_cast<const uint8_t*>(mapped);
  f.size = size;
  return f;
}

}  // namespace esg::runtime
