#include "quantize/qdq.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
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

QuantizedWeights quantize_weights(const float* w, const ir::Shape& shape, int axis, bool per_channel) {
  const int64_t n = shape.num_elements();
  int64_t inner = 1;
  for (size_t i = static_cast<size_t>(axis) + 1; i < shape.rank(); ++i) inner *= shape[i];
  const int64_t channels = per_channel ? shape[static_cast<size_t>(axis)] : 1;
  auto channel = [&](int64_t i) { return per_channel ? (i / inner) % channels : 0; };
  std::vector<float> top(static_cast<size_t>(channels), 0.0f);
  for (int64_t i = 0; i < n; ++i)
    if (std::isfinite(w[i])) top[channel(i)] = std::max(top[channel(i)], std::fabs(w[i]));
  QuantizedWeights q;
  for (float t : top) q.scales.push_back(t > 0 ? t / 127.0f : 1.0f);
  q.codes.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float code = std::nearbyint(w[i] / q.scales[channel(i)]);  // half to even: the default rounding mode
    q.codes[i] = static_cast<int8_t>(std::isnan(code) ? 0.0f : std::clamp(code, -127.0f, 127.0f));
  }
  return q;
}

Rewritten insert_qdq(const Graph& g, const Sites& sites, const std::unordered_map<ValueId, Quantization>& activations,
                     bool per_channel) {
  // The weights' codes first: a bias needs its filters' scales wherever it lies in the graph.
  std::unordered_map<ValueId, QuantizedWeights> weights;
  std::unordered_map<ValueId, const Site*> weight_of, bias_of;
  for (const Site& s : sites.ops) {
    if (s.weight == kNone) continue;
    const ir::Node& w = g.nodes[g.values[s.weight].producer];
    weights[s.weight] = quantize_weights(reinterpret_cast<const float*>(g.blobs[w.blob]->data()), g.shape(s.weight), s.weight_axis, per_channel);
    weight_of[s.weight] = &s;
    if (s.bias != kNone) bias_of[s.bias] = &s;
  }
  std::unordered_set<ValueId> done;

  ir::Builder b(g.name);
  for (const std::string& s : g.symbols) b.graph().symbol(s);
  const ir::OpSchema* quantize_op = ir::find_op(K::quantize_linear);
  const ir::OpSchema* dequantize_op = ir::find_op(K::dequantize_linear);
  if (!quantize_op || !dequantize_op)  // a library built from an op set before API 2
    throw ir::Error(ir::ErrorCode::Unsupported, "quantize: this library's op set has no quantize_linear and dequantize_linear");
  const ir::OpSchema &quantize = *quantize_op, &dequantize = *dequantize_op;
  // From here on, `v` is read as its codes dequantized.
  auto through_codes = [&](ir::Replay& r, ValueId v, const Quantization& q) {
    const ValueId scale = scalar_f32(b, q.scale), zero = zero_point_of(b, q);
    const ValueId args[3] = {r.get(v), scale, zero};
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
    const float* data = reinterpret_cast<const float*>(g.blobs[n.blob]->data());
    const ir::Shape shape = g.shape(v);
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
        const float code = std::clamp(std::nearbyint(data[o] / step), -2147483520.0f, 2147483520.0f);
        on_grid[o] = std::isfinite(code) ? code * step : data[o];
      }
      r.set(v, b.add_constant(ir::DType::F32, shape, on_grid.data(), on_grid.size() * sizeof(float)));
      return true;
    }
    return false;
  };

  Rewritten out;
  ir::Replay replay(g, b, hook);
  for (ValueId v : g.inputs()) replay.set(v, b.add_input(g.values[v].name ? g.strings[g.values[v].name] : "", g.values[v].dtype, g.shape(v)));
  replay.region(0);
  // A quantized value that nothing reads (a graph output) is quantized as it leaves: its op then
  // runs on the integers as well.
  for (ValueId v : g.outputs()) {
    const auto q = activations.find(v);
    if (q == activations.end() || !done.insert(v).second) continue;
    through_codes(replay, v, q->second);
  }
  std::vector<ValueId> outs;
  for (ValueId v : g.outputs()) outs.push_back(replay.get(v));
  for (const Site& s : sites.ops) out.value_of[s.reported()] = replay.get(s.reported());
  out.graph = b.finish(outs);
  return out;
}

}  // namespace esg::quantize
