// The one oneDNN CPU engine every primitive of this backend is made and run on.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

namespace esg::cpu {

inline const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

}  // namespace esg::cpu
