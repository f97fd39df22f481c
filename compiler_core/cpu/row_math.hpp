// Loops over one contiguous row shared by the row kernels (normalize.cpp, reduce.cpp): several
// independent accumulators, because the compiler may not reorder a single running sum or max,
// which would serialize on the operation's latency.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>

#include "cpu/vector_math.hpp"

namespace esg::cpu {

// sum of term(j) for j < n in double, over 8 partial sums.
template <class Term>
ESG_VM_INLINE double lane_sum(int64_t n, Term term) {
  constexpr int kLanes = 8;
  double lanes[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += term(j + l);
  double sum = 0;
  for (; j < n; ++j) sum += term(j);
  for (double l : lanes) sum += l;
  return sum;
}

// The sums of x[j] - shift and of its square, in one pass: 16 f32 partial sums (two AVX2
// vectors, twice double's width) within blocks of 512 elements, the blocks added in double, so
// no f32 partial sum adds more than 32 terms and the error stays near 32 f32 ulps for any n.
ESG_VM_INLINE void shifted_sums(const float* x, float shift, int64_t n, double* sum, double* squares) {
  constexpr int kLanes = 16;
  constexpr int64_t kBlock = 512;
  *sum = *squares = 0;
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t end = std::min(n, start + kBlock);
    float s[kLanes] = {}, q[kLanes] = {};
    int64_t j = start;
    for (; j + kLanes <= end; j += kLanes)
      for (int l = 0; l < kLanes; ++l) {
        const float d = x[j + l] - shift;
        s[l] += d;
        q[l] += d * d;
      }
    double bs = 0, bq = 0;
    for (; j < end; ++j) bs += x[j] - shift, bq += double(x[j] - shift) * (x[j] - shift);
    for (int l = 0; l < kLanes; ++l) bs += s[l], bq += q[l];
    *sum += bs, *squares += bq;
  }
}

// The largest (kMax) or smallest of z[0..n): 8 running extremes, so the loop vectorizes. A NaN
// is passed over, as std::max and std::min pass it when it comes second.
template <bool kMax>
ESG_VM_INLINE float row_extreme(const float* z, int64_t n) {
  constexpr int kLanes = 8;
  constexpr float kStart = kMax ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  float lanes[kLanes];
  std::fill_n(lanes, kLanes, kStart);
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] = (kMax ? lanes[l] < z[j + l] : z[j + l] < lanes[l]) ? z[j + l] : lanes[l];
  float m = kStart;
  for (; j < n; ++j) m = kMax ? std::max(m, z[j]) : std::min(m, z[j]);
  for (float l : lanes) m = kMax ? std::max(m, l) : std::min(m, l);
  return m;
}
ESG_VM_INLINE float row_max(const float* z, int64_t n) { return row_extreme<true>(z, n); }
ESG_VM_INLINE float row_min(const float* z, int64_t n) { return row_extreme<false>(z, n); }

}  // namespace esg::cpu
