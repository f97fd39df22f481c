// The one path from a generated C op function to the graph core. A call collects the op's
// inputs, bodies and attributes in schema order (inline, without allocating for the usual
// small counts) and adds the node when finished; the first problem found is the call's error.
#pragma once
#include <cstring>
#include <string>
#include <vector>

#include "c_api/handles.hpp"

namespace esg::capi {

// Fills a caller's options struct of `size` bytes from the library's defaults `d` (`known`
// bytes): fields the caller's (older) struct lacks are left out, fields the library does not
// know (a newer caller) are zeroed, which is what read_options expects for "unchanged".
void init_options(void* options, size_t size, const void* d, size_t known);
// Copies a caller's options over the defaults in `dst` (`known` bytes), checking the struct's
// version; throws ir::Error naming `function` when the caller set a field this library lacks.
void read_options(void* dst, size_t known, const void* src, const char* function);

template <class T, size_t N>
class InlineVec {
 public:
  void push_back(const T& v) {
    if (n_ < N) inline_[n_] = v;
    else heap_.push_back(v);
    ++n_;
  }
  // Contiguous view; moves everything to the heap once past the inline capacity.
  ir::Span<T> span() {
    if (n_ <= N) return {inline_, n_};
    if (heap_.size() != n_) heap_.insert(heap_.begin(), inline_, inline_ + N);
    return {heap_.data(), n_};
  }
  size_t size() const { return n_; }

 private:
  T inline_[N];
  std::vector<T> heap_;
  size_t n_ = 0;
};

class OpCall {
 public:
  // `builder`: the generators' (ops with no tensor input); one already destroyed is refused.
  OpCall(const ir::OpSchema& op, const char* function, esg_builder* builder = nullptr)
      : op_(op), function_(function), builder_(builder && builder_alive(builder) ? builder : nullptr),
        builder_destroyed_(builder && !builder_) {}

  // Copies the caller's options over the defaults in `dst`, checking the struct's version.
  bool read_options(void* dst, size_t known, const void* src);

  void input(esg_tensor t);           // a required input
  void optional_input(esg_tensor t);  // {0} means absent
  void inputs(const esg_tensor* ts, size_t n);
  void body(esg_subgraph s);

  void attr(int64_t v) { attrs_.push_back(ir::AttrArg::of_int(v)); }
  void attr(double v) { attrs_.push_back(ir::AttrArg::of_float(v)); }
  void attr(bool v) { attrs_.push_back(ir::AttrArg::of_bool(v)); }
  void attr(esg_dtype v) { attrs_.push_back(ir::AttrArg::of_dtype(static_cast<ir::DType>(v))); }
  void attr(const char* v) { attrs_.push_back(v ? ir::AttrArg::of_string(v) : ir::AttrArg{}); }
  void attr(esg_i64_list v) { attrs_.push_back(ir::AttrArg::of_ints(v.data, v.size)); }
  void attr(esg_f64_list v) { attrs_.push_back(ir::AttrArg::of_floats(v.data, v.size)); }
  template <class E>
  void attr_enum(E v) { attrs_.push_back(ir::AttrArg::of_enum(static_cast<int64_t>(v))); }

  esg_tensor finish();
  esg_tensor failed();  // the invalid tensor, after the error was recorded

 private:
  void fail(esg_status status, const std::string& message);
  const char* input_name() const;
  void take(esg_tensor t, size_t element);  // element: the index in a variadic input, or SIZE_MAX

  const ir::OpSchema& op_;
  const char* function_;
  esg_builder* builder_;
  bool builder_destroyed_ = false;
  InlineVec<ir::ValueId, 8> inputs_;
  InlineVec<ir::AttrArg, 8> attrs_;
  InlineVec<ir::RegionId, 2> bodies_;
  size_t next_input_ = 0;  // schema position of the next input
  bool failed_ = false;
};

}  // namespace esg::capi
