#include "c_api/op_call.hpp"

#include <algorithm>

namespace esg::capi {

void init_options(void* options, size_t size, const void* d, size_t known) {
  if (!options || size < sizeof(size_t)) return;
  std::memset(options, 0, size);
  std::memcpy(options, d, std::min(size, known));
  std::memcpy(options, &size, sizeof size);  // struct_size, the first field of every options struct
}

void read_options(void* dst, size_t known, const void* src, const char* function) {
  if (!src) return;
  size_t size;
  std::memcpy(&size, src, sizeof size);
  if (size < sizeof(size_t))
    throw ir::Error(ir::ErrorCode::InvalidArgument, std::string(function) + ": options.struct_size is " + std::to_string(size) +
                                                        "; initialize the options with " + function + "_options_init() first");
  if (size > known) {
    // A caller built against newer headers: fine as long as it left every newer field unchanged.
    const auto* tail = static_cast<const unsigned char*>(src) + known;
    for (size_t i = 0; i < size - known; ++i)
      if (tail[i] != 0)
        throw ir::Error(ir::ErrorCode::Unsupported, std::string(function) + ": the options set a field this library (esgraph " +
                                                        esg_version() + ") does not know, at byte " + std::to_string(known + i) +
                                                        " of " + std::to_string(size) + "; the caller was built against newer headers");
  }
  std::memcpy(dst, src, std::min(size, known));
  std::memcpy(dst, &known, sizeof known);
}

bool OpCall::read_options(void* dst, size_t known, const void* src) {
  try {
    esg::capi::read_options(dst, known, src, function_);
    return true;
  } catch (const ir::Error& e) {
    fail(static_cast<esg_status>(e.code()), e.what());
    return false;
  }
}

const char* OpCall::input_name() const {
  return next_input_ < op_.inputs.size() ? op_.inputs[next_input_].name : "?";
}

void OpCall::take(esg_tensor t, size_t element) {
  if (failed_) return;
  if (tensor_ok(t, builder_)) {  // the common case, without building a message
    builder_ = t.priv_builder;
    inputs_.push_back(t.priv_value);
    return;
  }
  try {
    std::string what = std::string(function_) + ": input `" + input_name();
    if (element != SIZE_MAX) what += "[" + std::to_string(element) + "]";
    resolve(t, builder_, what + "`");
  } catch (const ir::Error& e) {
    // Record the error in the input's builder too, unless the input is what is stale.
    if (!builder_ && t.priv_builder && live_epoch(t.priv_builder) == t.priv_epoch) builder_ = t.priv_builder;
    fail(static_cast<esg_status>(e.code()), e.what());
  }
}

void OpCall::input(esg_tensor t) {
  take(t, SIZE_MAX);
  ++next_input_;
}

void OpCall::optional_input(esg_tensor t) {
  if (t.priv_builder) take(t, SIZE_MAX);
  else inputs_.push_back(ir::kNone);
  ++next_input_;
}

void OpCall::inputs(const esg_tensor* ts, size_t n) {
  if (n && !ts) {
    fail(ESG_ERR_INVALID_ARGUMENT, std::string(function_) + ": input `" + input_name() + "` has a count but no array");
  } else {
    for (size_t i = 0; i < n; ++i) take(ts[i], i);
  }
  ++next_input_;
}

void OpCall::body(esg_subgraph s) { bodies_.push_back(s); }

void OpCall::fail(esg_status status, const std::string& message) {
  if (failed_) return;
  failed_ = true;
  set_error(builder_, status, message);
}

esg_tensor OpCall::failed() { return esg_tensor{nullptr, 0, 0}; }

esg_tensor OpCall::finish() {
  if (failed_) return failed();
  if (builder_destroyed_) {
    fail(ESG_ERR_LIFETIME, std::string(function_) + ": the builder was destroyed");
    return failed();
  }
  if (!builder_) {
    fail(ESG_ERR_INVALID_ARGUMENT, std::string(function_) + ": the builder is NULL");
    return failed();
  }
  esg_tensor out{nullptr, 0, 0};
  const bool ok = guarded(builder_, [&] {
    const ir::NodeId id = builder_->core.add_op(op_, inputs_.span(), attrs_.span(), bodies_.span());
    out = make_tensor(builder_, builder_->core.graph().nodes[id].first_output);
  });
  return ok ? out : esg_tensor{nullptr, 0, 0};
}

}  // namespace esg::capi
