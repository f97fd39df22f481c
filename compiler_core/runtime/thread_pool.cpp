#include "runtime/thread_pool.hpp"

#include <exception>
#include <utility>

namespace esg::runtime {
namespace {

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins until `ready()`, or false once ThreadPool::kSpinFor has passed: a pause between checks,
// and every 64th a yield of the core to any other thread that can run on it.
template <class Ready>
bool spin_until(Ready ready) {
  const auto until = std::chrono::steady_clock::now() + ThreadPool::kSpinFor;
  for (int i = 1;; ++i) {
    if (ready()) return true;
    if (i % 64 != 0) {
      cpu_relax();
      continue;
    }
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::yield();
  }
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::drain(const std::function<void(int64_t)>* piece, int64_t pieces, uint64_t generation) const {
  for (;;) {
    int64_t i;
    {
      std::lock_guard<std::mutex> lock(mu_);
      // A worker that woke late must not take a piece of a finished job (its function is gone)
      // or of the next one with this one's function. A job lives until its last piece is done.
      if (generation_ != generation || next_ >= pieces) return;
      i = next_++;
    }
    std::exception_ptr failure;
    try {
      (*piece)(i);
    } catch (...) {
      failure = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (failure && !error_) error_ = failure;
    if (++finished_ == pieces) done_.notify_all();
  }
}

void ThreadPool::work() {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t)>* job;
    int64_t pieces;
    spin_until([&] { return stop_.load() || generation_.load() != seen; });
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      pieces = pieces_;
    }
    drain(job, pieces, seen);
  }
}

void ThreadPool::run(int64_t pieces, const std::function<void(int64_t)>& piece) const {
  bool idle = false;
  if (workers_.empty() || pieces < 2 || !busy_.compare_exchange_strong(idle, true)) {
    for (int64_t i = 0; i < pieces; ++i) piece(i);
    return;
  }
  start(pieces, piece);
}

bool ThreadPool::run_together(int64_t pieces, const std::function<void(int64_t)>& piece) const {
  bool idle = false;
  if (pieces > threads() || !busy_.compare_exchange_strong(idle, true)) return false;
  // Every thread takes at most one piece before it blocks, and there are enough threads: a
  // piece waiting for another never waits for one that no thread will start.
  start(pieces, piece);
  return true;
}

void ThreadPool::start(int64_t pieces, const std::function<void(int64_t)>& piece) const {
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &piece;
    pieces_ = pieces;
    next_ = 0;
    finished_ = 0;
    error_ = nullptr;
    generation = ++generation_;
  }
  wake_.notify_all();
  drain(&piece, pieces, generation);
  spin_until([&] { return finished_.load() == pieces; });
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return finished_ == pieces_; });
  job_ = nullptr;
  const std::exception_ptr error = std::exchange(error_, nullptr);
  lock.unlock();
  busy_.store(false);
  if (error) std::rethrow_exception(error);
}

}  // namespace esg::runtime
