// A float graph rewritten into ONNX's QDQ form at the sites find_sites chose: each quantized
// activation read through quantize_linear → dequantize_linear with the scale and zero point
// calibration gave it, each weight stored as s8 codes read through dequantize_linear (a scale
// per output channel, or one), each convolution's bias rounded to the grid of its int32 sums.
#pragma once
#include <functional>
#include <memory>
#include <unordered_map>

#include "ir/replay.hpp"

#include "quantize/calibration.hpp"
#include "quantize/sites.hpp"

namespace esg::quantize {

struct Rewritten {
  std::unique_ptr<ir::Graph> graph;
  std::unordered_map<ir::ValueId, ir::ValueId> value_of;  // a value of the float graph → the one standing for it
};

// `g` rebuilt through `hook` (ir::Replay's), each output made by `output` (null: as replayed),
// with the sites' reported values mapped: what both rewrites of this layer share.
Rewritten replayed(const ir::Graph& g, const ir::Replay::Hook& hook, const std::function<ir::ValueId(ir::Replay&, ir::ValueId)>& output,
                   const Sites& sites);

// `activations` holds a quantization for every value of `sites` (calibrated and same_as).
Rewritten insert_qdq(const ir::Graph& g, const Sites& sites, const std::unordered_map<ir::ValueId, Quantization>& activations,
                     bool per_channel);

// Finite weights as symmetric s8 codes, one scale per index of `axis` (or one for all when
// !per_channel): each scale max |w| / 127 (1 where that is 0 or below f32's normal range: each
// code 0), raised to `least` of its channel where given; codes round(w / scale) half to even.
struct QuantizedWeights {
  std::vector<int8_t> codes;
  std::vector<float> scales;
};
QuantizedWeights quantize_weights(const float* w, const ir::Shape& shape, int axis, bool per_channel, const std::vector<float>& least = {});

}  // namespace esg::quantize
