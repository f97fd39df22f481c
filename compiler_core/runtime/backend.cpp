#include "runtime/backend.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "ir/error.hpp"

namespace esg::runtime {

using ir::Error;
using ir::ErrorCode;

void BackendOptions::set(std::string name, int64_t value) { values_.emplace_back(std::move(name), value); }

void BackendOptions::parse(const std::string& text) {
  auto trim = [](std::string s) {
    const size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
  };
  size_t at = 0;
  while (at <= text.size()) {
    const size_t end = std::min(text.find(',', at), text.size());
    const std::string item = trim(text.substr(at, end - at));
    at = end + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string name = eq == std::string::npos ? "" : trim(item.substr(0, eq));
    const std::string value = eq == std::string::npos ? "" : trim(item.substr(eq + 1));
    if (name.empty() || value.empty())
      throw Error(ErrorCode::InvalidArgument, "compile: backend option `" + item + "` is not name=value");
    errno = 0;
    char* rest = nullptr;
    const long long v = std::strtoll(value.c_str(), &rest, 10);
    if (errno != 0 || rest == value.c_str() || *rest != '\0')
      throw Error(ErrorCode::InvalidArgument, "compile: backend option " + name + " takes an integer, got `" + value + "`");
    set(name, v);
  }
}

int64_t BackendOptions::get(const char* name, const std::vector<BackendOption>& declared) const {
  for (auto it = values_.rbegin(); it != values_.rend(); ++it)
    if (it->first == name) return it->second;
  for (const BackendOption& o : declared)
    if (std::string(o.name) == name) return o.default_value;
  throw Error(ErrorCode::Internal, std::string("backend option `") + name + "` read but not declared");
}

namespace {

class RunEachTime final : public PreparedRun {
 public:
  RunEachTime(const Program& program, std::vector<eval::TensorRef> inputs, std::vector<eval::TensorRef> outputs)
      : program_(program), inputs_(std::move(inputs)), outputs_(std::move(outputs)) {}
  void run(const eval::Parallel* parallel, const eval::RunControl& control) override {
    program_.run(inputs_, outputs_, nullptr, parallel, control);
  }

 private:
  const Program& program_;
  const std::vector<eval::TensorRef> inputs_, outputs_;
};

}  // namespace

std::unique_ptr<PreparedRun> Program::prepare(std::vector<eval::TensorRef> inputs, std::vector<eval::TensorRef> outputs) const {
  return std::make_unique<RunEachTime>(*this, std::move(inputs), std::move(outputs));
}

std::string Backend::cannot_run_target(const std::string& target) const {
  return target.empty() ? "" : std::string("backend '") + name() + "' runs no model compiled for the target '" + target + "'";
}

}  // namespace esg::runtime
