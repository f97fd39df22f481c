// A constant's bytes: a buffer of its own, or a read-only view of memory that `owner` keeps
// alive (a mapped compiled-model file), so that a loaded model uses its weights in place and
// processes that load the same file share their pages.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace esg::ir {

// Owned bytes start on a cache line (64 bytes, an AVX-512 vector), or a chosen number of bytes
// past one (copy_to_blob): kernels read constants where they lie, and how fast depends on it
// (malloc's 16-byte alignment made one product's time vary 2x with its weights' address;
// bench/RESULTS.md).
template <class T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlignment{64};
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlignment)); }
  void deallocate(T* p, size_t) { ::operator delete(p, kAlignment); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const { return true; }
  template <class U>
  bool operator!=(const CacheLineAllocator<U>&) const { return false; }
};
using OwnedBytes = std::vector<uint8_t, CacheLineAllocator<uint8_t>>;

class Bytes {
 public:
  explicit Bytes(OwnedBytes owned) : owned_(std::move(owned)), data_(owned_.data()), size_(owned_.size()) {}
  Bytes(const uint8_t* data, size_t size, std::shared_ptr<const void> owner, size_t line_offset = 0)
      : data_(data), size_(size), owner_(std::move(owner)), line_offset_(line_offset) {}
  Bytes(const Bytes&) = delete;  // shared by pointer (ir::Blob), never copied
  Bytes& operator=(const Bytes&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // How far past a cache line the bytes belong (copy_to_blob's choice, ir::constant_line_offset's
  // for bytes read in place, a loaded file's): where a compiled-model file places them, the same
  // for every save of the same constant, wherever the bytes lie now.
  size_t line_offset() const { return line_offset_; }
  const uint8_t* begin() const { return data_; }
  const uint8_t* end() const { return data_ + size_; }
  bool operator==(const Bytes& o) const { return size_ == o.size_ && (size_ == 0 || std::memcmp(data_, o.data_, size_) == 0); }
  bool operator!=(const Bytes& o) const { return !(*this == o); }

 private:
  OwnedBytes owned_;
  const uint8_t* data_;
  size_t size_;
  std::shared_ptr<const void> owner_;
  size_t line_offset_ = 0;
};

// Constants' bytes are shared: copies of a graph (specialization, every pass) share them.
using Blob = std::shared_ptr<const Bytes>;

inline Blob make_blob(OwnedBytes bytes) { return std::make_shared<const Bytes>(std::move(bytes)); }

// A copy of `size` bytes at `data`, starting `line_offset` (below 64) bytes past a cache line.
inline Blob copy_to_blob(const uint8_t* data, size_t size, size_t line_offset = 0) {
  auto owned = std::make_shared<OwnedBytes>(size + line_offset);
  if (size) std::memcpy(owned->data() + line_offset, data, size);
  const uint8_t* at = owned->data() + line_offset;
  return std::make_shared<const Bytes>(at, size, std::move(owned), line_offset);
}

}  // namespace esg::ir
