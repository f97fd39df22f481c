// Which builders exist. A tensor is a value that names its builder by address; once the builder
// is destroyed the address dangles (and may be reused by the next builder), so a handle is
// checked against this set before its builder is touched, and epochs come from one counter so
// that a reused address never revives an old tensor. The set changes only when a builder is
// created or destroyed: each thread remembers the last builder it found alive and trusts it
// until any builder is destroyed, so the check costs one atomic load on the common path.
#include <atomic>
#include <mutex>
#include <unordered_set>

#include "c_api/handles.hpp"

namespace esg::capi {
namespace {

std::mutex g_mu;
std::unordered_set<const esg_builder*>& live() {
  static auto* set = new std::unordered_set<const esg_builder*>();  // never destroyed: builders may outlive static teardown
  return *set;
}
std::atomic<uint64_t> g_destroyed{0};
std::atomic<uint32_t> g_epoch{0};

struct LastAlive {
  const esg_builder* builder = nullptr;
  uint64_t destroyed = 0;
};
// Static TLS: a library's dynamic TLS costs a call per access; 16 bytes fit the surplus glibc
// keeps for libraries loaded later (the Python extension loads this one).
thread_local LastAlive t_last __attribute__((tls_model("initial-exec")));

}  // namespace

void register_builder(const esg_builder* b) {
  std::lock_guard<std::mutex> lock(g_mu);
  live().insert(b);
}

void unregister_builder(const esg_builder* b) {
  std::lock_guard<std::mutex> lock(g_mu);
  live().erase(b);
  g_destroyed.fetch_add(1, std::memory_order_release);
}

bool builder_alive(const esg_builder* b) {
  const uint64_t destroyed = g_destroyed.load(std::memory_order_acquire);
  if (b == t_last.builder && destroyed == t_last.destroyed) return true;
  std::lock_guard<std::mutex> lock(g_mu);
  if (!live().count(b)) return false;
  t_last = {b, g_destroyed.load(std::memory_order_relaxed)};
  return true;
}

uint32_t next_epoch() {
  uint32_t e = g_epoch.fetch_add(1, std::memory_order_relaxed) + 1;
  while (e == 0) e = g_epoch.fetch_add(1, std::memory_order_relaxed) + 1;  // 0 marks no tensor
  return e;
}

}  // namespace esg::capi
