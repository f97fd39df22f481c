// A read-only view of contiguous elements (C++17 has no std::span).
#pragma once
#include <cstddef>
#include <vector>

namespace esg::ir {

template <class T>
struct Span {
  const T* ptr = nullptr;
  size_t len = 0;

  Span() = default;
  Span(const T* p, size_t n) : ptr(p), len(n) {}
  template <class A>
  Span(const std::vector<T, A>& v) : ptr(v.data()), len(v.size()) {}  // NOLINT: implicit by design
  const T* begin() const { return ptr; }
  const T* end() const { return ptr + len; }
  const T* data() const { return ptr; }
  size_t size() const { return len; }
  bool empty() const { return len == 0; }
  const T& operator[](size_t i) const { return ptr[i]; }
};

}  // namespace esg::ir
