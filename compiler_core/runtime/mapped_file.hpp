// A regular file mapped read-only, for as long as its owner lives (a loaded model's constants
// are views of it; a hash reads it without a copy).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace esg::runtime {

struct MappedFile {
  std::shared_ptr<const void> owner;  // unmaps when the last holder lets go
  const uint8_t* data = nullptr;
  size_t size = 0;
};

// `path`'s bytes; ir::Error Io, its message starting with `who`, when it cannot be opened, is no
// regular file (a device or a pipe has no size to map) or cannot be mapped.
MappedFile map_file(const std::string& path, const std::string& who);

}  // namespace esg::runtime
