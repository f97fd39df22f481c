// Which ops of a float graph a post-training quantizer turns into their QDQ form, and which
// values it quantizes: the form the compile pass recognize_quantized_ops (passes/quantized.cpp)
// runs on integer kernels, and ONNX Runtime's QDQ files take.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.hpp"

namespace esg::quantize {

// An op run quantized.
struct Site {
  ir::NodeId node = ir::kNone;
  std::vector<ir::ValueId> inputs;      // the activations it reads quantized
  ir::ValueId weight = ir::kNone;       // constant f32 weights stored as s8, or kNone
  int weight_axis = 0;                  // the weights' output-channel axis (a scale each)
  ir::ValueId bias = ir::kNone;         // a convolution's constant bias, rounded to the sums' grid
  ir::ValueId result = ir::kNone;       // its result, quantized (past a Relu or Clip only it reads)
  ir::ValueId reported() const;         // what the per-layer error compares: the result, else the op's own
  const ir::Graph* graph = nullptr;
};

struct Sites {
  std::vector<Site> ops;
  // The activations quantized: those calibration decides (`calibrated`), and the max pools'
  // results, quantized as their inputs are (`same_as`, pool result and input in the graph's
  // order, so that a pool of a pool finds its input's quantization: a max of codes is the code
  // of the max).
  std::vector<ir::ValueId> calibrated;
  std::vector<std::pair<ir::ValueId, ir::ValueId>> same_as;
};

// The sites of the graph's top level, in order: convolutions and products (matmul, no transposed
// a, weights of rank 2) whose weights are finite f32 constants only they read (a weight shared
// or holding an infinity or NaN leaves its op in f32); sums of two values quantized already;
// max pools of a quantized value. A node named in `keep_float`, by its name, its result's or its op's, stays f32;
// a name that matches nothing is an InvalidArgument error (a typo would quantize silently).
Sites find_sites(const ir::Graph& g, const std::vector<std::string>& keep_float);

}  // namespace esg::quantize
