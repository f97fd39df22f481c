#include "ascend/device_lowering.hpp"

#include "ascend/kernel_source.hpp"
#include "passes/passes.hpp"

namespace esg::ascend {

std::unique_ptr<ir::Graph> lower_for_device(const ir::Graph& g) {
  // The softmax split first: its mask may be one of the broadcasts to expand.
  const auto sliced = passes::split_into_slices(*passes::split_products_over_axes(*passes::pad_asymmetric_convolutions(g)));
  return passes::materialize_broadcasts(*passes::split_scaled_softmax(*sliced), kernel_computes, kernel_reads_broadcast);
}

}  // namespace esg::ascend
