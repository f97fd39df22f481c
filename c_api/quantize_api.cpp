// C entry points of post-training quantization (compiler_core/quantize).
#include <string>
#include <vector>

#include "backends/registry.hpp"
#include "c_api/handles.hpp"
#include "c_api/op_call.hpp"
#include "quantize/quantizer.hpp"

using esg::capi::guarded;
namespace ir = esg::ir;
namespace quantize = esg::quantize;

struct esg_quantized {
  quantize::Result result;
};

namespace {

const esg_quantized& need(const esg_quantized* q, const char* fn) {
  if (!q || !q->result.graph) throw ir::Error(ir::ErrorCode::InvalidArgument, std::string(fn) + ": the quantized result is NULL");
  return *q;
}

// The caller's options as the quantizer's, and the calibration runs' (on the host CPU).
struct Parsed {
  quantize::Options quantize;
  esg::runtime::CompileOptions run;
};
Parsed options_of(const esg_quantize_options* options) {
  esg_quantize_options o;
  esg_quantize_options_init_(&o, sizeof o);
  esg::capi::read_options(&o, sizeof o, options, "esg_quantize");
  quantize::Options q;
  switch (o.calibration) {
    case ESG_CALIBRATE_MINMAX: q.method = quantize::Method::MinMax; break;
    case ESG_CALIBRATE_PERCENTILE: q.method = quantize::Method::Percentile; break;
    case ESG_CALIBRATE_ENTROPY: q.method = quantize::Method::Entropy; break;
    default:
      throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_quantize: calibration " + std::to_string(o.calibration) +
                                                          " is not an esg_calibration (MINMAX 0, PERCENTILE 1, ENTROPY 2)");
  }
  q.percentile = o.percentile;
  q.bins = o.bins;
  q.per_channel = !o.per_tensor_weights;
  q.symmetric = o.symmetric;
  if (o.num_keep_float && !o.keep_float) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_quantize: num_keep_float without keep_float");
  for (size_t i = 0; i < o.num_keep_float; ++i) {
    if (!o.keep_float[i]) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_quantize: keep_float[" + std::to_string(i) + "] is NULL");
    q.keep_float.emplace_back(o.keep_float[i]);
  }
  q.weight_bits = o.weight_only_bits;
  q.block_size = o.block_size;
  if (o.threads < 0) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_quantize: threads " + std::to_string(o.threads) + " is negative");
  Parsed parsed{std::move(q), {}};
  parsed.run.backend = esg::backends::find("cpu");
  parsed.run.threads = o.threads;
  return parsed;
}

}  // namespace

extern "C" {

ESG_API void esg_quantize_options_init_(esg_quantize_options* options, size_t struct_size) {
  esg_quantize_options d{};
  d.calibration = ESG_CALIBRATE_MINMAX;
  d.percentile = 99.99;
  d.bins = 2048;
  d.block_size = 32;
  esg::capi::init_options(options, struct_size, &d, sizeof d);
}

ESG_API esg_quantized* esg_quantize(const esg_graph* graph, const esg_buffer* batches, size_t num_batches,
                                    const esg_quantize_options* options) {
  esg_quantized* out = nullptr;
  guarded(nullptr, [&] {
    if (!graph || !graph->g) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_quantize: the graph is NULL");
    const Parsed parsed = options_of(options);
    const size_t per_batch = graph->g->inputs().size();
    if (num_batches && per_batch && !batches) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_quantize: num_batches but no batches");
    std::vector<std::vector<esg::eval::TensorRef>> refs(num_batches);
    for (size_t b = 0; b < num_batches; ++b) {
      const std::string what = "esg_quantize: batch " + std::to_string(b) + ", input";
      for (size_t i = 0; i < per_batch; ++i) refs[b].push_back(esg::capi::ref_of(batches[b * per_batch + i], what.c_str(), i));
    }
    out = new esg_quantized{quantize::quantize(*graph->g, refs, parsed.quantize, parsed.run)};
  });
  return out;
}

ESG_API void esg_quantized_destroy(esg_quantized* quantized) { delete quantized; }

ESG_API esg_graph* esg_quantized_graph(const esg_quantized* quantized) {
  esg_graph* g = nullptr;
  guarded(nullptr, [&] { g = new esg_graph{std::make_unique<ir::Graph>(*need(quantized, "esg_quantized_graph").result.graph)}; });
  return g;
}

ESG_API size_t esg_quantized_num_layers(const esg_quantized* quantized) {
  return quantized ? quantized->result.layers.size() : 0;
}

ESG_API esg_status esg_quantized_layer_get(const esg_quantized* quantized, size_t index, esg_quantized_layer* out) {
  guarded(nullptr, [&] {
    const std::vector<quantize::Layer>& layers = need(quantized, "esg_quantized_layer_get").result.layers;
    if (!out) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_quantized_layer_get: out is NULL");
    if (index >= layers.size())
      throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_quantized_layer_get: index " + std::to_string(index) + " is past the " +
                                                          std::to_string(layers.size()) + " layers");
    const quantize::Layer& l = layers[index];
    *out = {l.name.c_str(), l.op.c_str(), l.quantized_result, l.scale, l.zero_point, l.min, l.max, l.max_error, l.sqnr_db};
  });
  return esg_last_status();
}

}  // extern "C"
