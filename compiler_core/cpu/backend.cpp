// The host CPU as a backend: no legalization (the reference evaluator runs every op), its
// grouping rules (fused_kernel.hpp), blocked channels for the ops with such kernels (oneDNN's
// convolutions, pools, global pools, channel concatenations and gathers: option channel_block),
// and the plan run as it is (program.hpp).
#include "cpu/factory.hpp"

#include <algorithm>
#include <iterator>
#include <memory>
#include <sstream>
#include <unordered_map>

#include "cpu/conv.hpp"
#include "cpu/conv_primitive.hpp"
#include "cpu/fast_kernels.hpp"
#include "cpu/fused_kernel.hpp"
#include "cpu/options.hpp"
#include "cpu/program.hpp"
#include "ir/error.hpp"
#include "runtime/plan.hpp"

namespace esg::cpu {
namespace {

class Backend final : public runtime::HostBackend {
 public:
  const char* name() const override { return "cpu"; }
  std::vector<runtime::BackendOption> options() const override;
  std::unique_ptr<ir::Graph> legalize(const ir::Graph& g) const override;
  runtime::GroupingRules grouping(const runtime::CompileOptions& options) const override;
  runtime::FormatRules formats(const runtime::CompileOptions& options) const override;
  void check(const runtime::CompileOptions& options) const override;
  std::string cannot_run(const runtime::Plan& plan, size_t index) const override;
  std::unique_ptr<runtime::Program> lower(const runtime::Plan& plan, const runtime::CompileOptions& options,
                                          const runtime::Program* donor, const runtime::Artifacts* loaded) const override;
  std::unique_ptr<runtime::HostLaunches> lower_for_host(const runtime::Plan& plan, const runtime::CompileOptions& options) const override {
    return std::make_unique<Program>(plan, options);
  }
  std::string target(const runtime::CompileOptions& options) const override;
  std::string cannot_run_target(const std::string& target) const override;
};

// Blocked channels by default where oneDNN's direct convolutions want them: 16 a block with
// AVX-512 (a vector of 16 floats), 8 with AVX2; row-major elsewhere. bench/RESULTS.md
// ("Convolutions on oneDNN primitives") has the measurement that chose it.
int64_t default_channel_block() {
  if (__builtin_cpu_supports("avx512f")) return 16;
  return __builtin_cpu_supports("avx2") ? 8 : 0;
}

// How a convolution runs among values in blocked channels `blocked`: the format of its result
// and whether it reads its images row-major. Blocked on a oneDNN direct kernel; in blocks of 8
// when only those have one (a grouped convolution of 8 channels a group: RegNet's), with a
// reorder on each side; reading row-major images with fewer channels than a block (blocks
// would mostly pad them: oneDNN has kernels for this first layer of a CNN); all row-major
// where oneDNN offers only its GEMM-based kernel (im2col, as the row-major path, with
// reorders besides).
struct ConvLayout {
  schedule::Format out;
  bool row_major_in;
};
ConvLayout conv_layout(const ir::Graph& g, const ir::Node& n, schedule::Format blocked) {
  if (!is_conv2d_f32(g, n)) return {schedule::Format::row_major(), true};
  auto direct = [&](schedule::Format src, schedule::Format dst) {
    const std::string kernel = ConvPrimitive::kernel_for(g, n, src, dst);
    return !kernel.empty() && kernel.find("gemm") == std::string::npos;
  };
  std::vector<schedule::Format> candidates{blocked};
  if (blocked.block == 16) candidates.push_back(schedule::Format::blocked_channels(8));
  for (const schedule::Format f : candidates) {
    if (g.shape(g.operands[n.first_input])[1] < f.block && direct(schedule::Format::row_major(), f)) return {f, true};
    if (direct(f, f)) return {f, false};
  }
  return {schedule::Format::row_major(), true};
}

std::vector<runtime::BackendOption> Backend::options() const { return backend_options(); }

std::unique_ptr<ir::Graph> Backend::legalize(const ir::Graph&) const { return nullptr; }

runtime::GroupingRules Backend::grouping(const runtime::CompileOptions&) const { return grouping_rules(); }

runtime::FormatRules Backend::formats(const runtime::CompileOptions& options) const {
  const int64_t block = options.backend_options.get("channel_block", this->options());
  if (block == 0) return {};
  if (block != 8 && block != 16)
    throw ir::Error(ir::ErrorCode::InvalidArgument, "compile: cpu option channel_block " + std::to_string(block) + " (0, 8 or 16)");
  runtime::FormatRules rules;
  const schedule::Format blocked = schedule::Format::blocked_channels(block);
  // Each convolution's layout decided once for both rules (it asks oneDNN for up to four
  // kernels); the rules live for one plan's format pass.
  auto decided = std::make_shared<std::unordered_map<const ir::Node*, ConvLayout>>();
  auto layout_of = [blocked, decided](const ir::Graph& g, const ir::Node& n) {
    const auto it = decided->find(&n);
    return it != decided->end() ? it->second : decided->emplace(&n, conv_layout(g, n, blocked)).first->second;
  };
  rules.format_of = [blocked, layout_of](const ir::Graph& g, const ir::Node& n) {
    if (n.op->kind == ir::OpKind::conv2d) return layout_of(g, n).out;
    // On oneDNN's int8 kernels, channels last: quantized activations stay so between them.
    if (n.op->kind == ir::OpKind::quantized_conv2d)
      return ConvPrimitive::kernel_for(g, n, schedule::Format::channels_last(), schedule::Format::channels_last()).empty()
                 ? schedule::Format::row_major()
                 : schedule::Format::channels_last();
    if (find_blocked_kernel(g, n, schedule::Format::channels_last())) return schedule::Format::channels_last();  // 8-bit pools
    return find_blocked_kernel(g, n, blocked) ? blocked : schedule::Format::row_major();
  };
  rules.reads_in_format = [layout_of](const ir::Graph& g, const ir::Node& n, size_t i) {
    if (n.op->kind == ir::OpKind::concat) return true;
    return i == 0 && (n.op->kind != ir::OpKind::conv2d || !layout_of(g, n).row_major_in);
  };
  rules.elementwise_any_format = true;
  return rules;
}

void Backend::check(const runtime::CompileOptions& options) const {
  if (options.precision == runtime::Precision::BF16 && !cpu_multiplies_bf16())
    throw ir::Error(ir::ErrorCode::Unsupported,
                    "compile: precision 'bf16' needs a CPU that multiplies bfloat16 (AVX512-BF16 or AMX-BF16); this one has neither");
}

std::string Backend::cannot_run(const runtime::Plan&, size_t) const { return {}; }

std::unique_ptr<runtime::Program> Backend::lower(const runtime::Plan& plan, const runtime::CompileOptions& options,
                                                 const runtime::Program* donor, const runtime::Artifacts* loaded) const {
  return std::make_unique<Program>(plan, options, dynamic_cast<const Program*>(donor), loaded);
}

// The features a plan's kernels were chosen for: the vectors its blocked formats fill (oneDNN
// has direct convolutions for them there), bfloat16 products.
std::string Backend::target(const runtime::CompileOptions& options) const {
  const int64_t block = options.backend_options.get("channel_block", this->options());
  std::string t = "x86-64";
  if (block == 16) t += " avx512f";
  if (block == 8) t += " avx2";
  if (options.precision == runtime::Precision::BF16) t += " bf16";
  return t;
}

std::string Backend::cannot_run_target(const std::string& target) const {
  std::istringstream words(target);
  std::string arch, feature, missing, has = "x86-64";
  words >> arch;
  if (arch != "x86-64") return "the model was compiled for " + arch + ", this machine is x86-64";
  const std::pair<const char*, bool> known[] = {{"avx2", __builtin_cpu_supports("avx2") != 0},
                                                {"avx512f", __builtin_cpu_supports("avx512f") != 0},
                                                {"bf16", cpu_multiplies_bf16()}};
  for (const auto& [name, present] : known)
    if (present) has += std::string(" ") + name;
  while (words >> feature) {
    const auto it = std::find_if(std::begin(known), std::end(known), [&](const auto& k) { return feature == k.first; });
    if (it == std::end(known) || !it->second) missing += " " + feature;
  }
  return missing.empty() ? "" : "the model's kernels need" + missing + " (compiled for " + target + "); this machine has " + has;
}

}  // namespace

std::vector<runtime::BackendOption> backend_options() {
  return {{"channel_block", 0, 16, default_channel_block(),
           "8 or 16: convolutions (on oneDNN primitives) and pools compute in nChw8c or nChw16c, and elementwise chains after "
           "them stay so; 0: every value row-major. The default is 16 with AVX-512, 8 with AVX2, else 0"},
          {"vnni", 0, 1, 1,
           "1: 8-bit products (matmul_integer) sum on AVX512-VNNI's vpdpbusd, four products a lane an instruction, where the CPU "
           "has it (elsewhere on AVX2's vpmaddwd, two); 0: on vpmaddwd everywhere"}};
}

integer_gemm::Kernel integer_kernel(const runtime::CompileOptions& options) {
  const bool vnni = options.backend_options.get("vnni", backend_options()) && integer_gemm::available(integer_gemm::Kernel::Vnni);
  return vnni ? integer_gemm::Kernel::Vnni : integer_gemm::Kernel::Pairs;
}

std::unique_ptr<runtime::HostBackend> make_backend() { return std::make_unique<Backend>(); }

}  // namespace esg::cpu
