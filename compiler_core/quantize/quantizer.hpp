// Post-training quantization of a float graph: the graph prepared as a compile would (affine
// layers folded into their convolutions), its convolutions, products, residual sums and max
// pools chosen (sites.hpp), the activations' ranges calibrated by running the float graph on
// the caller's batches (calibration.hpp), the QDQ form written (qdq.hpp), and each quantized
// op's result compared with the float graph's on the same batches. The result is a graph like
// any other: it compiles onto the integer kernels (passes/quantized.cpp), saves, and exports
// to an ONNX QDQ file.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "eval/host_tensor.hpp"
#include "quantize/calibration.hpp"
#include "runtime/compile_options.hpp"

namespace esg::quantize {

struct Options {
  Method method = Method::MinMax;
  double percentile = 99.99;  // Percentile: the share of each activation's values kept inside its range
  int64_t bins = 2048;        // Percentile and Entropy: the histogram's bins over [0, max |x|]
  bool per_channel = true;    // weights: a scale per output channel, else one per tensor
  bool symmetric = false;     // activations: i8 around 0, else u8 with a zero point
  std::vector<std::string> keep_float;  // node names, or op names, left in f32
  // Weight-only (2, 4 or 8; 0: off): each product's constant weights as codes of this many bits
  // in blocks of `block_size` along K (matmul_nbits), symmetric or not as `symmetric` says; the
  // activations stay f32, and calibration batches serve the report only.
  int weight_bits = 0;
  int64_t block_size = 32;
};

// One quantized op: its result's quantization and what quantizing cost there, over the
// calibration batches, against the float graph (errors accumulate from the layers before).
struct Layer {
  std::string name, op;
  bool quantized_result = false;  // its result is stored as codes (else it stays f32)
  double scale = 0;               // the result's, when quantized_result
  int64_t zero_point = 0;
  double min = 0, max = 0;        // the result's range over the batches in the float graph
  double max_error = 0;           // the largest |quantized - float| of the result
  double sqnr_db = 0;             // 10 log10(sum float² / sum (quantized - float)²); +inf when exact
};

struct Result {
  std::unique_ptr<ir::Graph> graph;
  std::vector<Layer> layers;
};

// `batches`: each a full set of the graph's inputs (none for weight-only: the report's errors are
// then NaN). `run` compiles the calibration runs (its backend and threads). Throws ir::Error:
// InvalidArgument for no batch, bad options, a
// keep_float name matching nothing, or a graph with nothing to quantize; a run's own errors
// for batches of the wrong types or shapes.
Result quantize(const ir::Graph& g, const std::vector<std::vector<eval::TensorRef>>& batches, const Options& options,
                const runtime::CompileOptions& run);

}  // namespace esg::quantize
