#include "eval/elementwise.hpp"

#include "eval/indexing.hpp"

namespace esg::eval {

void run_elementwise(const ElementwiseFn& fn, const std::vector<const TensorRef*>& inputs,
                     const std::vector<double>& attrs, const TensorRef& out) {
  bool floating = ir::dtype_is_float(out.dtype);
  std::vector<ir::Shape> shapes;
  for (const TensorRef* t : inputs) {
    floating = floating || ir::dtype_is_float(t->dtype);
    shapes.push_back(t->shape);
  }
  BroadcastWalk walk(out.shape, shapes);
  const int64_t n = out.size();
  std::vector<double> f(inputs.size());
  std::vector<int64_t> i(inputs.size());
  for (int64_t e = 0; e < n; ++e, walk.next()) {
    if (floating) {
      for (size_t k = 0; k < inputs.size(); ++k) f[k] = load_f(*inputs[k], walk.offset(k));
      store_f(out, e, fn.f(f.data(), attrs.data()));
    } else {
      for (size_t k = 0; k < inputs.size(); ++k) i[k] = load_i(*inputs[k], walk.offset(k));
      store_i(out, e, fn.i(i.data(), attrs.data()));
    }
  }
}

}  // namespace esg::eval
