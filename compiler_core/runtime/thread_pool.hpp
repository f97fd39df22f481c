// Worker threads for the streams of a run and for the kernels that split their work:
// eval::Parallel over a fixed set of threads. After a job a worker spins for kSpinFor, yielding
// its core to any other runnable thread between checks, then sleeps: a model's kernels come
// microseconds apart, and a sleeping worker takes tens of microseconds to wake (more than a
// small convolution's piece), while a model idle between runs burns at most kSpinFor of each
// worker's time per run. The caller spins the same way for the pieces others took. The calling
// thread takes part, so threads = 1 means no worker at all. A pool serves one job at a time; a kernel that
// finds it busy (inside a stream, or another run of the same model) runs its pieces itself,
// which is correct and keeps concurrent runs from waiting on each other.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "eval/kernels.hpp"

namespace esg::runtime {

class ThreadPool final : public eval::Parallel {
 public:
  static constexpr std::chrono::microseconds kSpinFor{100};

  explicit ThreadPool(int threads);  // threads >= 1, the caller included
  ~ThreadPool() override;
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const override { return static_cast<int>(workers_.size()) + 1; }
  int free_threads() const override { return busy_.load() ? 1 : threads(); }
  void run(int64_t pieces, const std::function<void(int64_t)>& piece) const override;
  bool run_together(int64_t pieces, const std::function<void(int64_t)>& piece) const override;

 private:
  void work();
  void start(int64_t pieces, const std::function<void(int64_t)>& piece) const;  // with busy_ taken
  // Takes and runs pieces of job `generation` until none is left.
  void drain(const std::function<void(int64_t)>* piece, int64_t pieces, uint64_t generation) const;

  std::vector<std::thread> workers_;
  mutable std::atomic<bool> busy_{false};  // a job is running (a flag, not a mutex: its owner's kernels test it too)
  mutable std::mutex mu_;
  mutable std::condition_variable wake_, done_;
  mutable const std::function<void(int64_t)>* job_ = nullptr;
  mutable int64_t pieces_ = 0, next_ = 0;
  mutable std::atomic<int64_t> finished_{0};     // written under mu_, read while spinning too
  mutable std::atomic<uint64_t> generation_{0};  // likewise
  mutable std::exception_ptr error_;  // the job's first failed piece, rethrown to its caller
  std::atomic<bool> stop_{false};
};

}  // namespace esg::runtime
