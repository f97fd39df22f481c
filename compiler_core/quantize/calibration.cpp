#include "quantize/calibration.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>

namespace esg::quantize {

void Observer::observe_extremes(const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    if (!std::isfinite(v)) continue;  // a NaN quantizes to 0, an infinity saturates, wherever the range lies
    if (!seen_) min_ = max_ = v, seen_ = true;
    min_ = std::min(min_, v), max_ = std::max(max_, v);
  }
}

void Observer::start_histogram(int64_t bins) {
  const double top = std::max(std::fabs(min_), std::fabs(max_));
  width_ = top > 0 ? top / static_cast<double>(bins) : 0;
  negative_.assign(static_cast<size_t>(bins), 0);
  positive_.assign(static_cast<size_t>(bins), 0);
  count_ = zeros_ = 0;
}

void Observer::observe_histogram(const float* x, int64_t n) {
  const size_t last = positive_.size() - 1;
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    if (!std::isfinite(v)) continue;
    const double a = std::fabs(v);
    const size_t bin = width_ > 0 ? static_cast<size_t>(std::min(a / width_, static_cast<double>(last))) : 0;
    (v < 0 ? negative_ : positive_)[bin] += 1;
    count_ += 1;
    zeros_ += v == 0;
  }
}

double Observer::threshold_of_share(double share) const {
  const double wanted = share * count_;
  double below = 0;
  for (size_t b = 0; b < positive_.size(); ++b) {
    const double here = negative_[b] + positive_[b];
    if (below + here >= wanted && here > 0)  // the share is reached inside this bin: interpolate
      return width_ * (static_cast<double>(b) + (wanted - below) / here);
    below += here;
  }
  return width_ * static_cast<double>(positive_.size());
}

double Observer::tail(const std::vector<double>& hist, double share) const {
  const double allowed = share * count_;  // values that may lie past the result
  double beyond = 0;
  for (size_t b = hist.size(); b-- > 0;) {
    if (beyond + hist[b] > allowed) return width_ * (static_cast<double>(b) + 1 - (allowed - beyond) / hist[b]);
    beyond += hist[b];
  }
  return 0;
}

// The threshold t whose clipped histogram of |x| over [0, t], merged into `levels` codes, is
// closest to the unclipped one in KL divergence: past t the outliers are saturated, below it
// the codes are finer. Exact zeros (a Relu's half of its values, padding) are left out: the zero
// point holds them exactly whatever the range, and as the first bin's spike they would make every
// threshold whose first code spans several bins look costly.
double Observer::entropy_threshold(int levels) const {
  const size_t bins = positive_.size();
  std::vector<double> h(bins);
  for (size_t b = 0; b < bins; ++b) h[b] = negative_[b] + positive_[b];
  h[0] -= zeros_;
  if (bins <= static_cast<size_t>(levels) || count_ == zeros_) return width_ * static_cast<double>(bins);
  std::vector<double> above(bins + 1, 0);  // above[i]: the mass of bins i and up
  for (size_t b = bins; b-- > 0;) above[b] = above[b + 1] + h[b];
  size_t best = bins;
  double best_kl = std::numeric_limits<double>::infinity();
  std::vector<double> q;
  for (size_t i = static_cast<size_t>(levels); i <= bins; ++i) {
    // The reference: the first i bins, the mass past them saturated into the last one.
    const double p_total = above[0];
    // The candidate: each of `levels` groups of those bins holds its mass, spread evenly over
    // the group's non-empty bins (an empty bin stays empty once quantized).
    q.assign(i, 0);
    double q_total = 0;
    for (int j = 0; j < levels; ++j) {
      const size_t start = i * static_cast<size_t>(j) / static_cast<size_t>(levels);
      const size_t end = i * static_cast<size_t>(j + 1) / static_cast<size_t>(levels);
      double mass = 0, filled = 0;
      for (size_t k = start; k < end; ++k) mass += h[k], filled += h[k] > 0;
      for (size_t k = start; k < end; ++k)
        if (h[k] > 0) q[k] = mass / filled;
      q_total += mass;
    }
    // A threshold must keep most values inside its range: where the saturated ones outweigh them,
    // the folded spike dominates both histograms and their KL stops measuring the loss (with few
    // values, one value below the threshold and the rest folded onto it compare as equal).
    if (q_total <= 0 || above[i] > q_total) continue;
    double kl = 0;
    for (size_t k = 0; k < i; ++k) {
      const double p = k + 1 == i ? h[k] + above[i] : h[k];
      if (p <= 0) continue;
      // The saturated last bin may hold mass where the quantized one is empty: smoothed, so
      // that such a threshold costs much rather than infinitely.
      const double qk = std::max(q[k], 1e-4);
      kl += p / p_total * std::log((p / p_total) / (qk / q_total));
    }
    // Ties go to the wider range: with few values, many thresholds quantize them equally well
    // (each group holds one value), and clipping is then a loss nothing measured justifies.
    if (kl <= best_kl + 1e-9) best_kl = std::min(kl, best_kl), best = i;
  }
  return width_ * static_cast<double>(best);
}

Range Observer::choose(Method method, double percentile, bool symmetric) const {
  Range r{std::min(min_, 0.0), std::max(max_, 0.0)};
  if (!seen_ || method == Method::MinMax) {
    if (symmetric) r.hi = std::max(-r.lo, r.hi), r.lo = -r.hi;
    return r;
  }
  if (method == Method::Percentile) {
    if (symmetric) {
      const double t = threshold_of_share(percentile / 100);
      return {-t, t};
    }
    const double outside = (1 - percentile / 100) / 2;  // each side's share beyond the range
    return {std::max(r.lo, -tail(negative_, outside)), std::min(r.hi, tail(positive_, outside))};
  }
  // Entropy: a threshold for |x|, over as many codes as one side of the range gets.
  const bool one_sided = !symmetric && min_ >= 0;
  const double t = entropy_threshold(one_sided ? 256 : 128);
  if (symmetric) return {-t, t};
  return {std::max(r.lo, -t), std::min(r.hi, t)};
}

Quantization quantization_of(Range r, bool symmetric) {
  Quantization q;
  q.is_signed = symmetric;
  if (symmetric) {
    const double m = std::max(std::fabs(r.lo), std::fabs(r.hi));
    q.scale = static_cast<float>(m / 127);
    if (!(q.scale >= FLT_MIN)) q.scale = 1.0f;  // all zeros, or a range no f32 scale resolves: every value's code is 0
    return q;
  }
  const double lo = std::min(r.lo, 0.0), hi = std::max(r.hi, 0.0);
  q.scale = static_cast<float>((hi - lo) / 255);
  if (!(q.scale >= FLT_MIN)) {  // as above: every value's code is the zero point
    q.scale = 1.0f;
    return q;
  }
  q.zero_point = static_cast<int32_t>(std::clamp(std::nearbyint(-lo / q.scale), 0.0, 255.0));
  return q;
}

}  // namespace esg::quantize
