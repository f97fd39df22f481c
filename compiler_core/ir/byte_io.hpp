// Little-endian byte streams for the library's binary files (the graph format, the
// compiled-model file): a writer that appends, and a reader whose every read is bounds-checked
// against its section, so a hostile file fails with ir::Error Format instead of reading past it.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ir/error.hpp"

namespace esg::ir {

class ByteWriter {
 public:
  std::vector<uint8_t> buf;
  void u8(uint8_t v) { buf.push_back(v); }
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void i64(int64_t v) { raw(&v, 8); }
  void f64(double v) { raw(&v, 8); }
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
  void raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    buf.insert(buf.end(), b, b + n);
  }
  // Zeros up to the next multiple of `alignment` (of the buffer's size).
  void align(size_t alignment) { buf.resize((buf.size() + alignment - 1) / alignment * alignment, 0); }
};

class ByteReader {
 public:
  // `file` names what is read in messages: "graph file", "compiled-model file".
  ByteReader(const uint8_t* p, size_t n, const char* file) : p_(p), end_(p + n), file_(file) {}
  bool done() const { return p_ == end_; }
  size_t left() const { return static_cast<size_t>(end_ - p_); }
  uint8_t u8() { return take<uint8_t>(); }
  uint32_t u32() { return take<uint32_t>(); }
  uint64_t u64() { return take<uint64_t>(); }
  int64_t i64() { return take<int64_t>(); }
  double f64() { return take<double>(); }
  std::string str() {
    const uint32_t n = u32();
    need(n);
    std::string s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return s;
  }
  // The next `n` bytes, stepped over.
  const uint8_t* skip(size_t n) {
    need(n);
    const uint8_t* at = p_;
    p_ += n;
    return at;
  }
  // A count of items each at least `min_bytes` long: bounded by what is left, so a hostile
  // count cannot make the loader allocate more than the file's size.
  uint32_t count(size_t min_bytes) {
    const uint32_t n = u32();
    if (min_bytes && n > left() / min_bytes) bad("a count exceeds the data left");
    return n;
  }
  [[noreturn]] void bad(const std::string& what) const { throw Error(ErrorCode::Format, std::string(file_) + " is corrupted: " + what); }

 private:
  template <class T>
  T take() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }
  void need(size_t n) {
    if (left() < n) bad("a record runs past the end of its section");
  }
  const uint8_t* p_;
  const uint8_t* end_;
  const char* file_;
};

}  // namespace esg::ir
