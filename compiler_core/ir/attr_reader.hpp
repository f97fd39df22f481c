// What the generated attribute views (ir/op_attrs.gen.hpp) read a node through: attributes by
// position, with the default for a position an older op set's node does not have, and axes
// normalized against a tensor's rank.
#pragma once
#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "ir/error.hpp"
#include "ir/graph.hpp"

namespace esg::ir {

class AttrReader {
 public:
  // A view read from a node of an op it does not serve is a bug of the caller.
  AttrReader(const Graph& g, const Node& n, std::initializer_list<OpKind> kinds) : g_(g), n_(n) {
    if (std::find(kinds.begin(), kinds.end(), n.op->kind) == kinds.end())
      throw Error(ErrorCode::Internal, std::string("attributes of another op read from a `") + n.op->name + "` node");
  }

  int64_t i(size_t at, int64_t fallback) const { return has(at) ? attr(at).i : fallback; }
  double f(size_t at, double fallback) const { return has(at) ? attr(at).f : fallback; }
  std::string_view str(size_t at, std::string_view fallback) const { return has(at) ? std::string_view(g_.string_of(attr(at))) : fallback; }
  Span<int64_t> ints(size_t at, Span<int64_t> fallback) const { return has(at) ? g_.ints_of(attr(at)) : fallback; }
  Span<double> floats(size_t at, Span<double> fallback) const { return has(at) ? g_.floats_of(attr(at)) : fallback; }

  size_t input_rank(size_t operand) const { return g_.values[g_.operands[n_.first_input + operand]].rank; }
  size_t output_rank(size_t output) const { return g_.values[n_.first_output + output].rank; }

  static size_t axis(int64_t axis, size_t rank) { return static_cast<size_t>(axis < 0 ? axis + static_cast<int64_t>(rank) : axis); }
  static std::vector<size_t> axes(Span<int64_t> list, size_t rank) {
    std::vector<size_t> out;
    out.reserve(list.size());
    for (int64_t a : list) out.push_back(axis(a, rank));
    return out;
  }

 private:
  bool has(size_t at) const { return at < n_.op->attrs.size(); }
  const AttrValue& attr(size_t at) const { return g_.attrs[n_.first_attr + at]; }

  const Graph& g_;
  const Node& n_;
};

}  // namespace esg::ir
