#include "ir/op_schema.hpp"

#include <array>

#include <cstring>

#include "ir/infer.hpp"

namespace esg::ir {

const char* attr_kind_name(AttrKind k) {
  switch (k) {
    case AttrKind::Int: return "an int";
    case AttrKind::Float: return "a float";
    case AttrKind::Bool: return "a bool";
    case AttrKind::String: return "a string";
    case AttrKind::DType: return "a dtype";
    case AttrKind::Enum: return "an enum value";
    case AttrKind::IntList: return "a list of ints";
    case AttrKind::FloatList: return "a list of floats";
  }
  return "an unknown kind";
}

int OpSchema::attr_index(std::string_view attr) const {
  for (size_t i = 0; i < attrs.size(); ++i)
    if (attr == attrs[i].name) return static_cast<int>(i);
  return -1;
}

int OpSchema::input_index(std::string_view input) const {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (input == inputs[i].name) return static_cast<int>(i);
  return -1;
}

int OpSchema::variadic_input() const {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].variadic) return static_cast<int>(i);
  return -1;
}

namespace {
// Constants carry their dtype, shape and bytes in the node itself; nothing to infer.
void infer_constant(InferContext&) {}
const OutputSchema kConstantOutputs[] = {{"y", OutputType::Data, -1, DType::Invalid, -1, OutputCount::One, -1}};
const OpSchema kConstant = {"constant", OpKind::constant, 1, "constant", infer_constant, {}, {}, {kConstantOutputs, 1}, {}, {}, false, false, "", false};
}  // namespace

const OpSchema& constant_op() { return kConstant; }

const OpSchema* find_op(std::string_view name) {
  if (name == kConstant.name) return &kConstant;
  for (const OpSchema* op : all_ops())
    if (name == op->name) return op;
  return nullptr;
}

const OpSchema* find_op(OpKind kind) {
  static const std::array<const OpSchema*, kNumOpKinds> by_kind = [] {
    std::array<const OpSchema*, kNumOpKinds> t{};
    t[static_cast<size_t>(OpKind::constant)] = &kConstant;
    for (const OpSchema* op : all_ops()) t[static_cast<size_t>(op->kind)] = op;
    return t;
  }();
  return by_kind[static_cast<size_t>(kind)];
}

}  // namespace esg::ir
