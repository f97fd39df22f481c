// The functions compute expressions may use (op_defs/README.md), over the evaluator's compute
// domains: double for float dtypes, uint64 for u64, int64 for other integers and bool. Mixed operands take their
// common type, as C++ arithmetic does.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace esg::eval {

template <class A, class B>
using Common = std::common_type_t<A, B>;

// An expression's value in the op's compute type. An integer op whose expression went through a
// double (an f64 attribute such as clip's bounds, which may be infinite) saturates into the
// integer's range, NaN to 0: converting an out-of-range double to an integer is undefined in C++.
template <class C, class X>
C e_result(X x) {
  if constexpr (std::is_integral_v<C> && std::is_floating_point_v<X>) {
    if (std::isnan(x)) return C{0};
    if (x <= static_cast<X>(std::numeric_limits<C>::min())) return std::numeric_limits<C>::min();
    if (x >= static_cast<X>(std::numeric_limits<C>::max())) return std::numeric_limits<C>::max();
  }
  return static_cast<C>(x);
}

// Integer arithmetic wraps around (two's complement), as numpy's and ONNX Runtime's does: in the
// int64 compute domain a signed overflow is undefined behaviour in C++, so signed operands go
// through their unsigned type (docs/reliability.md states the rules). Floats are plain.
template <class C>
constexpr bool kWraps = std::is_integral_v<C> && std::is_signed_v<C>;
template <class C>
using Bits = std::make_unsigned_t<std::conditional_t<std::is_integral_v<C>, C, int>>;
template <class A, class B>
Common<A, B> e_add(A a, B b) {
  using C = Common<A, B>;
  if constexpr (kWraps<C>) return static_cast<C>(static_cast<Bits<C>>(a) + static_cast<Bits<C>>(b));
  else return static_cast<C>(a) + static_cast<C>(b);
}
template <class A, class B>
Common<A, B> e_sub(A a, B b) {
  using C = Common<A, B>;
  if constexpr (kWraps<C>) return static_cast<C>(static_cast<Bits<C>>(a) - static_cast<Bits<C>>(b));
  else return static_cast<C>(a) - static_cast<C>(b);
}
template <class A, class B>
Common<A, B> e_mul(A a, B b) {
  using C = Common<A, B>;
  if constexpr (kWraps<C>) return static_cast<C>(static_cast<Bits<C>>(a) * static_cast<Bits<C>>(b));
  else return static_cast<C>(a) * static_cast<C>(b);
}
template <class T>
T e_neg(T x) {  // the minimum negates to itself
  if constexpr (kWraps<T>) return static_cast<T>(Bits<T>{0} - static_cast<Bits<T>>(x));
  else return -x;
}

template <class A, class B>
Common<A, B> e_min(A a, B b) { return std::min<Common<A, B>>(a, b); }
template <class A, class B>
Common<A, B> e_max(A a, B b) { return std::max<Common<A, B>>(a, b); }
// Integers truncate toward zero; by 0 the result is 0 (as numpy's), and the minimum by -1 wraps
// to the minimum (the one quotient that overflows, which the CPU's division traps on).
template <class A, class B>
Common<A, B> e_div(A a, B b) {
  using C = Common<A, B>;
  if constexpr (std::is_integral_v<C>) {
    if (b == 0) return C{0};
    if constexpr (kWraps<C>)
      if (static_cast<C>(b) == C{-1}) return e_neg(static_cast<C>(a));
    return static_cast<C>(static_cast<C>(a) / static_cast<C>(b));
  } else {
    return static_cast<C>(a) / static_cast<C>(b);
  }
}
template <class C, class A, class B>
Common<A, B> e_select(C c, A a, B b) { return c ? Common<A, B>(a) : Common<A, B>(b); }
// Shifts of unsigned integers, as ONNX's BitShift: by the type's width or more, 0 (a narrow
// type's bits beyond its width go when the result is stored; C++ leaves shifts by 64 or more
// undefined). The op takes no float; a float domain shifts nothing.
template <class A, class B>
Common<A, B> e_shift_left(A a, B b) {
  using C = Common<A, B>;
  if constexpr (std::is_integral_v<C>) {
    const auto by = static_cast<uint64_t>(b);
    return by >= 64 ? C{0} : static_cast<C>(static_cast<uint64_t>(a) << by);
  } else {
    return C{0};
  }
}
template <class A, class B>
Common<A, B> e_shift_right(A a, B b) {
  using C = Common<A, B>;
  if constexpr (std::is_integral_v<C>) {
    const auto by = static_cast<uint64_t>(b);
    return by >= 64 ? C{0} : static_cast<C>(static_cast<uint64_t>(a) >> by);
  } else {
    return C{0};
  }
}
template <class A, class B>
double e_pow(A a, B b) { return std::pow(static_cast<double>(a), static_cast<double>(b)); }

template <class T>
T e_abs(T x) {
  if constexpr (std::is_unsigned_v<T>) return x;
  else return x < 0 ? e_neg(x) : x;  // the minimum stays the minimum
}
template <class T>
T e_sign(T x) {
  if constexpr (std::is_unsigned_v<T>) return x != 0;
  else return static_cast<T>((x > 0) - (x < 0));
}
template <class T>
T e_cast(T x) { return x; }  // the conversion happens when the result is stored
// The value rounded to f32, as a computation in f32 rounds it (quantize_linear divides in f32,
// as ONNX does); integers pass unchanged.
template <class T>
T e_f32(T x) {
  if constexpr (std::is_floating_point_v<T>) return static_cast<T>(static_cast<float>(x));
  else return x;
}
template <class T>
double e_round(T x) { return std::nearbyint(static_cast<double>(x)); }  // half to even
#define ESG_UNARY(name, expr) \
  template <class T>          \
  double name(T v) {          \
    const double x = static_cast<double>(v); \
    return expr;              \
  }
ESG_UNARY(e_exp, std::exp(x))
ESG_UNARY(e_log, std::log(x))
ESG_UNARY(e_sqrt, std::sqrt(x))
ESG_UNARY(e_rsqrt, 1.0 / std::sqrt(x))
ESG_UNARY(e_sin, std::sin(x))
ESG_UNARY(e_cos, std::cos(x))
ESG_UNARY(e_tan, std::tan(x))
ESG_UNARY(e_asin, std::asin(x))
ESG_UNARY(e_acos, std::acos(x))
ESG_UNARY(e_atan, std::atan(x))
ESG_UNARY(e_sinh, std::sinh(x))
ESG_UNARY(e_cosh, std::cosh(x))
ESG_UNARY(e_asinh, std::asinh(x))
ESG_UNARY(e_acosh, std::acosh(x))
ESG_UNARY(e_atanh, std::atanh(x))
ESG_UNARY(e_tanh, std::tanh(x))
ESG_UNARY(e_erf, std::erf(x))
ESG_UNARY(e_sigmoid, 1.0 / (1.0 + std::exp(-x)))
ESG_UNARY(e_floor, std::floor(x))
ESG_UNARY(e_ceil, std::ceil(x))
#undef ESG_UNARY

}  // namespace esg::eval
