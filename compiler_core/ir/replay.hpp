// Copying a graph through a Builder, node by node, bodies included: every node is re-checked
// and re-inferred on the way. With concrete input shapes this specializes a graph; with a hook
// that handles some nodes itself (drops them, maps their outputs to other values, folds them to
// constants) it is the mechanism behind every rewriting pass.
#pragma once
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "ir/builder.hpp"

namespace esg::ir {

class Replay {
 public:
  // Returns true when it handled the node (mapping its outputs with set(), or dropping it).
  using Hook = std::function<bool(Replay&, NodeId)>;

  Replay(const Graph& from, Builder& to, Hook hook = {}) : from_(from), to_(to), hook_(std::move(hook)) {}

  const Graph& from() const { return from_; }
  Builder& to() { return to_; }
  // The new value of an old one (a body's capture resolves to the outer value it stands for).
  ValueId get(ValueId old);
  bool has(ValueId old) const { return map_.count(old) != 0; }
  void set(ValueId old, ValueId now) { map_[old] = now; }

  void region(RegionId r);
  // The default: the node copied as it is (names, scope, annotations, dependencies too).
  NodeId copy(NodeId n);

 private:
  const Graph& from_;
  Builder& to_;
  Hook hook_;
  std::unordered_map<ValueId, ValueId> map_;
  std::unordered_map<NodeId, NodeId> nodes_;
};

// The graph rebuilt: inputs (with `input_shapes` if given, else their own), region 0 replayed
// with `hook`, the same outputs.
std::unique_ptr<Graph> rebuild(const Graph& g, const std::vector<Shape>* input_shapes, const Replay::Hook& hook = {});

}  // namespace esg::ir
