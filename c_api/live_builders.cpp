// Which builders exist, and each one's epoch. A tensor is a value that names its builder by
// address; once the builder is destroyed the address dangles (and may be reused by the next
// builder, perhaps another thread's), so a handle's epoch is compared with the one registered
// for that address before the builder is touched: a stale handle never reads a builder that
// another thread may be destroying. Epochs come from one counter, so that a reused address never
// revives an old tensor. The table changes only when a builder is created, built or destroyed:
// each thread remembers the last builder it looked up and trusts that until any change, so the
// check costs one atomic load on the common path.
#include <atomic>
#include <mutex>
#include <unordered_map>

#include "c_api/handles.hpp"

namespace esg::capi {
namespace {

std::mutex g_mu;
std::unordered_map<const esg_builder*, uint32_t>& live() {  // builder -> its epoch
  static auto* table = new std::unordered_map<const esg_builder*, uint32_t>();  // never destroyed: builders may outlive static teardown
  return *table;
}
std::atomic<uint64_t> g_changes{0};
std::atomic<uint32_t> g_epoch{0};

struct LastAlive {
  const esg_builder* builder = nullptr;
  uint64_t changes = 0;
  uint32_t epoch = 0;
};
// Static TLS: a library's dynamic TLS costs a call per access; 16 bytes fit the surplus glibc
// keeps for libraries loaded later (the Python extension loads this one).
thread_local LastAlive t_last __attribute__((tls_model("initial-exec")));

}  // namespace

void register_builder(const esg_builder* b) {
  std::lock_guard<std::mutex> lock(g_mu);
  live()[b] = b->epoch;
  g_changes.fetch_add(1, std::memory_order_release);
}

void unregister_builder(const esg_builder* b) {
  std::lock_guard<std::mutex> lock(g_mu);
  live().erase(b);
  g_changes.fetch_add(1, std::memory_order_release);
}

void new_epoch(esg_builder* b) {
  std::lock_guard<std::mutex> lock(g_mu);
  b->epoch = next_epoch();
  live()[b] = b->epoch;
  g_changes.fetch_add(1, std::memory_order_release);
}

uint32_t live_epoch(const esg_builder* b) {
  const uint64_t changes = g_changes.load(std::memory_order_acquire);
  if (b == t_last.builder && changes == t_last.changes) return t_last.epoch;
  std::lock_guard<std::mutex> lock(g_mu);
  const auto it = live().find(b);
  if (it == live().end()) return 0;
  t_last = {b, g_changes.load(std::memory_order_relaxed), it->second};
  return it->second;
}

bool builder_alive(const esg_builder* b) { return live_epoch(b) != 0; }

uint32_t next_epoch() {
  uint32_t e = g_epoch.fetch_add(1, std::memory_order_relaxed) + 1;
  while (e == 0) e = g_epoch.fetch_add(1, std::memory_order_relaxed) + 1;  // 0 marks no tensor
  return e;
}

}  // namespace esg::capi
