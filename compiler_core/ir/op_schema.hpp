// What the graph core knows of an op: its signature, dtype constraints, attribute defaults and
// inference rule. One OpSchema per op, generated from op_defs/*.yaml into op_registry.cpp.
#pragma once
#include <cstdint>
#include <string_view>

#include "ir/dtype.hpp"
#include "ir/op_kind.gen.hpp"
#include "ir/span.hpp"

namespace esg::ir {

class InferContext;
using InferFn = void (*)(InferContext&);

// Attribute kinds; the values are the graph file's codes.
enum class AttrKind : uint8_t { Int = 1, Float, Bool, String, DType, Enum, IntList, FloatList };
const char* attr_kind_name(AttrKind k);

struct TypeVarSchema {
  const char* name;
  uint32_t allowed;  // dtype_bit() mask
};

struct InputSchema {
  static constexpr int8_t kFixed = -1, kAny = -2;
  const char* name;
  int8_t type_var;  // index into type_vars, or kFixed (use `fixed`) or kAny
  DType fixed;
  bool optional;
  bool variadic;
  uint32_t min_count;
};

enum class OutputType : uint8_t { TypeVar, Fixed, FromAttr, FromSubgraph, Data };
enum class OutputCount : uint8_t { One, FromAttr, FromInput, FromSubgraph };

struct OutputSchema {
  const char* name;
  OutputType type;
  int8_t type_var;   // OutputType::TypeVar
  DType fixed;       // OutputType::Fixed
  int8_t ref;        // the attribute of FromAttr
  OutputCount count;
  int8_t count_ref;  // the attribute, input or subgraph the count comes from
};

struct AttrSchema {
  const char* name;
  AttrKind kind;
  bool required;
  // Default (unused when required): Int/Bool/DType/Enum in i, Float in f, String in s,
  // lists in ints/floats with list_size elements.
  int64_t i;
  double f;
  const char* s;
  const int64_t* ints;
  const double* floats;
  uint32_t list_size;
  bool has_lo, has_hi;
  double lo, hi;
  const char* const* enum_values;
  uint32_t num_enum_values;
};

struct SubgraphSchema {
  const char* name;
  int8_t params_input;  // the variadic input the body's parameters mirror, or -1
};

struct OpSchema {
  const char* name;  // for messages, files and frontends; the core compares `kind`
  OpKind kind;
  uint32_t since;
  const char* infer_name;
  InferFn infer;
  Span<TypeVarSchema> type_vars;
  Span<InputSchema> inputs;
  Span<OutputSchema> outputs;
  Span<AttrSchema> attrs;
  Span<SubgraphSchema> subgraphs;
  bool elementwise;  // has a compute expression
  // Some output's size is known only once the op has run (nonzero's count): its inferred shape
  // holds a symbol of its own there (InferContext::data_symbol), and a run stops before the op,
  // runs it, and goes on with the sizes it found (ir/cut.hpp).
  bool sized_by_data;
  // The op of fixed sizes a sized op runs as, once its inputs named like that op's attributes
  // have been read as them (reshape_to as reshape); "" for none (codegen checks the match).
  const char* static_form;
  // Exchanges data with other ranks (a collective, send, recv; op_defs/collective.yaml): every
  // rank must run it, the same ones in the same order, so no pass folds, merges or drops it, and
  // it runs on the plan's communication stream.
  bool communicates;

  int attr_index(std::string_view attr) const;  // -1 if absent
  int input_index(std::string_view input) const;
  int variadic_input() const;                    // -1 if none
};

// The generated registry.
Span<const OpSchema*> all_ops();
const OpSchema* find_op(std::string_view name);  // nullptr if unknown
const OpSchema* find_op(OpKind kind);             // nullptr if this op set lacks it
// The built-in node kind that carries data rather than math; find_op knows it too.
const OpSchema& constant_op();

}  // namespace esg::ir
