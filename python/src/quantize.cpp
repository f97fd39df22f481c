#include "quantize.hpp"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>

#include <esgraph/esgraph.hpp>

#include "lift.hpp"

namespace py = pybind11;

namespace esgraph_py {
namespace {

// A batch of inputs, as esg::quantize takes it: each array C-contiguous in a dtype of its own
// (the calibration run refuses one of another dtype than the graph's input, naming both).
std::vector<esg::HostTensor> batch_of(py::handle batch, size_t index) {
  std::vector<py::handle> arrays;
  if (py::isinstance<py::list>(batch) || py::isinstance<py::tuple>(batch))
    for (py::handle a : batch) arrays.push_back(a);
  else
    arrays.push_back(batch);  // one array: a graph of one input
  std::vector<esg::HostTensor> out;
  for (size_t i = 0; i < arrays.size(); ++i) {
    const py::array a = py::array::ensure(arrays[i], py::array::c_style);
    const std::optional<esg::DType> dt = a ? numpy_dtype(a.dtype()) : std::nullopt;
    if (!dt)
      throw py::type_error("quantize: calibration batch " + std::to_string(index) + ", input " + std::to_string(i) +
                           " is not a numpy array of a dtype esgraph has");
    esg::HostTensor t(*dt, std::vector<int64_t>(a.shape(), a.shape() + a.ndim()));
    std::memcpy(t.raw_bytes(), a.data(), static_cast<size_t>(a.nbytes()));
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

void bind_quantize(py::module_& m) {
  py::class_<esg::QuantizedLayer>(m, "QuantizedLayer", "One quantized op and what quantizing cost at its result.")
      .def_readonly("name", &esg::QuantizedLayer::name)
      .def_readonly("op", &esg::QuantizedLayer::op)
      .def_readonly("quantized_result", &esg::QuantizedLayer::quantized_result,
                    "Whether its result is stored as codes (a product's stays f32).")
      .def_readonly("scale", &esg::QuantizedLayer::scale)
      .def_readonly("zero_point", &esg::QuantizedLayer::zero_point)
      .def_readonly("min", &esg::QuantizedLayer::min, "The result's smallest value in the float graph.")
      .def_readonly("max", &esg::QuantizedLayer::max)
      .def_readonly("max_error", &esg::QuantizedLayer::max_error, "The largest |quantized - float| of the result.")
      .def_readonly("sqnr_db", &esg::QuantizedLayer::sqnr_db,
                    "10 log10(sum float^2 / sum (quantized - float)^2); inf when exact.")
      .def("__repr__", [](const esg::QuantizedLayer& l) {
        return "QuantizedLayer(" + l.name + ": " + l.op + ", sqnr " + py::repr(py::float_(l.sqnr_db)).cast<std::string>() +
               " dB, max error " + py::repr(py::float_(l.max_error)).cast<std::string>() + ")";
      });
  py::class_<esg::Quantized>(m, "Quantized", "esgraph.quantize's result: the quantized graph and its per-layer report.")
      .def_property_readonly("graph", [](esg::Quantized& q) -> esg::Graph& { return q.graph; }, py::return_value_policy::reference_internal)
      .def_readonly("layers", &esg::Quantized::layers);
  m.def("quantize", [](const esg::Graph& graph, const py::sequence& calibration, const std::string& method, double percentile,
                       int64_t bins, bool per_channel, bool symmetric, const std::vector<std::string>& keep_float, int threads,
                       bool weight_only, int bits, int block_size) {
    esg::QuantizeOptions o;
    if (method == "minmax") o.calibration = esg::Calibration::MinMax;
    else if (method == "percentile") o.calibration = esg::Calibration::Percentile;
    else if (method == "entropy") o.calibration = esg::Calibration::Entropy;
    else throw esg::InvalidArgumentError(ESG_ERR_INVALID_ARGUMENT, "quantize: method '" + method + "'; valid: 'minmax', 'percentile', 'entropy'");
    o.percentile = percentile, o.bins = bins, o.per_channel = per_channel, o.symmetric = symmetric;
    o.keep_float = keep_float, o.threads = threads;
    o.weight_only_bits = weight_only ? bits : 0, o.block_size = block_size;
    std::vector<std::vector<esg::HostTensor>> batches;
    for (size_t i = 0; i < calibration.size(); ++i) batches.push_back(batch_of(calibration[i], i));
    py::gil_scoped_release unlocked;
    return esg::quantize(graph, batches, o);
  }, py::arg("graph"), py::arg("calibration") = py::list(), py::kw_only(), py::arg("method") = "minmax", py::arg("percentile") = 99.99,
     py::arg("bins") = 2048, py::arg("per_channel") = true, py::arg("symmetric") = false,
     py::arg("keep_float") = std::vector<std::string>{}, py::arg("threads") = 0, py::arg("weight_only") = false,
     py::arg("bits") = 4, py::arg("block_size") = 32,
     "Quantizes a float graph to 8 bits (docs/quantization.md): its convolutions and products with constant weights, "
     "and the residual sums and max pools between them, in ONNX's QDQ form, which compiles onto integer kernels "
     "and exports to an ONNX QDQ file. `calibration`: batches of the graph's inputs (each a list of numpy arrays in "
     "input order, or one array for a graph of one input), run through the float graph to find each activation's "
     "range: `method` 'minmax' (its extremes), 'percentile' (the range holding `percentile` percent of its values) or "
     "'entropy' (the clipping threshold whose 8-bit histogram is closest to the full one in KL divergence), over "
     "`bins` histogram bins (256 to 8192). Weights: s8 with a scale per output channel (`per_channel=False`: one per tensor). "
     "Activations: u8 with a zero point, or `symmetric` i8 around 0. `keep_float`: ops left in f32, by node, "
     "result or op name. `weight_only=True`: each product's constant weights alone, as codes of `bits` (2, 4 or 8) in "
     "blocks of `block_size` along K with a scale and zero point each (ops.matmul_nbits; `symmetric`: no zero "
     "points), activations f32, `calibration` optional (the report's errors are NaN without it). Returns a Quantized: `.graph`, and `.layers`, each quantized op's error at its result against the float "
     "graph on the calibration batches.");
}

}  // namespace esgraph_py
