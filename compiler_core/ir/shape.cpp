#include "ir/shape.hpp"

#include "ir/error.hpp"

namespace esg::ir {

static void check_rank(size_t rank) {
  if (rank > static_cast<size_t>(kMaxRank))
    throw Error(ErrorCode::Shape, "rank " + std::to_string(rank) + " exceeds the maximum of " +
                                      std::to_string(kMaxRank));
}

Shape::Shape(std::initializer_list<Dim> dims) {
  check_rank(dims.size());
  for (Dim d : dims) dims_[rank_++] = d;
}

Shape Shape::from(const Dim* dims, size_t rank) {
  check_rank(rank);
  Shape s;
  for (size_t i = 0; i < rank; ++i) s.dims_[i] = dims[i];
  s.rank_ = static_cast<uint8_t>(rank);
  return s;
}

void Shape::push_back(Dim d) {
  check_rank(rank_ + 1u);
  dims_[rank_++] = d;
}

void Shape::resize(size_t rank) {
  check_rank(rank);
  for (size_t i = rank_; i < rank; ++i) dims_[i] = 1;
  rank_ = static_cast<uint8_t>(rank);
}

bool Shape::is_static() const {
  for (Dim d : *this)
    if (dim_is_symbolic(d)) return false;
  return true;
}

int64_t Shape::num_elements() const {
  if (!is_static()) return -1;
  const int64_t n = static_elements();
  if (n < 0) throw Error(ErrorCode::Shape, "a shape of more than 2^48 elements (the limit)");
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (rank_ != o.rank_) return false;
  for (size_t i = 0; i < rank_; ++i)
    if (dims_[i] != o.dims_[i]) return false;
  return true;
}

}  // namespace esg::ir
