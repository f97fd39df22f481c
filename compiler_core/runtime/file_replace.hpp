// Files that several threads and processes may write at once (the compile cache's entries, the
// kernel cache's binaries): each writer works under a private name and renames the finished file
// into place, so a reader sees the old file or the new one, never half of either.
#pragma once
#include <cstddef>
#include <string>

namespace esg::runtime {

// `path` + ".tmp.<pid>.<n>": a name no other writer, thread or process, uses at the same time.
std::string private_path(const std::string& path);

// Writes `size` bytes to `path` through a private name and one rename; ir::Error Io naming the
// file when it cannot, with nothing left behind.
void replace_file(const std::string& path, const void* data, size_t size);

}  // namespace esg::runtime
