// Model.prepare and the PreparedRun it returns (prepared_run.cpp).
#pragma once
#include <pybind11/pybind11.h>

#include <esgraph/esgraph.hpp>

namespace esgraph_py {

void bind_prepared_run(pybind11::module_& m, pybind11::class_<esg::Model>& model);

}  // namespace esgraph_py
