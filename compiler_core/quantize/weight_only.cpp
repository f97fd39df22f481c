#include "quantize/weight_only.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "ir/error.hpp"
#include "ir/op_attrs.gen.hpp"
#include "ir/replay.hpp"
#include "passes/rewrite.hpp"

namespace esg::quantize {

Blockwise quantize_blockwise(const float* w, int64_t k, int64_t n, bool transposed, int bits, int64_t block_size, bool symmetric) {
  Blockwise q;
  q.blocks = (k + block_size - 1) / block_size;
  const int top = (1 << bits) - 1, per_byte = 8 / bits;
  const int64_t block_bytes = block_size * bits / 8;
  q.codes.assign(static_cast<size_t>(n * q.blocks * block_bytes), 0);
  q.scales.resize(static_cast<size_t>(n * q.blocks));
  if (!symmetric) q.zero_points.resize(q.scales.size());
  auto at = [&](int64_t row, int64_t column) { return static_cast<double>(transposed ? w[column * k + row] : w[row * n + column]); };
  for (int64_t j = 0; j < n; ++j)
    for (int64_t b = 0; b < q.blocks; ++b) {
      const int64_t first = b * block_size, last = std::min(k, first + block_size);
      double low = 0, high = 0, zero = 0;  // the padding past K counts as zeros, as 0 is in every range
      for (int64_t r = first; r < last; ++r) low = std::min(low, at(r, j)), high = std::max(high, at(r, j));
      float scale;
      if (symmetric) {
        zero = static_cast<double>(1 << (bits - 1));  // -m at code 0, 0 at 2^(bits-1); +m saturates a step short
        scale = static_cast<float>(std::max(-low, high) / zero);
      } else {
        scale = static_cast<float>((high - low) / top);
      }
      const double safe = scale > 0 ? scale : 1.0;  // an all-zero block: codes at the zero point
      if (!symmetric) zero = std::clamp(std::nearbyint(-low / safe), 0.0, static_cast<double>(top));
      const size_t at_block = static_cast<size_t>(j * q.blocks + b);
      q.scales[at_block] = scale;
      if (!symmetric) q.zero_points[at_block] = static_cast<uint8_t>(zero);
      uint8_t* bytes = q.codes.data() + at_block * static_cast<size_t>(block_bytes);
      for (int64_t r = first; r < last; ++r) {
        const int code = static_cast<int>(std::clamp(std::nearbyint(at(r, j) / safe) + zero, 0.0, static_cast<double>(top)));
        const int64_t p = r - first;
        bytes[p / per_byte] = static_cast<uint8_t>(bytes[p / per_byte] | (code << (p % per_byte * bits)));
      }
    }
  return q;
}

Rewritten weight_only(const ir::Graph& g, const Sites& sites, int bits, int64_t block_size, bool symmetric) {
  const ir::OpSchema* nbits = ir::find_op(ir::OpKind::matmul_nbits);
  if (!nbits) throw ir::Error(ir::ErrorCode::Unsupported, "quantize: this library's op set has no matmul_nbits");
  std::unordered_map<ir::NodeId, const Site*> product;
  std::unordered_map<ir::ValueId, const Site*> weight;
  for (const Site& s : sites.ops)
    if (g.nodes[s.node].op->kind == ir::OpKind::matmul) product[s.node] = &s, weight[s.weight] = &s;

  auto hook = [&](ir::Replay& r, ir::NodeId id) {
    const ir::Node& n = g.nodes[id];
    if (n.region != 0) return false;
    if (n.blob != ir::kNone && weight.count(n.first_output)) return true;  // the f32 weights: only their product read them
    const auto site = product.find(id);
    if (site == product.end()) return false;
    const ir::ValueId w = site->second->weight;
    const bool transposed = ir::MatmulAttrs(g, n).transpose_b;
    const ir::Shape ws = g.shape(w);
    const int64_t k = ws[transposed ? 1 : 0], cols = ws[transposed ? 0 : 1];
    const float* data = reinterpret_cast<const float*>(g.blobs[g.nodes[g.values[w].producer].blob]->data());
    const Blockwise q = quantize_blockwise(data, k, cols, transposed, bits, block_size, symmetric);
    ir::Builder& b = r.to();
    const ir::ValueId inputs[4] = {
        r.get(passes::operand(g, n, 0)),
        b.add_constant(ir::DType::U8, ir::Shape{cols, q.blocks, block_size * bits / 8}, q.codes.data(), q.codes.size()),
        b.add_constant(ir::DType::F32, ir::Shape{cols, q.blocks}, q.scales.data(), q.scales.size() * sizeof(float)),
        symmetric ? ir::kNone : b.add_constant(ir::DType::U8, ir::Shape{cols, q.blocks}, q.zero_points.data(), q.zero_points.size())};
    // accuracy_level 0: the activations stay f32, as the graph had them
    const ir::AttrArg attrs[3] = {ir::AttrArg::of_int(bits), ir::AttrArg::of_int(block_size), ir::AttrArg::of_int(0)};
    r.set(n.first_output, passes::added(r, *nbits, {inputs, 4}, {attrs, 3}));
    return true;
  };

  Sites products;  // the product sites alone, for the report
  for (const auto& [node, site] : product) products.ops.push_back(*site);
  return replayed(g, hook, nullptr, products);
}

}  // namespace esg::quantize
