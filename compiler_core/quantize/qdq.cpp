#include "quantize/qdq.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <unordered_set>

#include "ir/error.hpp"
#include "ir/op_attrs.gen.hpp"
#include "ir/replay.hpp"
#include "passes/rewrite.hpp"

namespace esg::quantize {
namespace {

using ir::Graph;
using ir::kNone;
using ir::ValueId;
using K = ir::OpKind;

// The largest int32 an f32 holds exactly below 2^31.
constexpr float kLargestBiasCode = 2147483520.0f;

// An f32 constant's values (sites hold only those).
const float* constant_data(const Graph& g, ValueId v) {
  return reinterpret_cast<const float*>(g.blobs[g.nodes[g.values[v].producer].blob]->data());
}

ValueId scalar_f32(ir::Builder& b, float v) { return b.add_constant(ir::DType::F32, ir::Shape{}, &v, sizeof v); }

ValueId zero_point_of(ir::Builder& b, const Quantization& q) {
  const int8_t s8 = static_cast<int8_t>(q.zero_point);
  const uint8_t u8 = static_cast<uint8_t>(q.zero_point);
  return q.is_signed ? b.add_constant(ir::DType::I8, ir::Shape{}, &s8, 1) : b.add_constant(ir::DType::U8, ir::Shape{}, &u8, 1);
}

// The shape that lays one scale per output channel along `axis` of a weight of `shape`, for
// dequantize_linear's broadcast: [O, 1, 1, 1] for filters, [N] for [K, N], [N, 1] for [N, K].
ir::Shape scale_shape(const ir::Shape& shape, int axis, size_t count) {
  if (count == 1) return ir::Shape{};
  ir::Shape s;
  for (size_t i = static_cast<size_t>(axis); i < shape.rank(); ++i) s.push_back(i == static_cast<size_t>(axis) ? shape[i] : 1);
  return s;
}

}  // namespace

QuantizedWeights quantize_weights(const float* w, const ir::Shape& shape, int axis, bool per_channel, const std::vector<float>& least) {
  const int64_t n = shape.num_elements();
  int64_t inner = 1;
  for (size_t i = static_cast<size_t>(axis) + 1; i < shape.rank(); ++i) inner *= shape[i];
  const int64_t channels = shape[static_cast<size_t>(axis)];
  auto channel = [&](int64_t i) { return per_channel ? (i / inner) % channels : 0; };
  std::vector<float> top(static_cast<size_t>(per_channel ? channels : 1), 0.0f);
  for (int64_t i = 0; i < n; ++i) top[channel(i)] = std::max(top[channel(i)], std::fabs(w[i]));
  QuantizedWeights q;
  // All zeros, or weights too small for any f32 scale: scale 1, each code 0.
  for (float t : top) q.scales.push_back(t / 127.0f >= FLT_MIN ? t / 127.0f : 1.0f);
  for (int64_t c = 0; c < static_cast<int64_t>(least.size()); ++c) {
    float& scale = q.scales[static_cast<size_t>(per_channel ? c : 0)];
    scale = std::max(scale, least[static_cast<size_t>(c)]);
  }
  q.codes.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)  // half to even: the default rounding mode
    q.codes[i] = static_cast<int8_t>(std::clamp(std::nearbyint(w[i] / q.scales[channel(i)]), -127.0f, 127.0f));
  return q;
}

Rewritten insert_qdq(const Graph& g, const Sites& sites, const std::unordered_map<ValueId, Quantization>& activations,
                     bool per_channel) {
  // The weights' codes first: a bias needs its filters' scales wherever it lies in the graph.
  std::unordered_map<ValueId, QuantizedWeights> weights;
  std::unordered_map<ValueId, const Site*> weight_of, bias_of;
  for (const Site& s : sites.ops) {
    if (s.weight == kNone) continue;
    // A bias's codes must fit int32 at the scale x_scale · w_scale: where it would not, the
    // filters' scale grows until it does (ONNX Runtime's quantizer does the same).
    std::vector<float> least;
    if (s.bias != kNone) {
      const float* bias = constant_data(g, s.bias);
      const float x_scale = activations.at(s.inputs[0]).scale;
      for (int64_t o = 0; o < g.shape(s.bias).num_elements(); ++o) least.push_back(std::fabs(bias[o]) / kLargestBiasCode / x_scale);
    }
    weights[s.weight] = quantize_weights(constant_data(g, s.weight), g.shape(s.weight), s.weight_axis, per_channel, least);
    weight_of[s.weight] = &s;
    if (s.bias != kNone) bias_of[s.bias] = &s;
  }
  std::unordered_set<ValueId> done;

  const ir::OpSchema* quantize_op = ir::find_op(K::quantize_linear);
  const ir::OpSchema* dequantize_op = ir::find_op(K::dequantize_linear);
  if (!quantize_op || !dequantize_op)  // a library built from an op set before API 2
    throw ir::Error(ir::ErrorCode::Unsupported, "quantize: this library's op set has no quantize_linear and dequantize_linear");
  const ir::OpSchema &quantize = *quantize_op, &dequantize = *dequantize_op;
  // From here on, `v` is read as its codes dequantized.
  std::unordered_map<ValueId, ValueId> unquantized;  // each quantized value as it was
  auto through_codes = [&](ir::Replay& r, ValueId v, const Quantization& q) {
    const ValueId scale = scalar_f32(r.to(), q.scale), zero = zero_point_of(r.to(), q);
    const ValueId args[3] = {unquantized[v] = r.get(v), scale, zero};
    const ValueId dq_args[3] = {passes::added(r, quantize, {args, 3}, {}), scale, zero};
    r.set(v, passes::added(r, dequantize, {dq_args, 3}, {}));
  };

  auto hook = [&](ir::Replay& r, ir::NodeId id) {
    const ir::Node& n = g.nodes[id];
    if (n.region != 0) return false;
    // Each quantized activation is quantized once, where it is first read, and every reader
    // from there on reads the dequantized codes.
    for (ValueId v : g.inputs(n)) {
      const auto q = activations.find(v);
      if (v == kNone || q == activations.end() || !done.insert(v).second) continue;
      through_codes(r, v, q->second);
    }
    if (n.blob == kNone) return false;
    const ValueId v = n.first_output;
    const float* data = constant_data(g, v);
    const ir::Shape shape = g.shape(v);
    ir::Builder& b = r.to();
    if (const auto w = weight_of.find(v); w != weight_of.end()) {
      const QuantizedWeights& q = weights.at(v);
      const ValueId codes = b.add_constant(ir::DType::I8, shape, q.codes.data(), q.codes.size());
      const ir::Shape ss = scale_shape(shape, w->second->weight_axis, q.scales.size());
      const ValueId scales = b.add_constant(ir::DType::F32, ss, q.scales.data(), q.scales.size() * sizeof(float));
      // A zero point for every scale: ONNX asks the same shape of both.
      const std::vector<int8_t> zeros(q.scales.size(), 0);
      const ValueId args[3] = {codes, scales, b.add_constant(ir::DType::I8, ss, zeros.data(), zeros.size())};
      r.set(v, passes::added(r, dequantize, {args, 3}, {}));
      return true;
    }
    if (const auto bias = bias_of.find(v); bias != bias_of.end()) {
      // ONNX Runtime's bias: int32 sums of scale x_scale · w_scale (f32), so the convolution's
      // sums take it exactly; written back as f32 values on that grid (the exporter and the
      // compile pass both recover the integers).
      const Site& s = *bias->second;
      const float x_scale = activations.at(s.inputs[0]).scale;
      const std::vector<float>& w_scales = weights.at(s.weight).scales;
      std::vector<float> on_grid(static_cast<size_t>(shape.num_elements()));
      for (size_t o = 0; o < on_grid.size(); ++o) {
        const float step = x_scale * w_scales[w_scales.size() == 1 ? 0 : o];
        on_grid[o] = std::clamp(std::nearbyint(data[o] / step), -kLargestBiasCode, kLargestBiasCode) * step;  // fits: see least
      }
      r.set(v, b.add_constant(ir::DType::F32, shape, on_grid.data(), on_grid.size() * sizeof(float)));
      return true;
    }
    return false;
  };

  // A graph output that is an op's quantized result leaves as its codes dequantized (so that the op
  // runs on the integers, and the output is what the report measured); any other output (a graph
  // input passed through, an activation a quantized op read) leaves as the float graph made it.
  std::unordered_set<ValueId> results;
  for (const Site& s : sites.ops) results.insert(s.result);
  for (const auto& pooled : sites.same_as) results.insert(pooled.first);
  auto output = [&](ir::Replay& r, ValueId v) {
    if (results.count(v) && done.insert(v).second) through_codes(r, v, activations.at(v));
    return results.count(v) || !unquantized.count(v) ? r.get(v) : unquantized.at(v);
  };
  return replayed(g, hook, output, sites);
}

Rewritten replayed(const Graph& g, const ir::Replay::Hook& hook, const std::function<ValueId(ir::Replay&, ValueId)>& output,
                   const Sites& sites) {
  ir::Builder b(g.name);
  for (const std::string& s : g.symbols) b.graph().symbol(s);
  ir::Replay replay(g, b, hook);
  for (ValueId v : g.inputs()) replay.set(v, b.add_input(g.values[v].name ? g.strings[g.values[v].name] : "", g.values[v].dtype, g.shape(v)));
  replay.region(0);
  std::vector<ValueId> outs;
  for (ValueId v : g.outputs()) outs.push_back(output ? output(replay, v) : replay.get(v));
  Rewritten out;
  for (const Site& s : sites.ops)
    if (replay.has(s.reported())) out.value_of[s.reported()] = replay.get(s.reported());
  out.graph = b.finish(outs);
  return out;
}

}  // namespace esg::quantize
