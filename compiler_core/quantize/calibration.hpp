// What a tensor's values over the calibration batches say its quantization range should be:
// the extremes (min-max), a share of the values (percentile), or the clipping threshold whose
// quantized histogram loses least information (entropy, the KL divergence TensorRT chose).
// Pure arithmetic on host floats: the quantizer (quantizer.hpp) feeds it what runs give.
#pragma once
#include <cstdint>
#include <vector>

namespace esg::quantize {

enum class Method { MinMax, Percentile, Entropy };

struct Range {
  double lo = 0, hi = 0;
};

// One tensor's observations. First every batch through observe_extremes; then, for the methods
// that need it, every batch again through observe_histogram, whose bins span the extremes.
class Observer {
 public:
  void observe_extremes(const float* x, int64_t n);
  // Starts the histograms: `bins` over [0, max |x|] for the negative values and the others apart.
  void start_histogram(int64_t bins);
  void observe_histogram(const float* x, int64_t n);

  double min() const { return min_; }
  double max() const { return max_; }
  bool seen() const { return seen_; }

  // The range to quantize to (0 inside it). `percentile`: the share of values inside, in
  // percent; `symmetric`: [-t, t] for a signed code with as many levels each side.
  Range choose(Method method, double percentile, bool symmetric) const;

 private:
  double threshold_of_share(double share) const;  // |x| below which `share` of the values lie
  double tail(const std::vector<double>& hist, double share) const;  // a side's value past which `share` of all lie
  double entropy_threshold(int levels) const;
  bool seen_ = false;
  double min_ = 0, max_ = 0;
  double width_ = 0;  // a bin's width
  std::vector<double> negative_, positive_;  // counts of |x| by bin
  double count_ = 0, zeros_ = 0;  // values histogrammed, and of them those exactly 0
};

// The scale and zero point of a range quantized to 8 bits: u8 over [lo, hi] (asymmetric),
// else i8 over [-m, m] with zero point 0 (symmetric; m the larger magnitude).
struct Quantization {
  float scale = 1;
  int32_t zero_point = 0;
  bool is_signed = false;
};
Quantization quantization_of(Range r, bool symmetric);

}  // namespace esg::quantize
