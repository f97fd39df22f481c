// Runs one YAML example through the reference evaluator and compares every output with the
// example's expected values (used by the generated op_values_test.cpp).
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "eval/evaluate.hpp"
#include "ir/builder.hpp"

namespace esg::test {

class ExampleCase {
 public:
  explicit ExampleCase(const ir::OpSchema& op) : op_(op), attrs_(op.attrs.size()) {}

  ExampleCase& input(ir::DType t, const ir::Shape& s, const std::vector<double>& values) {
    inputs_.push_back(b_.add_input("in" + std::to_string(args_.size()), t, s));
    args_.emplace_back(t, s);
    for (size_t i = 0; i < values.size(); ++i) eval::store_f(args_.back(), static_cast<int64_t>(i), values[i]);
    return *this;
  }
  ExampleCase& absent() {
    inputs_.push_back(ir::kNone);
    return *this;
  }
  ExampleCase& attr(size_t i, const ir::AttrArg& a) {
    attrs_[i] = a;
    return *this;
  }
  ExampleCase& ints(size_t i, std::vector<int64_t> v) {
    lists_.push_back(std::move(v));
    attrs_[i] = ir::AttrArg::of_ints(lists_.back().data(), lists_.back().size());
    return *this;
  }
  ExampleCase& expect(ir::DType t, const ir::Shape& s, const std::vector<double>& values) {
    expected_.push_back({t, s, values});
    return *this;
  }

  void run() {
    const ir::NodeId n = b_.add_op(op_, inputs_, attrs_);
    std::vector<ir::ValueId> outs;
    for (uint32_t i = 0; i < b_.graph().nodes[n].num_outputs; ++i) outs.push_back(b_.graph().nodes[n].first_output + i);
    const auto g = b_.finish(outs);
    const std::vector<eval::HostTensor> got = eval::evaluate(*g, args_);
    REQUIRE(got.size() == expected_.size());
    for (size_t k = 0; k < got.size(); ++k) {
      CAPTURE(k);
      CHECK(got[k].dtype == expected_[k].dtype);
      CHECK(got[k].shape == expected_[k].shape);
      const bool floating = ir::dtype_is_float(got[k].dtype);
      // f32 math through double: a few ulps for transcendental functions; exact otherwise.
      const double rtol = got[k].dtype == ir::DType::F16 || got[k].dtype == ir::DType::BF16 ? 1e-2 : 1e-6;
      for (size_t i = 0; i < expected_[k].values.size(); ++i) {
        CAPTURE(i);
        const double want = expected_[k].values[i], have = eval::load_f(got[k], static_cast<int64_t>(i));
        if (floating) CHECK(std::abs(have - want) <= 1e-6 + rtol * std::abs(want));
        else CHECK(have == want);
      }
    }
  }

 private:
  struct Expected {
    ir::DType dtype;
    ir::Shape shape;
    std::vector<double> values;
  };
  const ir::OpSchema& op_;
  ir::Builder b_;
  std::vector<ir::ValueId> inputs_;
  std::vector<eval::HostTensor> args_;
  std::vector<ir::AttrArg> attrs_;
  std::vector<std::vector<int64_t>> lists_;
  std::vector<Expected> expected_;
};

}  // namespace esg::test
