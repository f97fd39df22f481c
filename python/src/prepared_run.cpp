// Model.prepare: runs to come on numpy arrays fixed once. The arrays are the buffers (no copy,
// no conversion: a copy would not see the caller's later writes), so each must already be of
// the exact dtype, C-contiguous, and the outputs writeable; the prepared run holds them alive.
#include "prepared_run.hpp"

#include <set>

#include <esgraph/esgraph.hpp>

#include "lift.hpp"

namespace esgraph_py {
namespace {

// The prepared run with the arrays it reads and writes, held here only: what Python is given
// are new lists of them, so nothing a caller does to a list frees an array a run writes.
struct PyPreparedRun {
  std::unique_ptr<esg::PreparedRun> run;
  std::vector<py::array> inputs, outputs;
};

py::list list_of(const std::vector<py::array>& arrays) {
  py::list l;
  for (const py::array& a : arrays) l.append(a);
  return l;
}

std::string type_of(const py::array& a) {
  return py::str(py::handle(a.dtype())).cast<std::string>() + " of shape " + py::str(py::tuple(py::cast(std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim())))).cast<std::string>();
}

// `a` as a buffer of `dtype`: refused unless it is a numpy array of exactly that dtype, C-contiguous
// (and writeable for an output); kept in `held`.
esg_buffer buffer_of(py::handle given, esg::DType dtype, const std::string& what, bool output, std::vector<int64_t>& dims,
                     std::vector<py::array>& held) {
  if (!py::isinstance<py::array>(given))
    throw py::type_error(what + ": expected a numpy array (a prepared run reads and writes the arrays themselves)");
  auto a = py::reinterpret_borrow<py::array>(given);
  // numpy has no bf16: its values cross as their bit patterns in uint16.
  const py::dtype want = dtype == esg::bf16 ? py::dtype("uint16") : numpy_dtype_of(dtype);
  if (!a.dtype().equal(want))
    throw esg::DTypeError(ESG_ERR_DTYPE, what + " is " + type_of(a) + ", the model's is " + esg::dtype_name(dtype) +
                                             ": give an array of " + py::str(want.attr("name")).cast<std::string>() +
                                             " (a prepared run converts nothing)");
  if (!(a.flags() & py::array::c_style)) throw esg::InvalidArgumentError(ESG_ERR_INVALID_ARGUMENT, what + " must be C-contiguous");
  if (output && !a.writeable()) throw esg::InvalidArgumentError(ESG_ERR_INVALID_ARGUMENT, what + " must be writeable");
  dims.assign(a.shape(), a.shape() + a.ndim());
  held.push_back(a);
  void* data = output ? a.mutable_data() : const_cast<void*>(a.data());
  return {data, static_cast<size_t>(a.nbytes()), static_cast<esg_dtype>(dtype), dims.data(), dims.size()};
}

}  // namespace

py::list inputs_by_name(esg_model* h, const py::dict& d, const char* verb) {
  const size_t n_in = esg_model_num_inputs(h);
  // A key the model has no input of first: a misspelt name is what a missing input often is.
  std::set<std::string> names;
  std::string inputs;
  for (size_t i = 0; i < n_in; ++i) {
    names.insert(esg_model_input_name(h, i));
    inputs += std::string(inputs.empty() ? "`" : ", `") + esg_model_input_name(h, i) + "`";
  }
  std::string unknown;
  for (const auto& [key, value] : d)
    if (!py::isinstance<py::str>(key) || !names.count(key.cast<std::string>()))
      unknown += (unknown.empty() ? "" : ", ") + py::repr(key).cast<std::string>();
  if (!unknown.empty())
    throw esg::InvalidArgumentError(ESG_ERR_INVALID_ARGUMENT,
                                    std::string(verb) + ": the model has no input " + unknown + " (its inputs: " + inputs + ")");
  py::list given;
  for (size_t i = 0; i < n_in; ++i) {
    const char* name = esg_model_input_name(h, i);
    if (!d.contains(name))
      throw esg::InvalidArgumentError(ESG_ERR_INVALID_ARGUMENT, std::string(verb) + ": no array for input `" + name + "`");
    given.append(d[name]);
  }
  return given;
}

namespace {

PyPreparedRun prepare(const esg::Model& model, py::handle given_inputs, py::handle given_out) {
  esg_model* h = model.handle();
  const size_t n_in = esg_model_num_inputs(h), n_out = esg_model_num_outputs(h);
  PyPreparedRun made;
  py::list given;  // the inputs in the model's order
  if (py::isinstance<py::dict>(given_inputs)) {
    given = inputs_by_name(h, given_inputs.cast<py::dict>(), "prepare");
  } else {
    for (py::handle a : given_inputs.cast<py::sequence>()) given.append(a);
  }
  if (given.size() != n_in)
    throw esg::InvalidArgumentError(ESG_ERR_INVALID_ARGUMENT, "prepare: the model takes " + std::to_string(n_in) + " input(s), got " +
                                                                  std::to_string(given.size()));
  std::vector<esg_buffer> in, out;
  std::vector<std::vector<int64_t>> dims(n_in + n_out);
  for (size_t i = 0; i < n_in; ++i)
    in.push_back(buffer_of(given[i], static_cast<esg::DType>(esg_model_input_dtype(h, i)),
                           "prepare: input " + std::to_string(i) + " (`" + esg_model_input_name(h, i) + "`)", false, dims[i],
                           made.inputs));
  // The outputs' types at these inputs' shapes: the given arrays must match them, else they are made.
  for (size_t i = 0; i < n_out; ++i) {
    esg_dtype dt = ESG_DTYPE_INVALID;
    int64_t shape[8];
    size_t rank = 0;
    esg::detail::check(esg_model_output_shape(h, in.data(), in.size(), i, &dt, shape, 8, &rank));
    const std::string what = "prepare: output " + std::to_string(i) + " (`" + esg_model_output_name(h, i) + "`)";
    if (std::any_of(shape, shape + rank, [](int64_t d) { return d < 0; }))
      throw esg::InvalidArgumentError(ESG_ERR_INVALID_ARGUMENT, what + ": its size depends on the data, so it has no buffer to prepare; call the model instead");
    const auto dtype = static_cast<esg::DType>(dt);
    py::object array;
    if (given_out.is_none()) {
      array = py::array(dtype == esg::bf16 ? py::dtype("uint16") : numpy_dtype_of(dtype), std::vector<py::ssize_t>(shape, shape + rank));
    } else {
      const auto out_given = given_out.cast<py::sequence>();
      if (out_given.size() != n_out)
        throw esg::InvalidArgumentError(ESG_ERR_INVALID_ARGUMENT, "prepare: out: the model has " + std::to_string(n_out) + " output(s), got " +
                                                                      std::to_string(out_given.size()) + " array(s)");
      array = out_given[i];
    }
    out.push_back(buffer_of(array, dtype, what, true, dims[n_in + i], made.outputs));
    // Every run writes the outputs after reading inputs and earlier outputs: shared bytes would corrupt them.
    const auto* lo = static_cast<const char*>(out.back().data);
    auto overlaps = [&](const esg_buffer& other) {
      const auto* b = static_cast<const char*>(other.data);
      return out.back().nbytes > 0 && other.nbytes > 0 && lo < b + other.nbytes && b < lo + out.back().nbytes;
    };
    for (size_t k = 0; k < in.size(); ++k)
      if (overlaps(in[k])) throw esg::InvalidArgumentError(ESG_ERR_INVALID_ARGUMENT, what + " shares memory with input " + std::to_string(k));
    for (size_t k = 0; k + 1 < out.size(); ++k)
      if (overlaps(out[k])) throw esg::InvalidArgumentError(ESG_ERR_INVALID_ARGUMENT, what + " shares memory with output " + std::to_string(k));
  }
  made.run = std::make_unique<esg::PreparedRun>(esg_model_prepare(h, in.data(), in.size(), out.data(), out.size()));
  return made;
}

}  // namespace

void bind_prepared_run(py::module_& m, py::class_<esg::Model>& model) {
  py::class_<PyPreparedRun>(m, "PreparedRun",
                            "Runs of a model on numpy arrays fixed once (Model.prepare): each run() reads the input arrays "
                            "as they are then and writes the output arrays.")
      .def("run", [](PyPreparedRun& self) {
        esg_status status;
        {
          py::gil_scoped_release unlocked;  // the arrays stay referenced by self
          status = esg_prepared_run(self.run->handle());
        }
        esg::detail::check(status);
        return list_of(self.outputs);
      }, "Runs once; returns the output arrays (the same ones every time), in a new list.")
      .def_property_readonly("inputs", [](const PyPreparedRun& self) { return list_of(self.inputs); })
      .def_property_readonly("outputs", [](const PyPreparedRun& self) { return list_of(self.outputs); });
  model.def("prepare", &prepare, py::arg("inputs"), py::kw_only(), py::arg("out") = py::none(),
            "Checks the arrays and finds the plan once, for many runs on the same arrays (a small model's run then costs "
            "about a tenth of a microsecond beyond its kernels). `inputs`: {name: array} or a list, each a C-contiguous "
            "numpy array of the input's exact dtype (bf16 as uint16), read in place by every run. `out`: arrays to write, "
            "else made here. Returns a PreparedRun; one run at a time.");
}

}  // namespace esgraph_py
