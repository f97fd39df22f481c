// oneDNN's threads are OpenMP's, whose count is a per-thread setting: a kernel sets it around
// each oneDNN call and restores the caller's (the calling thread may be the user's, running
// other OpenMP code).
#pragma once
#include <omp.h>

namespace esg::cpu {

class OmpThreads {
 public:
  explicit OmpThreads(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n < 1 ? 1 : n); }
  ~OmpThreads() { omp_set_num_threads(saved_); }
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;

 private:
  int saved_;
};

}  // namespace esg::cpu
