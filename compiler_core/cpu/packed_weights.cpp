#include "cpu/packed_weights.hpp"

#include <sstream>

namespace esg::cpu {

std::string layout_text(const dnnl_memory_desc_t& d) {
  if (d.format_kind != dnnl_blocked) return {};  // (never a primitive's weights here) not shared
  std::ostringstream text;
  text << "kind " << d.format_kind << " type " << d.data_type << " dims";
  for (int i = 0; i < d.ndims; ++i) text << ' ' << d.dims[i] << '/' << d.padded_dims[i] << '+' << d.padded_offsets[i];
  text << " offset " << d.offset0;
  const dnnl_blocking_desc_t& b = d.format_desc.blocking;
  text << " strides";
  for (int i = 0; i < d.ndims; ++i) text << ' ' << b.strides[i];
  text << " blocks";
  for (int i = 0; i < b.inner_nblks; ++i) text << ' ' << b.inner_idxs[i] << ':' << b.inner_blks[i];
  text << " extra " << d.extra.flags << ' ' << d.extra.compensation_mask << ' ' << d.extra.scale_adjust << ' '
       << d.extra.asymm_compensation_mask;
  return text.str();
}

}  // namespace esg::cpu
