// The functions compute expressions may use (op_defs/README.md), in f32 for the CPU backend's
// vectorized elementwise kernels. exp, sigmoid, tanh and erf are written branch-free (selects,
// no calls, no tables) so that a loop over them vectorizes for whatever ISA the caller is
// compiled for; the rest map to the C library, whose f32 functions are correctly rounded or
// close to it.
//
// exp reduces x = n·ln2 + r with |r| <= ln2/2 (Cody–Waite, ln2 split into a short high part so
// n·ln2_hi is exact) and takes expm1(r) from its Taylor series to r^7 (truncation error below
// 2e-8 relative at |r| = ln2/2, under one f32 ulp). exp itself scales by 2^n as two normal
// powers of two built from exponent bits and applied one after the other, so that n from -150
// to 128 (denormal results, results near FLT_MAX) needs no special case; sigmoid, whose result
// no denormal exp can change, scales once. NaN is passed through by a final select; the
// reduction itself runs on a NaN-free argument so no float-to-int conversion ever sees a NaN.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

// Loops over these functions (the generated rows, softmax) are built for baseline x86-64, for
// x86-64-v3 (AVX2, FMA) and for x86-64-v4 (AVX-512: half the instructions per element, which is
// what bounds exp and tanh; 1.7x on this machine's Zen 4 even though it splits 512-bit
// operations in two); the dynamic loader picks the clone this CPU runs (GCC's function
// multiversioning). The level, not a CPU name: an "arch=haswell" clone runs on Haswells only.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ESG_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define ESG_CPU_CLONED 1
#else
#define ESG_CPU_CLONES
#endif

// Inlined into every loop that uses them even where GCC's size heuristics would not: a call
// stops the loop from vectorizing.
#define ESG_VM_INLINE inline __attribute__((always_inline))

namespace esg::cpu::vm {

ESG_VM_INLINE float from_bits(uint32_t i) {
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
}

// a·b + c rounded once. The project is built without contracting products and sums on its own
// (-ffp-contract=off: every operation rounds as written, so a fused group computes what its ops
// unfused would); the polynomials here ask for their fused multiply-adds. One instruction in the
// x86-64-v3/v4 clones, on Arm and wherever the build targets FMA; a call to the C library's exact
// fmaf in the baseline x86-64 clone, which CPUs from before 2013 run. A build without clones
// for a target without FMA (clang on x86-64 by default) rounds twice instead, and keeps its loops
// vectorized: every row of that build computes alike, fused or not.
ESG_VM_INLINE float fma(float a, float b, float c) {
#if defined(ESG_CPU_CLONED) || defined(__FMA__) || defined(__aarch64__)
  return __builtin_fmaf(a, b, c);
#else
  return a * b + c;
#endif
}

// c0 + x·(c1 + x·(c2 + …)) by Horner's rule, one fused multiply-add per coefficient.
ESG_VM_INLINE float poly(float, float c) { return c; }
template <class... Rest>
ESG_VM_INLINE float poly(float x, float c, Rest... rest) { return fma(x, poly(x, rest...), c); }

// 2^k for -126 <= k <= 127.
ESG_VM_INLINE float pow2(int32_t k) { return from_bits(static_cast<uint32_t>(k + 127) << 23); }

// Adding it rounds a float below 2^22 to an integer, which then sits in the low bits of the sum.
constexpr float kRoundShift = 12582912.0f;  // 1.5·2^23

// expm1(r) for r = x - n·ln2, n = round(x·log2e).
ESG_VM_INLINE float expm1_reduced(float x, float n) {
  const float r = fma(n, 2.12194440e-4f, fma(n, -0.693359375f, x));  // n·ln2_hi is exact
  return fma(r * r, poly(r, 0.5f, 1.0f / 6, 1.0f / 24, 1.0f / 120, 1.0f / 720, 1.0f / 5040), r);
}

struct Reduced {
  float hi, lo;  // 2^n = hi·lo, both normal: n from -150 (denormal results) to 128 (near FLT_MAX)
  float q;       // expm1(r)
};

// x = n·ln2 + r; x must not be NaN. Arguments are clamped to where exp is finite and not zero
// (beyond them exp is inf or rounds to 0 anyway).
ESG_VM_INLINE Reduced reduce(float x) {
  x = x < -104.0f ? -104.0f : x;
  x = x > 88.75f ? 88.75f : x;
  const float n = fma(x, 1.44269504088896341f, kRoundShift) - kRoundShift;
  const float q = expm1_reduced(x, n);
  const int32_t k = static_cast<int32_t>(n), h = k >> 1;
  return {pow2(h), pow2(k - h), q};
}

// Each result scaled in two steps, the last one last: 2^n alone overflows for n = 128 and
// rounds to 0 for n = -150, where the results themselves are finite or denormal.
ESG_VM_INLINE float exp(float x) {
  const bool nan = x != x;
  const Reduced e = reduce(nan ? 0.0f : x);
  const float y = e.hi * fma(e.lo, e.q, e.lo);
  return nan ? x : y;
}

// 1 / (1 + e^-x), with e^-x scaled once: the argument is clamped to [-86.5, 89], where 2^(n-1)
// is a normal power of two. Below, e^-x would be under 2.6e-38 and 1 + e^-x is 1 anyway; from
// x = -88.73 on, 1 + e^-x overflows and the result is 0 (the true one a denormal under 3e-39).
// Within 3 ulps.
ESG_VM_INLINE float sigmoid(float x) {
  float t = -x > -86.5f ? -x : -86.5f;  // NaN: -86.5, replaced below
  t = t < 89.0f ? t : 89.0f;
  const float shifted = fma(t, 1.44269504088896341f, kRoundShift);  // n in its low mantissa bits
  const float q = expm1_reduced(t, shifted - kRoundShift);
  uint32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  // 2^(n-1), as 2^n alone overflows for n = 128: the low 9 bits of bits + 126 are n + 126.
  const float half_scale = from_bits((bits + 126) << 23);
  const float y = 1.0f / fma(2.0f, fma(half_scale, q, half_scale), 1.0f);
  return x != x ? x : y;
}

// tanh(x) = x·P(x²)/Q(x²), P and Q of degree 4, fitted here for relative error (iterated
// weighted least squares in double, numpy) on [0, 9.02]: 2.1e-8 there, and within 6 ulps once
// evaluated in f32 (the rounding of the two polynomials dominates). From 9.02 on, tanh rounds to
// ±1 in f32. A third of the instructions of the exp-based form, and no float-to-int conversion.
// Beyond ±9.02 the quotient is not used (it may be inf/inf there): no clamp needed. NaN passes.
ESG_VM_INLINE float tanh(float x) {
  const float t = x * x;
  const float p = poly(t, 1.0f, 0.133797288f, 3.49404547e-3f, 2.05835531e-5f, 1.33189877e-8f);
  const float q = poly(t, 1.0f, 0.467130452f, 2.58711223e-2f, 3.28310591e-4f, 7.76202342e-7f);
  const float y = (x / q) * p;
  return std::fabs(x) >= 9.02f ? std::copysign(1.0f, x) : y;
}

// erf from two polynomials fitted here by least squares on Chebyshev nodes (numpy, in double):
// erf(x)/x as a polynomial in x² for |x| <= 1, and erfc(x)·e^(x²) as one in 1/x for 1 < |x| < 4;
// from 4 on erf rounds to ±1 in f32. Within 1.4e-7 of erf (2.3 ulps of 1) everywhere.
ESG_VM_INLINE float erf(float x) {
  const float a = std::fabs(x), z = a * a, u = 1.0f / a;
  const float small = a * poly(z, 1.12837923f, -0.376126379f, 0.112837836f, -0.0268654749f, 0.00522113871f,
                                 -0.000848543888f, 0.000112747381f, -9.68974109e-06f);
  const float g = poly(u, 0.000114669296f, 0.561885715f, 0.0196039155f, -0.371693611f, 0.218765482f, 0.259326607f,
                       -0.561503887f, 0.456214011f, -0.187195152f, 0.0320658349f);
  const float large = fma(-vm::exp(-z), g, 1.0f);
  const float r = std::copysign(a <= 1.0f ? small : a < 4.0f ? large : 1.0f, x);
  return x != x ? x : r;
}

}  // namespace esg::cpu::vm

namespace esg::cpu {

// The expression helpers in the f32 domain: every operand, literal and attribute is a float.
ESG_VM_INLINE float f_abs(float x) { return std::fabs(x); }
ESG_VM_INLINE float f_exp(float x) { return vm::exp(x); }
ESG_VM_INLINE float f_log(float x) { return std::log(x); }
ESG_VM_INLINE float f_sqrt(float x) { return std::sqrt(x); }
ESG_VM_INLINE float f_rsqrt(float x) { return 1.0f / std::sqrt(x); }
ESG_VM_INLINE float f_sin(float x) { return std::sin(x); }
ESG_VM_INLINE float f_cos(float x) { return std::cos(x); }
// libm's: these are rare in models, not worth a polynomial of our own yet.
ESG_VM_INLINE float f_tan(float x) { return std::tan(x); }
ESG_VM_INLINE float f_asin(float x) { return std::asin(x); }
ESG_VM_INLINE float f_acos(float x) { return std::acos(x); }
ESG_VM_INLINE float f_atan(float x) { return std::atan(x); }
ESG_VM_INLINE float f_sinh(float x) { return std::sinh(x); }
ESG_VM_INLINE float f_cosh(float x) { return std::cosh(x); }
ESG_VM_INLINE float f_asinh(float x) { return std::asinh(x); }
ESG_VM_INLINE float f_acosh(float x) { return std::acosh(x); }
ESG_VM_INLINE float f_atanh(float x) { return std::atanh(x); }
ESG_VM_INLINE float f_tanh(float x) { return vm::tanh(x); }
ESG_VM_INLINE float f_sigmoid(float x) { return vm::sigmoid(x); }
ESG_VM_INLINE float f_erf(float x) { return vm::erf(x); }
ESG_VM_INLINE float f_floor(float x) { return std::floor(x); }
ESG_VM_INLINE float f_ceil(float x) { return std::ceil(x); }
ESG_VM_INLINE float f_round(float x) { return std::nearbyint(x); }  // half to even
ESG_VM_INLINE float f_sign(float x) { return static_cast<float>((x > 0) - (x < 0)); }
ESG_VM_INLINE float f_cast(float x) { return x; }
ESG_VM_INLINE float f_f32(float x) { return x; }  // f32 already
// min and max keep the reference's NaN behaviour (std::min/std::max: the first operand wins
// when the comparison is false).
ESG_VM_INLINE float f_min(float a, float b) { return b < a ? b : a; }
ESG_VM_INLINE float f_max(float a, float b) { return a < b ? b : a; }
// Shifts take unsigned integers, which f32 rows never hold (their u8 results are not rows'):
// the rows every compute op has shift nothing.
ESG_VM_INLINE float f_shift_left(float, float) { return 0.0f; }
ESG_VM_INLINE float f_shift_right(float, float) { return 0.0f; }
ESG_VM_INLINE float f_div(float a, float b) { return a / b; }
ESG_VM_INLINE float f_pow(float a, float b) { return std::pow(a, b); }
template <class C>
float f_select(C c, float a, float b) { return c ? a : b; }

}  // namespace esg::cpu
