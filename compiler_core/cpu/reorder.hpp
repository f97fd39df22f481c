// Copies of a value between memory formats (schedule/format.hpp): row-major and blocked channels
// (nChw8c, nChw16c, …), any way round; what the plan's reorder launches run. A blocked result's
// padding channels are written as zeros.
#pragma once
#include <memory>

#include "eval/kernels.hpp"
#include "schedule/format.hpp"

namespace esg::cpu {

// A reorder launch bound once: an f32 value of rank 3 to 5 through a oneDNN reorder primitive
// made for one image of it (vectorized; a large value's images split over at most `threads` of
// the run's pool), anything else element by element.
class Reorder {
 public:
  Reorder(const ir::Shape& shape, ir::DType dtype, schedule::Format from, schedule::Format to, int threads);
  ~Reorder();
  Reorder(Reorder&&) noexcept;
  Reorder& operator=(Reorder&&) noexcept;
  // `from` and `to` hold the shape and dtype bound, in the formats bound.
  void run(const eval::TensorRef& from, const eval::TensorRef& to, const eval::Parallel* parallel) const;

 private:
  struct Primitive;
  schedule::Format from_, to_;
  std::unique_ptr<Primitive> primitive_;  // null: element by element
};

// Zeros the padding channels of `t`, a value in blocked format `f` (none when unpadded): what a
// kernel that computed whole blocks leaves there is not the format's zeros.
void zero_padding(const eval::TensorRef& t, schedule::Format f);

}  // namespace esg::cpu
