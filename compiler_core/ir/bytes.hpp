// A constant's bytes: a buffer of its own, or a read-only view of memory that `owner` keeps
// alive (a mapped compiled-model file), so that a loaded model uses its weights in place and
// processes that load the same file share their pages.
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

namespace esg::ir {

class Bytes {
 public:
  explicit Bytes(std::vector<uint8_t> owned) : owned_(std::move(owned)), data_(owned_.data()), size_(owned_.size()) {}
  Bytes(const uint8_t* data, size_t size, std::shared_ptr<const void> owner) : data_(data), size_(size), owner_(std::move(owner)) {}
  Bytes(const Bytes&) = delete;  // shared by pointer (ir::Blob), never copied
  Bytes& operator=(const Bytes&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const uint8_t* begin() const { return data_; }
  const uint8_t* end() const { return data_ + size_; }
  bool operator==(const Bytes& o) const { return size_ == o.size_ && (size_ == 0 || std::memcmp(data_, o.data_, size_) == 0); }
  bool operator!=(const Bytes& o) const { return !(*this == o); }

 private:
  std::vector<uint8_t> owned_;
  const uint8_t* data_;
  size_t size_;
  std::shared_ptr<const void> owner_;
};

// Constants' bytes are shared: copies of a graph (specialization, every pass) share them.
using Blob = std::shared_ptr<const Bytes>;

inline Blob make_blob(std::vector<uint8_t> bytes) { return std::make_shared<const Bytes>(std::move(bytes)); }

}  // namespace esg::ir
