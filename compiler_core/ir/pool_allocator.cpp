#include "ir/pool_allocator.hpp"

#include <sys/mman.h>

#include <cstdlib>
#include <mutex>
#include <new>

namespace esg::ir::pool_detail {
namespace {

constexpr size_t kSmall = size_t{16} << 10;     // below: plain malloc, which caches well
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kCacheCap = size_t{256} << 20;  // bytes of freed blocks kept for reuse
constexpr int kClasses = 48;

// Blocks are powers of two from kSmall up; a class keeps its freed blocks on a stack.
struct Cache {
  std::mutex mu;
  std::vector<void*> free[kClasses];
  size_t cached = 0;
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: pools may be freed during static teardown
  return *c;
}

int size_class(size_t bytes, size_t* block) {
  int c = 0;
  size_t b = kSmall;
  while (b < bytes) b <<= 1, ++c;
  *block = b;
  return c;
}

void* map_block(size_t block) {
  void* p = mmap(nullptr, block, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  if (block >= kHugePage) madvise(p, block, MADV_HUGEPAGE);  // a hint; harmless where THP is off
#endif
  return p;
}

}  // namespace

void* allocate(size_t bytes) {
  if (bytes < kSmall) {
    void* p = std::malloc(bytes ? bytes : 1);
    if (!p) throw std::bad_alloc();
    return p;
  }
  size_t block;
  const int c = size_class(bytes, &block);
  if (c < kClasses) {
    Cache& k = cache();
    std::lock_guard<std::mutex> lock(k.mu);
    if (!k.free[c].empty()) {
      void* p = k.free[c].back();
      k.free[c].pop_back();
      k.cached -= block;
      return p;
    }
  }
  return map_block(block);
}

void deallocate(void* p, size_t bytes) noexcept {
  if (bytes < kSmall) {
    std::free(p);
    return;
  }
  size_t block;
  const int c = size_class(bytes, &block);
  if (c < kClasses) {
    Cache& k = cache();
    std::lock_guard<std::mutex> lock(k.mu);
    if (k.cached + block <= kCacheCap) {
      try {
        k.free[c].push_back(p);
        k.cached += block;
        return;
      } catch (...) {  // no room to remember it: give it back below
      }
    }
  }
  munmap(p, block);
}

}  // namespace esg::ir::pool_detail
