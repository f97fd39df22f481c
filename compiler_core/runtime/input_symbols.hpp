// The symbolic sizes of a model's inputs, resolved once from the graph and the compile options:
// which sizes the options bind or give a range, where each symbol sits among the inputs, the
// check every run's sizes pass, and the size class a run's sizes fall in (the key of the
// symbolic plan that serves them, with the largest sizes its memory is planned for).
#pragma once
#include <cstdint>
#include <vector>

#include "ir/graph.hpp"
#include "runtime/compile_options.hpp"

namespace esg::runtime {

class InputSymbols {
 public:
  // Refuses (ir::Error InvalidArgument) a bound or ranged symbol the graph lacks, a negative
  // size, an empty range, and a symbol both bound and ranged or ranged twice.
  InputSymbols(const ir::Graph& graph, const CompileOptions& options);

  // The inputs' shapes, bound symbols fixed and open ones kept symbolic.
  const std::vector<ir::Shape>& inputs() const { return inputs_; }
  // Whether an input's symbol is open (neither bound nor fixed): its sizes come with each run.
  bool open() const { return open_; }
  // Refuses (ir::Error Shape) sizes that disagree with a bound size or a range, or a symbol
  // with two sizes; `what` names the call ("": the message names none). Comparisons only: a message is written only for a
  // size that fails.
  void check(const std::vector<ir::Shape>& input_shapes, const char* what) const;

  // The size class of a run's sizes: per open symbol, its range's end (or, growing memory or
  // without a range, the size rounded up to a power of two), and the inputs at those sizes.
  struct SizeClass {
    std::vector<int64_t> key;          // the class's largest size per open symbol, in symbol order
    std::vector<ir::Shape> largest;    // the inputs' shapes at those sizes
  };
  SizeClass size_class(const std::vector<ir::Shape>& input_shapes) const;

 private:
  const ir::Graph& graph_;
  bool grow_memory_;
  struct Limits {
    int64_t min, max;  // the sizes a symbol may take: its bound size, its range, or any
    bool bound;        // fixed in the options (rather than a range)
  };
  std::vector<Limits> limits_;  // per symbol of the graph
  struct Axis {
    size_t input, axis;
    uint32_t symbol;
    size_t first;  // the index here of the symbol's first axis, whose size every other must match
  };
  std::vector<Axis> axes_;  // the inputs' symbolic axes, in input order
  std::vector<ir::Shape> inputs_;
  bool open_ = false;
};

}  // namespace esg::runtime
