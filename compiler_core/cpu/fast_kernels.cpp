#include "cpu/fast_kernels.hpp"

#include "cpu/elementwise_f32.hpp"

namespace esg::cpu {

eval::Kernel gemm_kernel(const ir::Graph& g, const ir::Node& n);
eval::Kernel attention_kernel(const ir::Graph& g, const ir::Node& n);
eval::Kernel transpose_kernel(const ir::Graph& g, const ir::Node& n);
eval::Kernel expand_kernel(const ir::Graph& g, const ir::Node& n);
eval::Kernel conv_kernel(const ir::Graph& g, const ir::Node& n);
eval::Kernel normalize_kernel(const ir::Graph& g, const ir::Node& n);
eval::Kernel pool_kernel(const ir::Graph& g, const ir::Node& n);
eval::Kernel reduce_kernel(const ir::Graph& g, const ir::Node& n);
eval::Kernel blocked_pool_kernel(const ir::Graph& g, const ir::Node& n, int64_t block);
eval::Kernel blocked_concat_kernel(const ir::Graph& g, const ir::Node& n, int64_t block);
eval::Kernel blocked_gather_kernel(const ir::Graph& g, const ir::Node& n, int64_t block);
eval::Kernel channels_last_pool_kernel(const ir::Graph& g, const ir::Node& n);
eval::Kernel nbits_matmul_kernel(const ir::Graph& g, const ir::Node& n);

eval::Kernel find_fast_kernel(const ir::Graph& g, const ir::Node& n) {
  if (const eval::Kernel k = elementwise_f32_kernel(g, n)) return k;
  if (const eval::Kernel k = gemm_kernel(g, n)) return k;
  if (const eval::Kernel k = attention_kernel(g, n)) return k;
  if (const eval::Kernel k = transpose_kernel(g, n)) return k;
  if (const eval::Kernel k = expand_kernel(g, n)) return k;
  if (const eval::Kernel k = conv_kernel(g, n)) return k;
  if (const eval::Kernel k = reduce_kernel(g, n)) return k;
  if (const eval::Kernel k = pool_kernel(g, n)) return k;
  if (const eval::Kernel k = nbits_matmul_kernel(g, n)) return k;
  return normalize_kernel(g, n);
}

eval::Kernel find_blocked_kernel(const ir::Graph& g, const ir::Node& n, schedule::Format f) {
  if (g.shape(n.first_output).rank() != 4) return nullptr;
  if (f.kind == schedule::Format::ChannelsLast) return channels_last_pool_kernel(g, n);
  if (f.kind != schedule::Format::BlockedChannels) return nullptr;
  if (const eval::Kernel k = blocked_pool_kernel(g, n, f.block)) return k;
  if (const eval::Kernel k = blocked_concat_kernel(g, n, f.block)) return k;
  return blocked_gather_kernel(g, n, f.block);
}

}  // namespace esg::cpu
