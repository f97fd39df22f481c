// Model.prepare and the PreparedRun it returns (prepared_run.cpp).
#pragma once
#include <pybind11/pybind11.h>

#include <esgraph/esgraph.hpp>

namespace esgraph_py {

void bind_prepared_run(pybind11::module_& m, pybind11::class_<esg::Model>& model);

// A {name: array} dict's arrays in the model's input order, for `verb` (run, prepare): a key the
// model has no input of, or an input with no key, is an InvalidArgumentError naming it.
pybind11::list inputs_by_name(esg_model* h, const pybind11::dict& d, const char* verb);

}  // namespace esgraph_py
