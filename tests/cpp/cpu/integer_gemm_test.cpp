// The integer GEMM (cpu/integer_gemm.hpp), both kernels where the CPU runs them, against sums in
// int64 wrapped to int32: row counts around the micro-kernel's 4 (VNNI's 8) and the row block's
// 128, depths around the K block's 256 (VNNI's 1024) and odd ones (a group's padding), widths around a panel's 24, u8 and s8 operands at the
// extremes vpmaddubsw would saturate, zero points one for all and one per row or column, a
// range of panels (a thread's share), C rows wider than N (nothing past N written), and sums
// past int32 wrapping around.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "cpu/integer_gemm.hpp"

namespace ig = esg::cpu::integer_gemm;

namespace {

struct Case {
  int64_t m, k, n;
  bool a_signed, b_signed, a_per_row, b_per_column;
  int64_t first = 0, last = -1;  // the columns computed; -1: all
};

// Whether the kernel's result equals the wrapped int64 sums; `extreme`: every element at its
// dtype's largest magnitude.
bool matches(ig::Kernel kernel, const Case& c, bool extreme) {
  std::mt19937 rng(static_cast<unsigned>(c.m * 131 + c.k * 7 + c.n + c.a_signed * 3 + c.b_signed * 5));
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> a(static_cast<size_t>(c.m * c.k)), b(static_cast<size_t>(c.k * c.n));
  for (uint8_t& x : a) x = extreme ? (c.a_signed ? 0x80 : 0xff) : static_cast<uint8_t>(byte(rng));
  for (uint8_t& x : b) x = extreme ? 0x80 : static_cast<uint8_t>(byte(rng));
  std::vector<int32_t> a_zero(static_cast<size_t>(c.a_per_row ? c.m : 1)), b_zero(static_cast<size_t>(c.b_per_column ? c.n : 1));
  for (int32_t& z : a_zero) z = extreme ? 0 : c.a_signed ? byte(rng) - 128 : byte(rng);
  for (int32_t& z : b_zero) z = extreme ? 0 : c.b_signed ? byte(rng) - 128 : byte(rng);
  const ig::Operand lhs{a.data(), c.a_signed, c.k, a_zero.data(), c.a_per_row, false};
  const ig::Operand rhs{b.data(), c.b_signed, c.n, b_zero.data(), false, c.b_per_column};
  std::vector<uint8_t> packed(ig::packed_bytes(kernel, c.k, c.n));
  ig::pack(kernel, rhs, c.k, c.n, packed.data());
  const int64_t ldc = c.n + 5, last = c.last < 0 ? c.n : c.last;
  constexpr int32_t kUntouched = 0x5a5a5a5a;
  std::vector<int32_t> out(static_cast<size_t>(c.m * ldc), kUntouched);
  ig::multiply(kernel, lhs, c.m, packed.data(), c.k, c.n, c.first, last, out.data(), ldc);
  auto value = [](uint8_t byte, bool is_signed) { return is_signed ? int64_t{static_cast<int8_t>(byte)} : int64_t{byte}; };
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      const int32_t got = out[static_cast<size_t>(i * ldc + j)];
      if (j < c.first || j >= last) {
        if (got != kUntouched) return false;
        continue;
      }
      int64_t sum = 0;
      for (int64_t p = 0; p < c.k; ++p)
        sum += (value(a[static_cast<size_t>(i * c.k + p)], c.a_signed) - a_zero[static_cast<size_t>(c.a_per_row ? i : 0)]) *
               (value(b[static_cast<size_t>(p * c.n + j)], c.b_signed) - b_zero[static_cast<size_t>(c.b_per_column ? j : 0)]);
      if (got != static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(sum)))) return false;
    }
  return true;
}

// The kernels this CPU runs (each is checked where it can run: VNNI on CPUs with AVX512-VNNI).
std::vector<ig::Kernel> kernels() {
  std::vector<ig::Kernel> here;
  for (const ig::Kernel kernel : {ig::Kernel::Pairs, ig::Kernel::Vnni})
    if (ig::available(kernel)) here.push_back(kernel);
  if (here.size() < 2) MESSAGE("this CPU runs " << here.size() << " of the integer GEMM's 2 kernels; the others are not checked here");
  return here;
}

}  // namespace

TEST_CASE("the integer GEMM's sums are exact, at every edge of its blocks, for u8 and s8 operands") {
  for (const ig::Kernel kernel : kernels())
  for (const int64_t m : {1, 5, 9, 130})
    for (const int64_t k : {1, 7, 257, 600, 1030})  // past pairs' 256-deep blocks and VNNI's 1024
      for (const int64_t n : {1, 23, 25, 50})
        for (const bool a_signed : {false, true})
          for (const bool b_signed : {false, true}) {
            const Case c{m, k, n, a_signed, b_signed, m % 2 == 1, n % 2 == 0};
            CAPTURE(m);
            CAPTURE(k);
            CAPTURE(n);
            CAPTURE(a_signed);
            CAPTURE(b_signed);
            CAPTURE(static_cast<int>(kernel));
            CHECK(matches(kernel, c, false));
          }
}

TEST_CASE("the integer GEMM does not saturate where u8 x s8 pairs overflow 16 bits, and wraps past int32") {
  for (const ig::Kernel kernel : kernels()) {
    CAPTURE(static_cast<int>(kernel));
    // 255 x -128 twice is -65280, beyond int16: vpmaddubsw's pairs would saturate.
    CHECK(matches(kernel, {4, 768, 24, false, true, false, false}, true));
    CHECK(matches(kernel, {4, 768, 24, true, true, false, false}, true));
    // 255 x -128 x 66000 is below -2^31: the sum wraps as int32's does.
    CHECK(matches(kernel, {1, 66000, 24, false, true, false, false}, true));
    // u8 weights at 255 (shifted to s8 127 for VNNI) against u8 rows at 255.
    CHECK(matches(kernel, {3, 1000, 30, false, false, true, true}, true));
  }
}

TEST_CASE("the integer GEMM computes a range of panels, leaving the other columns untouched") {
  for (const ig::Kernel kernel : kernels()) {
    CAPTURE(static_cast<int>(kernel));
    CHECK(matches(kernel, {9, 300, 100, false, true, false, true, 24, 72}, false));
    CHECK(matches(kernel, {9, 300, 100, true, false, true, false, 96, 100}, false));
    CHECK(matches(kernel, {9, 300, 100, false, false, false, false, 0, 24}, false));
  }
}

TEST_CASE("packed integer weights take whole zero-padded panels of 24 columns, in pairs of rows less their zero points") {
  CHECK(ig::packed_bytes(ig::Kernel::Pairs, 4, 24) == 2 * 24 * 2 * sizeof(int16_t));
  CHECK(ig::packed_bytes(ig::Kernel::Pairs, 3, 25) == 2 * 2 * 48 * sizeof(int16_t));  // K padded to a pair, N to a panel
  const std::vector<uint8_t> b = {1, 2, 3, 4, 5, 6};  // 3 x 2, u8
  const int32_t zero = 1;
  std::vector<uint8_t> packed(ig::packed_bytes(ig::Kernel::Pairs, 3, 2), 0xff);
  ig::pack(ig::Kernel::Pairs, {b.data(), false, 2, &zero, false, false}, 3, 2, packed.data());
  const int16_t* p = reinterpret_cast<const int16_t*>(packed.data());
  CHECK(p[0] == 0);  // b[0][0] - 1, then b[1][0] - 1: column 0's first pair
  CHECK(p[1] == 2);
  CHECK(p[2] == 1);  // column 1's
  CHECK(p[3] == 3);
  CHECK(p[4] == 0);  // column 2: padding
  CHECK(p[48] == 4);  // the second pair: row 2, and the padding row past K
  CHECK(p[49] == 0);
}

TEST_CASE("VNNI's packed weights: quads of rows as s8, then each column's sum and zero point, never the pairs' size") {
  // 3 x 2 u8 less 128: K padded to a quad, N to a panel; then 2 int32 a column and a 32-byte tag.
  CHECK(ig::packed_bytes(ig::Kernel::Vnni, 3, 2) == 24 * 4 + 24 * 2 * sizeof(int32_t) + 32);
  for (int64_t k = 1; k < 200; ++k)
    for (const int64_t n : {1, 24, 25, 100}) CHECK(ig::packed_bytes(ig::Kernel::Vnni, k, n) != ig::packed_bytes(ig::Kernel::Pairs, k, n));
  const std::vector<uint8_t> b = {1, 2, 3, 4, 200, 6};  // 3 x 2, u8
  const int32_t zero = 1;
  std::vector<uint8_t> packed(ig::packed_bytes(ig::Kernel::Vnni, 3, 2), 0xff);
  ig::pack(ig::Kernel::Vnni, {b.data(), false, 2, &zero, false, false}, 3, 2, packed.data());
  const int8_t* q = reinterpret_cast<const int8_t*>(packed.data());
  CHECK((q[0] == 1 - 128 && q[1] == 3 - 128 && q[2] == 200 - 128 && q[3] == 0));  // column 0's quad, past K 0
  CHECK((q[4] == 2 - 128 && q[5] == 4 - 128 && q[6] == 6 - 128 && q[7] == 0));
  CHECK(q[8] == 0);  // column 2: padding
  const int32_t* columns = reinterpret_cast<const int32_t*>(packed.data() + 24 * 4);
  CHECK(columns[0] == (1 + 3 + 200 - 3 * 128) - 3 * (1 - 128));  // sum of b less K times the zero point, as s8
  CHECK(columns[1] == 1 - 128);
}
