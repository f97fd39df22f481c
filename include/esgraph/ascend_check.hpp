// esgraph on an Ascend device, checked: a fixed smoke set, each case compiled for the device and
// for the CPU, run on the same random inputs and compared. It is what the first user with
// hardware runs (`python3 -m esgraph ascend-check`, or esg::ascend_check from C++) and sends
// back: the table names the CANN version, the SoC and each case's result.
//
//   const esg::AscendCheck check = esg::ascend_check("ascend");
//   std::fputs(check.table().c_str(), stdout);
//   return check.passed() ? 0 : 1;
//
// Header-only over the C ABI, like esgraph.hpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "esgraph/esgraph.hpp"

namespace esg {

struct AscendCheckCase {
  std::string name;  // what it exercises
  bool passed = false;
  // Refused by name (an UnsupportedError): this device or CANN cannot run what the case needs (a
  // CANN without the kernel API, an operator library without its op, a core version no kernels
  // are built for). Not a failure: nothing ran wrong.
  bool refused = false;
  double max_diff = 0, tolerance = 0;  // the largest |device - cpu| over the outputs, and its bound
  std::string ran;    // how the device ran it: kernels, aclnn ops, capture (from the model's stats)
  std::string error;  // why it did not run, when it did not
};

struct AscendCheck {
  std::string backend;
  std::string device;  // the device's line of the report: SoC, CANN version, AscendCL
  std::vector<AscendCheckCase> cases;

  bool passed() const {
    return !cases.empty() && std::all_of(cases.begin(), cases.end(), [](const AscendCheckCase& c) { return c.passed; });
  }
  // Every case passed or was refused by name, and some were refused: what this device and CANN
  // can run is right.
  bool partial() const {
    return std::any_of(cases.begin(), cases.end(), [](const AscendCheckCase& c) { return c.refused; }) &&
           std::all_of(cases.begin(), cases.end(), [](const AscendCheckCase& c) { return c.passed || c.refused; });
  }
  std::string table() const {
    std::ostringstream out;
    out << "esgraph ascend-check on " << backend << ": " << device << "\n";
    for (const AscendCheckCase& c : cases) {
      char diff[64];
      std::snprintf(diff, sizeof diff, "%.2g (<= %.2g)", c.max_diff, c.tolerance);
      out << (c.passed ? "  pass     " : c.refused ? "  refused  " : "  FAIL     ") << c.name << ": " << (c.error.empty() ? std::string(diff) + "; " + c.ran : c.error)
          << "\n";
    }
    size_t passed = 0, refused = 0;
    for (const AscendCheckCase& c : cases) passed += c.passed, refused += c.refused;
    out << passed << " of " << cases.size() << " passed" << (refused ? ", " + std::to_string(refused) + " refused" : std::string()) << "\n";
    return out.str();
  }
};

namespace detail {

// A case: its f32 inputs' shapes and the outputs it computes from them (f32 too).
struct CheckCase {
  const char* name;
  double tolerance;
  CompileOptions options;
  std::vector<std::vector<int64_t>> shapes;
  std::function<std::vector<Tensor>(GraphBuilder&, const std::vector<Tensor>&)> body;
  // The bound on a 310P, which multiplies f32 in FLOAT16 (aclnnMatmul there refuses to keep
  // FLOAT), when it is looser; 0: the same bound.
  double float16_tolerance = 0;
};

inline std::vector<CheckCase> ascend_check_cases() {
  using Xs = const std::vector<Tensor>&;
  auto elementwise = [](DType t) {
    return [t](GraphBuilder&, Xs x) {
      const Tensor v = cast(x[0], t);
      return std::vector<Tensor>{cast(tanh(v) * v + v, f32)};
    };
  };
  std::vector<CheckCase> cases;
  cases.push_back({"elementwise kernel, f32 (a fused chain)", 1e-5, {}, {{4, 1000}}, elementwise(f32)});
  cases.push_back({"elementwise kernel, f16", 1e-2, {}, {{4, 1000}}, elementwise(f16)});
  cases.push_back({"elementwise kernel, bf16", 6e-2, {}, {{4, 1000}}, elementwise(bf16)});
  cases.push_back({"row kernel, rows longer than the Unified Buffer (layer_norm of 20011, scale and bias)", 1e-4, {},
                   {{3, 20011}, {20011}, {20011}},
                   [](GraphBuilder&, Xs x) { return std::vector<Tensor>{layer_norm(x[0], LayerNormOptions().scale(x[1]).bias(x[2]))}; }});
  // Sums of 128 products: in FLOAT16 (10 bits of mantissa) their error reaches ~2e-2.
  cases.push_back({"matmul (aclnnMatmul)", 1e-3, {}, {{64, 128}, {128, 32}},
                   [](GraphBuilder&, Xs x) { return std::vector<Tensor>{matmul(x[0], x[1])}; }, 5e-2});
  // An f32 convolution multiplies in HFLOAT32 on Atlas A2/A3 (FLOAT16 on 310P), the only
  // cubeMathType CANN documents for FLOAT: 10-11 bits of mantissa over sums of 27 products.
  cases.push_back({"conv2d (aclnnConvolution, NCHW)", 5e-2, {}, {{1, 3, 16, 16}, {8, 3, 3, 3}},
                   [](GraphBuilder&, Xs x) { return std::vector<Tensor>{conv2d(x[0], x[1], Conv2dOptions().pads({1, 1, 1, 1}))}; }});
  cases.push_back({"gather with negative indices (aclnnIndexSelect)", 0, {}, {{6, 5}}, [](GraphBuilder& b, Xs x) {
                     const std::vector<int64_t> at{-1, 0, -6, 3};
                     return std::vector<Tensor>{gather(x[0], b.constant(i64, {4}, at.data(), sizeof(int64_t) * at.size()), GatherOptions().axis(0))};
                   }});
  cases.push_back({"two streams, captured (aclmdlRI)", 1e-3, CompileOptions().streams(2), {{32, 64}, {64, 64}, {32, 64}},
                   [](GraphBuilder&, Xs x) { return std::vector<Tensor>{matmul(tanh(x[0]), x[1]), softmax(exp(x[2]) + 1.0f)}; }});
  // Quantized graphs: the 8-bit values made and read by aclnnCast around generated kernels.
  auto int8_weights = [](GraphBuilder& b, std::vector<int64_t> shape) {
    std::vector<int8_t> w(static_cast<size_t>(std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>())));
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(static_cast<int>(i * 37 % 255) - 127);
    return b.constant(i8, shape, w.data(), w.size());
  };
  auto int8_zero = [](GraphBuilder& b) {
    const int8_t zero = 0;
    return b.constant(i8, {}, &zero, 1);
  };
  // Integer sums, exact: only the f32 steps around them round.
  cases.push_back({"int8 product (aclnnQuantMatmulV5; quantize between casts)", 1e-4, {}, {{16, 64}}, [int8_weights, int8_zero](GraphBuilder& b, Xs x) {
                     const Tensor zero = int8_zero(b);
                     const Tensor q = quantize_linear(x[0], x[0].scalar(0.02), zero);
                     return std::vector<Tensor>{cast(matmul_integer(q, int8_weights(b, {64, 32}), zero, zero), f32) * 2e-4f};
                   }});
  // CANN's convolution gives FLOAT16: a value close to a tie may round one step (0.1) apart.
  cases.push_back({"int8 convolution (aclnnQuantConvolution, requantized after it)", 0.1 + 1e-6, {}, {{1, 4, 10, 10}},
                   [int8_weights, int8_zero](GraphBuilder& b, Xs x) {
                     const Tensor zero = int8_zero(b), scale = x[0].scalar(0.1);
                     const uint8_t y_zero = 3;
                     const Tensor y_zp = b.constant(u8, {}, &y_zero, 1);
                     const Tensor y = quantized_conv2d(quantize_linear(x[0], x[0].scalar(0.02), zero), x[0].scalar(0.02), zero,
                                                       int8_weights(b, {8, 4, 3, 3}), x[0].scalar(0.002), zero, scale, y_zp,
                                                       QuantizedConv2dOptions().pads({1, 1, 1, 1}).min(0));
                     return std::vector<Tensor>{dequantize_linear(y, scale, y_zp)};
                   }});
  // f16 activations and result: 11 bits, over sums of 128 products.
  cases.push_back({"weight-only product, 4 bits (aclnnWeightQuantBatchMatmulV2)", 5e-2, {}, {{4, 128}}, [](GraphBuilder& b, Xs x) {
                     std::vector<uint8_t> codes(32 * 128 / 2);
                     for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i * 73 % 256);
                     const std::vector<float> scales(32 * 4, 0.01f);
                     const Tensor w = b.constant(u8, {32, 4, 16}, codes.data(), codes.size());
                     const Tensor s = b.constant(f32, {32, 4}, scales.data(), scales.size() * sizeof(float));
                     return std::vector<Tensor>{cast(matmul_nbits(cast(x[0], f16), w, s), f32)};
                   }});
  cases.push_back({"host_fallback (a group with atanh, which no device kernel takes, on the host)", 1e-5, CompileOptions().host_fallback(true), {{4, 100}},
                   [](GraphBuilder&, Xs x) { return std::vector<Tensor>{atanh(tanh(x[0]) * 0.5f) + 1.0f}; }});
  return cases;
}

// "ascend: device 0 (SoC), CANN …, AscendCL …", from the model's facts.
inline std::string describe_device(const Facts& f) {
  const std::string soc = f.text("soc");
  return "ascend" + std::string(f.number("simulated") ? " (simulated device)" : "") + ": device " + std::to_string(f.number("device")) +
         (soc.empty() ? "" : " (" + soc + ")") + ", CANN " + f.text("cann_version") + ", AscendCL " + f.text("acl_library");
}

inline std::string describe_run(const esg_model_stats& s) {
  std::ostringstream out;
  out << s.device_kernel_launches << " kernel launches, " << s.library_calls << " aclnn ops, " << s.host_launches << " on the host, "
      << s.streams << (s.streams == 1 ? " stream" : " streams") << (s.captured ? ", captured" : ", replayed");
  return out.str();
}

}  // namespace detail

// Runs the smoke set on `backend` ("ascend", or "ascend-sim" for the simulated device). Each
// case that fails is recorded with its error and the others still run (a kernel compiler that
// is missing fails the kernel cases only); when every case fails with a BackendError the device
// cannot start at all (no AscendCL, no device), and the first error, which names what is
// missing, is thrown.
inline AscendCheck ascend_check(const std::string& backend = "ascend") {
  AscendCheck check;
  check.backend = backend;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<BackendError> backend_errors;
  for (detail::CheckCase& c : detail::ascend_check_cases()) {
    AscendCheckCase r;
    r.name = c.name;
    r.tolerance = c.tolerance;
    GraphBuilder b(c.name);
    std::vector<Tensor> xs;
    for (size_t i = 0; i < c.shapes.size(); ++i) xs.push_back(b.input("x" + std::to_string(i), f32, c.shapes[i]));
    const Graph g = b.build(c.body(b, xs));
    CompileOptions on_device = c.options;
    on_device.backend(backend);
    try {
      const Model device = compile(g, on_device);
      const Facts facts = device.facts();
      if (check.device.empty() && facts.has("soc")) check.device = detail::describe_device(facts);
      if (c.float16_tolerance && facts.has("soc") && facts.text("soc").rfind("Ascend310P", 0) == 0) r.tolerance = c.float16_tolerance;
      const Model cpu = compile(g);
      std::vector<HostTensor> inputs;
      for (const std::vector<int64_t>& shape : c.shapes) {
        HostTensor t(f32, shape);
        float* v = t.data<float>();
        for (size_t k = 0; k < t.count(); ++k) v[k] = normal(rng);
        inputs.push_back(std::move(t));
      }
      const std::vector<HostTensor> got = device.run(inputs), want = cpu.run(inputs);
      for (size_t o = 0; o < want.size(); ++o) {
        const std::vector<float> d = got.at(o).values<float>(), h = want[o].values<float>();  // device, host
        for (size_t k = 0; k < d.size(); ++k)
          r.max_diff = std::max(r.max_diff, std::isnan(d[k]) != std::isnan(h[k]) ? INFINITY : std::isnan(d[k]) ? 0.0 : std::fabs(double(d[k]) - h[k]));
      }
      r.passed = r.max_diff <= r.tolerance;
      r.ran = detail::describe_run(device.stats());
    } catch (const BackendError& e) {
      backend_errors.push_back(e);
      r.error = e.what();
    } catch (const UnsupportedError& e) {
      r.refused = true;
      r.error = e.what();
    } catch (const Error& e) {
      r.error = e.what();
    } catch (const std::exception& e) {  // the check reports; it does not stop at one case
      r.error = e.what();
    }
    check.cases.push_back(std::move(r));
  }
  if (backend_errors.size() == check.cases.size()) throw backend_errors.front();
  if (check.device.empty()) check.device = "no case compiled for the device";
  return check;
}

}  // namespace esg
