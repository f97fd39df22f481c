// What every oneDNN primitive of this backend shares: the one CPU engine they are made and run
// on, and oneDNN's names for the plan's memory formats.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

#include "schedule/format.hpp"

namespace esg::cpu {

inline const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// oneDNN's tag for format `f` at `rank` (3 to 5: ncw, nchw, ncdhw, their blocked and their
// channels-last forms), or undef.
inline dnnl::memory::format_tag onednn_tag(schedule::Format f, size_t rank) {
  using tag = dnnl::memory::format_tag;
  static const tag kRowMajor[] = {tag::ncw, tag::nchw, tag::ncdhw}, k8[] = {tag::nCw8c, tag::nChw8c, tag::nCdhw8c},
                   k16[] = {tag::nCw16c, tag::nChw16c, tag::nCdhw16c};
  if (rank < 3 || rank > 5) return tag::undef;
  static const tag kChannelsLast[] = {tag::nwc, tag::nhwc, tag::ndhwc};
  if (f.kind == schedule::Format::RowMajor) return kRowMajor[rank - 3];
  if (f.kind == schedule::Format::ChannelsLast) return kChannelsLast[rank - 3];
  return f.block == 8 ? k8[rank - 3] : f.block == 16 ? k16[rank - 3] : tag::undef;
}

}  // namespace esg::cpu
