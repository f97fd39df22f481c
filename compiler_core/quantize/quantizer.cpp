#include "quantize/quantizer.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "ir/error.hpp"
#include "passes/passes.hpp"
#include "quantize/qdq.hpp"
#include "quantize/sites.hpp"
#include "quantize/weight_only.hpp"
#include "runtime/model.hpp"

namespace esg::quantize {
namespace {

using ir::ValueId;

ir::Error invalid(const std::string& what) { return ir::Error(ir::ErrorCode::InvalidArgument, "quantize: " + what); }

void check(const Options& o, size_t batches) {
  if (o.weight_bits) {
    if (o.weight_bits != 2 && o.weight_bits != 4 && o.weight_bits != 8)
      throw invalid("weight-only bits " + std::to_string(o.weight_bits) + "; valid: 2, 4, 8");
    if (o.block_size < 16 || (o.block_size & (o.block_size - 1)))
      throw invalid("block_size " + std::to_string(o.block_size) + " is not a power of two of at least 16");
    return;  // no calibration: batches serve the report only
  }
  if (batches == 0) throw invalid("no calibration batch: calibration needs the graph run on at least one set of inputs");
  if (!(o.percentile > 0 && o.percentile <= 100)) throw invalid("percentile " + std::to_string(o.percentile) + " is not in (0, 100]");
  // Entropy's search takes time growing with the square of the bins, and needs more of them than
  // the 256 codes of a non-negative tensor to choose anything.
  if (o.bins < 256 || o.bins > 8192) throw invalid("bins " + std::to_string(o.bins) + " is not in [256, 8192]");
  if (o.method == Method::Entropy && o.bins < 512)
    throw invalid("bins " + std::to_string(o.bins) + ": entropy needs at least 512 (it merges them into up to 256 codes)");
}

// What a compile would do to the graph before quantizing it: affine layers (a batch norm) folded
// into their convolutions, so that the filters quantized are the ones that run. Each node first
// takes the name the caller's graph prints for it ("conv2d_7"), which the passes keep: keep_float
// and the report speak of the caller's nodes, not of the renumbered ones.
std::unique_ptr<ir::Graph> prepared(const ir::Graph& g) {
  ir::Graph named(g);
  for (ir::NodeId id : named.regions[0].nodes)
    if (!named.nodes[id].name) named.nodes[id].name = named.intern(std::string(g.nodes[id].op->name) + "_" + std::to_string(id));
  std::unique_ptr<ir::Graph> p = passes::simplify(named);
  p = passes::fold_constants(*p);
  p = passes::fold_affine_into_conv(*p);
  p = passes::fold_constants(*p);
  return passes::eliminate_dead_code(*p);
}

// `g` compiled with `values` as extra outputs, to read them run by run.
class Observed {
 public:
  Observed(const ir::Graph& g, const std::vector<ValueId>& values, const runtime::CompileOptions& run) : first_(g.outputs().size()) {
    auto observed = std::make_unique<ir::Graph>(g);
    for (ValueId v : values) observed->regions[0].results.push_back(v);
    model_ = std::make_unique<runtime::Model>(std::move(observed), run);
  }
  // The values for batch `index`, in `values`' order (each f32); an error names the batch.
  std::vector<eval::HostTensor> run(const std::vector<eval::TensorRef>& inputs, size_t index) const {
    std::vector<eval::HostTensor> outs;
    try {
      outs = model_->run(inputs);
    } catch (const ir::Error& e) {
      throw ir::Error(e.code(), "quantize: calibration batch " + std::to_string(index) + ": " + e.what());
    }
    outs.erase(outs.begin(), outs.begin() + static_cast<std::ptrdiff_t>(first_));
    return outs;
  }

 private:
  size_t first_;
  std::unique_ptr<runtime::Model> model_;
};

// Each calibrated activation's quantization, from its values over the batches: a pass for the
// extremes, a second for the histograms of the methods that take them.
std::unordered_map<ValueId, Quantization> calibrate(const ir::Graph& f, const Sites& sites,
                                                     const std::vector<std::vector<eval::TensorRef>>& batches, const Options& options,
                                                     const runtime::CompileOptions& run) {
  std::vector<Observer> observers(sites.calibrated.size());
  const Observed calibration(f, sites.calibrated, run);
  for (size_t b = 0; b < batches.size(); ++b) {
    const std::vector<eval::HostTensor> outs = calibration.run(batches[b], b);
    for (size_t i = 0; i < outs.size(); ++i) observers[i].observe_extremes(outs[i].data<float>(), outs[i].shape.num_elements());
  }
  if (options.method != Method::MinMax) {
    for (Observer& o : observers) o.start_histogram(options.bins);
    for (size_t b = 0; b < batches.size(); ++b) {
      const std::vector<eval::HostTensor> outs = calibration.run(batches[b], b);
      for (size_t i = 0; i < outs.size(); ++i) observers[i].observe_histogram(outs[i].data<float>(), outs[i].shape.num_elements());
    }
  }
  std::unordered_map<ValueId, Quantization> activations;
  for (size_t i = 0; i < sites.calibrated.size(); ++i)
    activations[sites.calibrated[i]] = quantization_of(observers[i].choose(options.method, options.percentile, options.symmetric), options.symmetric);
  for (const auto& [pooled, input] : sites.same_as) activations[pooled] = activations.at(input);  // in order: pools of pools
  return activations;
}

// Each site's result in the float graph `f` and in the quantized one, side by side on every
// batch; with no batch, NaN.
std::vector<Layer> measure(const ir::Graph& f, const Rewritten& q, const Sites& sites,
                           const std::unordered_map<ValueId, Quantization>& activations,
                           const std::vector<std::vector<eval::TensorRef>>& batches, const runtime::CompileOptions& run) {
  std::vector<Layer> layers;
  std::vector<ValueId> before, after;
  for (const Site& s : sites.ops) {
    Layer layer;
    layer.name = f.value_name(f.nodes[s.node].first_output);  // what the graph prints: %name = op(...)
    layer.op = f.nodes[s.node].op->name;
    if (const auto a = activations.find(s.result); a != activations.end())
      layer.quantized_result = true, layer.scale = a->second.scale, layer.zero_point = a->second.zero_point;
    layer.min = layer.max = layer.max_error = layer.sqnr_db = NAN;
    layers.push_back(layer);
    before.push_back(s.reported());
    after.push_back(q.value_of.at(s.reported()));
  }
  if (batches.empty()) return layers;
  for (Layer& layer : layers) layer.min = std::numeric_limits<double>::infinity(), layer.max = -layer.min, layer.max_error = 0;
  const Observed reference(f, before, run), quantized(*q.graph, after, run);
  std::vector<double> signal(before.size()), noise(before.size());
  for (size_t b = 0; b < batches.size(); ++b) {
    const std::vector<eval::HostTensor> expected = reference.run(batches[b], b), got = quantized.run(batches[b], b);
    for (size_t l = 0; l < got.size(); ++l) {
      Layer& layer = layers[l];
      const float* e = expected[l].data<float>();
      const float* a = got[l].data<float>();
      for (int64_t i = 0, n = expected[l].shape.num_elements(); i < n; ++i) {
        const double d = static_cast<double>(a[i]) - e[i];
        layer.min = std::min(layer.min, static_cast<double>(e[i])), layer.max = std::max(layer.max, static_cast<double>(e[i]));
        const double error = std::fabs(d);  // NaN where either result is, which then stays
        if (std::isnan(error) || error > layer.max_error) layer.max_error = error;
        signal[l] += static_cast<double>(e[i]) * e[i], noise[l] += d * d;
      }
    }
  }
  for (size_t l = 0; l < layers.size(); ++l)  // a NaN in either graph's result is NaN here too: +inf means exact
    layers[l].sqnr_db = noise[l] == 0 ? std::numeric_limits<double>::infinity() : 10 * std::log10(signal[l] / noise[l]);
  return layers;
}

}  // namespace

Result quantize(const ir::Graph& g, const std::vector<std::vector<eval::TensorRef>>& batches, const Options& options,
                const runtime::CompileOptions& run) {
  check(options, batches.size());
  const std::unique_ptr<ir::Graph> f = prepared(g);
  Sites sites = find_sites(*f, options.keep_float);
  if (options.weight_bits) {  // the products alone, their activations f32
    sites.ops.erase(std::remove_if(sites.ops.begin(), sites.ops.end(),
                                   [&](const Site& s) { return f->nodes[s.node].op->kind != ir::OpKind::matmul; }),
                    sites.ops.end());
    sites.calibrated.clear(), sites.same_as.clear();
  }
  if (sites.ops.empty())
    throw invalid(options.weight_bits ? "nothing to quantize: no product with constant f32 weights outside keep_float"
                                      : "nothing to quantize: no convolution or product with constant f32 weights outside keep_float");
  std::unordered_map<ValueId, Quantization> activations;  // none for weight-only
  if (!options.weight_bits) activations = calibrate(*f, sites, batches, options, run);
  Rewritten q = options.weight_bits ? weight_only(*f, sites, options.weight_bits, options.block_size, options.symmetric)
                                    : insert_qdq(*f, sites, activations, options.per_channel);
  std::vector<Layer> layers = measure(*f, q, sites, activations, batches, run);
  return {std::move(q.graph), std::move(layers)};
}

}  // namespace esg::quantize
