// The allocator of the graph's pools.
//
// Building a graph is a few push_backs per node; what it costs is memory the kernel has to
// fault in. malloc hands large blocks back to the kernel when they are freed (mmap'd chunks,
// heap trimming), so building graph after graph faulted every page anew and took most of the
// time. Large pool blocks therefore go through a small process-wide cache of power-of-two
// blocks: freed blocks are kept (up to a cap) and reused already faulted in, and blocks are
// mapped with a transparent-huge-page hint so a fresh large graph takes few faults.
#pragma once
#include <cstddef>
#include <vector>

namespace esg::ir {

namespace pool_detail {
void* allocate(size_t bytes);
void deallocate(void* p, size_t bytes) noexcept;
}  // namespace pool_detail

template <class T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() = default;
  template <class U>
  PoolAllocator(const PoolAllocator<U>&) noexcept {}  // NOLINT: rebinding is implicit by design
  T* allocate(size_t n) { return static_cast<T*>(pool_detail::allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { pool_detail::deallocate(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const PoolAllocator<U>&) const noexcept { return true; }
  template <class U>
  bool operator!=(const PoolAllocator<U>&) const noexcept { return false; }
};

template <class T>
using Pool = std::vector<T, PoolAllocator<T>>;

}  // namespace esg::ir
