#include "eval/elementwise.hpp"

#include <algorithm>

#include "eval/indexing.hpp"

namespace esg::eval {
namespace {

// Float math over inputs that are each of the output's shape or a single element: chunks of
// operands gathered on the stack and one row call per chunk. Tiny tensors are the common case
// of a graph of small ops, so this path allocates nothing.
constexpr size_t kMaxRowInputs = 4;
constexpr int64_t kChunk = 128;

bool run_rows(const ElementwiseFn& fn, const std::vector<const TensorRef*>& inputs, const double* attrs,
              const TensorRef& out) {
  if (inputs.size() > kMaxRowInputs) return false;
  for (const TensorRef* t : inputs)
    if (t->shape != out.shape && t->size() != 1) return false;
  double buf[kMaxRowInputs][kChunk], result[kChunk];
  const double* rows[kMaxRowInputs];
  for (size_t k = 0; k < inputs.size(); ++k) {
    rows[k] = buf[k];
    if (inputs[k]->shape != out.shape) std::fill_n(buf[k], kChunk, load_f(*inputs[k], 0));
  }
  const int64_t n = out.size();
  for (int64_t base = 0; base < n; base += kChunk) {
    const int64_t count = std::min(kChunk, n - base);
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (inputs[k]->shape != out.shape) continue;
      if (inputs[k]->dtype == ir::DType::F32) std::copy_n(inputs[k]->data<float>() + base, count, buf[k]);
      else for (int64_t e = 0; e < count; ++e) buf[k][e] = load_f(*inputs[k], base + e);
    }
    fn.row_f(rows, attrs, result, count);
    if (out.dtype == ir::DType::F32) std::copy_n(result, count, out.data<float>() + base);
    else for (int64_t e = 0; e < count; ++e) store_f(out, base + e, result[e]);
  }
  return true;
}

}  // namespace

void run_elementwise(const ElementwiseFn& fn, const std::vector<const TensorRef*>& inputs, const double* attrs,
                     const TensorRef& out) {
  bool floating = ir::dtype_is_float(out.dtype);
  bool u64 = false;
  for (const TensorRef* t : inputs) {
    floating = floating || ir::dtype_is_float(t->dtype);
    u64 = u64 || t->dtype == ir::DType::U64;
  }
  if (floating && run_rows(fn, inputs, attrs, out)) return;
  std::vector<ir::Shape> shapes;
  for (const TensorRef* t : inputs) shapes.push_back(t->shape);
  BroadcastWalk walk(out.shape, shapes);
  const int64_t n = out.size();
  std::vector<double> f(inputs.size());
  std::vector<int64_t> i(inputs.size());
  std::vector<uint64_t> u(inputs.size());
  for (int64_t e = 0; e < n; ++e, walk.next()) {
    if (floating) {
      for (size_t k = 0; k < inputs.size(); ++k) f[k] = load_f(*inputs[k], walk.offset(k));
      store_f(out, e, fn.f(f.data(), attrs));
    } else if (u64) {  // load_i gives u64's bits; other inputs (a select's condition) convert as in C++
      for (size_t k = 0; k < inputs.size(); ++k) u[k] = static_cast<uint64_t>(load_i(*inputs[k], walk.offset(k)));
      store_i(out, e, static_cast<int64_t>(fn.u(u.data(), attrs)));  // the bits, for a u64 out
    } else {
      for (size_t k = 0; k < inputs.size(); ++k) i[k] = load_i(*inputs[k], walk.offset(k));
      store_i(out, e, fn.i(i.data(), attrs));
    }
  }
}

}  // namespace esg::eval
