#include "ascend/device_lowering.hpp"

#include "ascend/aclnn_call.hpp"
#include "ascend/kernel_source.hpp"
#include "ascend/row_kernel_source.hpp"
#include "passes/passes.hpp"

namespace esg::ascend {

std::unique_ptr<ir::Graph> lower_for_device(const ir::Graph& g) {
  // The softmax split first: its mask may be one of the broadcasts to expand. Softmaxes a row
  // kernel computes keep their scale and mask (it reads the mask's rows where they repeat).
  const auto library_takes = [](const ir::Graph& graph, const ir::Node& n) { return AclnnCall::unsupported(graph, n).empty(); };
  const auto padded = passes::pad_average_pools(*passes::pad_asymmetric_convolutions(g), library_takes);
  const auto sliced = passes::split_into_slices(*passes::split_products_over_axes(*passes::wrap_negative_indices(*padded)));
  const auto row_kernel_takes = [](const ir::Graph& graph, const ir::Node& n) { return row_kernel_refusal(graph, n).empty(); };
  return passes::materialize_broadcasts(*passes::split_scaled_softmax(*sliced, row_kernel_takes), kernel_computes, kernel_reads_broadcast);
}

}  // namespace esg::ascend
