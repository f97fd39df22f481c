// The graph core's errors. Codes equal the C ABI's esg_status values, so the C layer passes
// them through unchanged.
#pragma once
#include <stdexcept>
#include <string>

namespace esg::ir {

enum class ErrorCode : int {
  InvalidArgument = 1,
  Shape = 2,
  DType = 3,
  Attribute = 4,
  Lifetime = 5,
  Format = 6,
  Io = 7,
  Unsupported = 8,
  Internal = 9,
  OutOfMemory = 10,
  Backend = 11,  // a device runtime that is missing or failed
  Limit = 12,    // beyond a limit of the graph or the options: nesting depth, nodes, loop iterations
  Cancelled = 13,  // a run stopped by Model::cancel
  Communication = 14,  // a collective whose ranks disagree, one that never arrived, a transport's failure
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace esg::ir
