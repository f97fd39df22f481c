#include "runtime/input_symbols.hpp"

#include <algorithm>
#include <string>

#include "ir/error.hpp"

namespace esg::runtime {

using ir::Error;
using ir::ErrorCode;

InputSymbols::InputSymbols(const ir::Graph& graph, const CompileOptions& options) : graph_(graph), grow_memory_(options.grow_memory) {
  const std::vector<std::string>& symbols = graph.symbols;
  auto index_of = [&](const std::string& name) { return static_cast<size_t>(std::find(symbols.begin(), symbols.end(), name) - symbols.begin()); };
  for (const auto& [name, size] : options.symbols) {
    if (index_of(name) == symbols.size()) throw Error(ErrorCode::InvalidArgument, "compile: the graph has no symbol `" + name + "`");
    if (size < 0) throw Error(ErrorCode::InvalidArgument, "compile: symbol `" + name + "` bound to a negative size");
  }
  for (const CompileOptions::Range& r : options.ranges) {
    const std::string what = "compile: the range " + std::to_string(r.min) + ".." + std::to_string(r.max) + " of `" + r.symbol + "`";
    if (index_of(r.symbol) == symbols.size()) throw Error(ErrorCode::InvalidArgument, what + ": the graph has no such symbol");
    if (r.min < 0 || r.min > r.max) throw Error(ErrorCode::InvalidArgument, what + " is empty or negative");
    const auto bound = std::find_if(options.symbols.begin(), options.symbols.end(), [&](const auto& p) { return p.first == r.symbol; });
    if (bound != options.symbols.end())
      throw Error(ErrorCode::InvalidArgument, what + ": the symbol is also bound to " + std::to_string(bound->second));
    if (std::count_if(options.ranges.begin(), options.ranges.end(), [&](const auto& o) { return o.symbol == r.symbol; }) > 1)
      throw Error(ErrorCode::InvalidArgument, what + ": the symbol has another range");
  }
  // Each symbol's allowed sizes, and the inputs' symbolic axes, resolved once for every run's check.
  limits_.assign(symbols.size(), {0, INT64_MAX, false});
  for (const auto& [name, size] : options.symbols) limits_[index_of(name)] = {size, size, true};
  for (const CompileOptions::Range& r : options.ranges) limits_[index_of(r.symbol)] = {r.min, r.max, false};
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    ir::Shape s = graph.shape(graph.inputs()[i]);
    for (size_t d = 0; d < s.rank(); ++d) {
      if (!ir::dim_is_symbolic(s[d])) continue;
      const uint32_t sym = ir::dim_symbol(s[d]);
      size_t first = axes_.size();
      for (size_t k = 0; k < axes_.size() && first == axes_.size(); ++k)
        if (axes_[k].symbol == sym) first = k;
      axes_.push_back({i, d, sym, first});
      if (!limits_[sym].bound) open_ = true;
      else s[d] = limits_[sym].min;
    }
    inputs_.push_back(s);
  }
}

void InputSymbols::check(const std::vector<ir::Shape>& shapes, const char* what) const {
  for (const Axis& a : axes_) {
    if (a.input >= shapes.size() || a.axis >= shapes[a.input].rank()) continue;  // the caller checks ranks
    const int64_t size = shapes[a.input][a.axis];
    const Limits& limits = limits_[a.symbol];
    const Axis& first = axes_[a.first];
    const bool consistent = &first == &a || first.input >= shapes.size() || first.axis >= shapes[first.input].rank() ||
                            shapes[first.input][first.axis] == size;
    if (size >= limits.min && size <= limits.max && consistent) continue;
    const std::string& name = graph_.symbols[a.symbol];
    const ir::ValueId input = graph_.inputs()[a.input];
    const std::string where = (*what ? std::string(what) + ": input " : std::string("input ")) + std::to_string(a.input) + " (" + graph_.value_name(input) + ": " +
                              graph_.type_str(input) + ") has " + name + " = " + std::to_string(size) + " on axis " + std::to_string(a.axis);
    if (limits.bound)
      throw Error(ErrorCode::Shape, where + ", but the model was compiled with " + name + " = " + std::to_string(limits.min));
    if (size < limits.min || size > limits.max)
      throw Error(ErrorCode::Shape, where + ", outside the range " + std::to_string(limits.min) + ".." + std::to_string(limits.max) +
                                        " the model was compiled for");
    throw Error(ErrorCode::Shape, where + ", but input " + std::to_string(first.input) + " (" +
                                      graph_.value_name(graph_.inputs()[first.input]) + ") has " + name + " = " +
                                      std::to_string(shapes[first.input][first.axis]));
  }
}

InputSymbols::SizeClass InputSymbols::size_class(const std::vector<ir::Shape>& shapes) const {
  std::vector<int64_t> largest(graph_.symbols.size(), -1);
  for (const Axis& a : axes_) {
    const Limits& limits = limits_[a.symbol];
    if (limits.bound || largest[a.symbol] >= 0) continue;
    int64_t top = 1;
    while (top < shapes[a.input][a.axis]) top *= 2;
    largest[a.symbol] = limits.max != INT64_MAX && !grow_memory_ ? limits.max : std::min(top, limits.max);
  }
  SizeClass c{{}, inputs_};
  for (int64_t size : largest)
    if (size >= 0) c.key.push_back(size);
  for (const Axis& a : axes_)
    if (!limits_[a.symbol].bound) c.largest[a.input][a.axis] = largest[a.symbol];
  return c;
}

}  // namespace esg::runtime
