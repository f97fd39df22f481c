// The thread-local last error and the handle checks shared by all entry points.
#include <string>

#include "c_api/handles.hpp"

namespace esg::capi {
namespace {
// The status alone is read by every call (cleared at its start, returned at its end): a
// trivially constructed thread-local is one lookup, without the guard of one with a constructor.
thread_local esg_status t_status = ESG_OK;
thread_local std::string t_message, t_scratch;
}  // namespace

void set_error(esg_builder* b, esg_status status, const std::string& message) {
  t_status = status;
  t_message = message;
  if (b && builder_alive(b) && b->sticky_errors && b->first_status == ESG_OK) {
    b->first_status = status;
    b->first_error = message;
  }
}

void clear_error() {
  if (t_status == ESG_OK) return;  // the message goes with the status
  t_status = ESG_OK;
  t_message.clear();
}

ir::ValueId resolve(esg_tensor t, const esg_builder* expected, const std::string& what) {
  if (tensor_ok(t, expected)) return t.priv_value;
  if (!t.priv_builder)
    throw ir::Error(ir::ErrorCode::InvalidArgument,
                    what + " is not a valid tensor (the result of a failed call, or never set)");
  if (expected && t.priv_builder != expected)
    throw ir::Error(ir::ErrorCode::Lifetime, what + " belongs to another builder; tensors of two builders cannot be mixed");
  if (!builder_alive(t.priv_builder))
    throw ir::Error(ir::ErrorCode::Lifetime, what + " belongs to a builder that was destroyed and can no longer be used");
  // (A builder made at a destroyed one's address has a new epoch: its tensors land here too.)
  throw ir::Error(ir::ErrorCode::Lifetime,
                  what + " was made before its builder built its graph (or by a builder since destroyed) and can no longer be used");
}

esg_tensor make_tensor(esg_builder* b, ir::ValueId v) { return esg_tensor{b, v, b->epoch}; }

const char* scratch(std::string s) {
  t_scratch = std::move(s);
  return t_scratch.c_str();
}

}  // namespace esg::capi

extern "C" {

ESG_API const char* esg_last_error(void) { return esg::capi::t_message.c_str(); }
ESG_API esg_status esg_last_status(void) { return esg::capi::t_status; }

}  // extern "C"
