// The Ascend C lowering of each elementwise op, generated from its YAML `compute:` (see
// codegen/esgraph_codegen/compute.py, to_ascendc): vector instructions over f32 tiles.
#pragma once
#include <cstddef>

#include "ir/op_schema.hpp"

namespace esg::ascend {

struct AscendCOp {
  const ir::OpSchema* op;
  int temps;                          // temporary tiles the statements use ($t0 …)
  int masks;                          // bit masks the statements use ($m0 …, as uint16_t: $w0 …)
  const char* const* statements;      // with $y, $i<k>, $t<k>, $m<k>, $w<k>, $p<k>, $s (the math's buffer), $n and $N placeholders
  size_t num_statements;
  const char* unsupported;            // why there is no lowering, or nullptr
};

// The op's lowering, or nullptr for ops without a compute expression.
const AscendCOp* find_ascendc_op(const ir::OpSchema& op);

}  // namespace esg::ascend
