// esgraph.quantize: post-training quantization (quantize.cpp).
#pragma once
#include <pybind11/pybind11.h>

namespace esgraph_py {

void bind_quantize(pybind11::module_& m);

}  // namespace esgraph_py
