#include "ascend/kernel_build.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "ascend/acl_api.hpp"
#include "ir/error.hpp"
#include "runtime/file_replace.hpp"

extern char** environ;

namespace esg::ascend {
namespace {

namespace fs = std::filesystem;
using ir::Error;
using ir::ErrorCode;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Runs argv with stdout and stderr to `log`; the exit status (-1 if it could not start).
int run(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid;
  const int started = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (started != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string read_head(const std::string& path, size_t max_bytes) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.size() > max_bytes) text = text.substr(0, max_bytes) + "\n[...]";
  return text;
}

// `<binary stem>.json` naming the vector cores, as CANN's build writes beside a kernel object:
// aclrtBinaryLoadFromFile reads it for the kernels' core (else it takes the cube core on Atlas A2).
void write_core_json(const fs::path& binary) {
  fs::path json = binary;
  json.replace_extension(".json");
  if (fs::exists(json)) return;
  const std::string text = std::string("{\"magic\": \"") + acl::kVectorCoreMagic + "\"}\n";
  try {
    runtime::replace_file(json.string(), text.data(), text.size());
  } catch (const Error& e) {
    throw Error(ErrorCode::Backend, "ascend: cannot store the kernel's core file: " + std::string(e.what()));
  }
}

}  // namespace

std::string kernel_arch() { return env("ESG_ASCEND_ARCH").empty() ? "dav-c220-vec" : env("ESG_ASCEND_ARCH"); }

std::string arch_mismatch(const std::string& arch, const std::string& soc) {
  auto starts = [&](const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; };
  // 310P's core: Ascend C implements no DataCopyPad there (asc-devkit v8.5.0, basic_api/dav_m200:
  // each form reports "not supported" in a CPU-debug build and compiles to nothing for the
  // device), and the kernels copy every tile's tail with it, so a tail would stay unwritten.
  static const char* kNoPadCopy = "esgraph builds no kernels for dav-m200 (Ascend310P): they copy the tail of each tile with DataCopyPad, "
                                  "which Ascend C does not implement there (asc-devkit v8.5.0 compiles it to nothing for that core); "
                                  "the operator library's ops still run";
  if (starts(arch, "dav-m200")) return kNoPadCopy;
  const bool a2_or_a3 = (starts(soc, "Ascend910B") && soc.size() > 10 && std::isdigit(static_cast<unsigned char>(soc[10]))) ||
                        starts(soc, "Ascend910_93");
  if (!starts(arch, "dav-c220") || a2_or_a3) return {};
  const std::string fix = starts(soc, "Ascend310P") ? kNoPadCopy
                                                    : "esgraph builds no kernels for its core version yet (the first Ascend 910 and 310 have other ones)";
  return "the device is an " + soc + ", but esgraph's kernels are built for " + arch + " (Atlas A2/A3: Ascend910B<n>, Ascend910_93); " + fix;
}

Toolchain cann_toolchain() {
  std::vector<std::string> roots;
  for (const char* var : {"ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"})
    if (!env(var).empty()) roots.push_back(env(var));
  roots.insert(roots.end(), {"/usr/local/Ascend/ascend-toolkit/latest", "/usr/local/Ascend/cann"});
  struct utsname host;
  const std::string machine = uname(&host) == 0 ? host.machine : "x86_64";
  std::string tried;
  for (const std::string& root : roots) {
    // The Ascend C devkit: where CANN's own build looks for it (8.5 on: <root>/<arch>-linux;
    // before: <root>/compiler), its compiler ccec, or bisheng as 8.5 names it.
    for (const std::string& devkit : {root + "/" + machine + "-linux", root + "/tools", root + "/compiler", root + "/ascendc_devkit"}) {
      // The compiler CANN's build drives: bisheng where the devkit has 8.5's asc/ headers, ccec
      // before (both names ship in each).
      std::string compiler;
      const bool asc = fs::is_directory(devkit + "/asc/include");
      for (const char* name : {asc ? "bisheng" : "ccec", asc ? "ccec" : "bisheng"})
        if (compiler.empty() && fs::exists(devkit + "/ccec_compiler/bin/" + name)) compiler = devkit + "/ccec_compiler/bin/" + name;
      if (compiler.empty()) {
        tried += "\n  " + devkit + "/ccec_compiler/bin/{ccec,bisheng}";
        continue;
      }
      // The header directories CANN's build passes, those this install has: asc/ from 8.5 on,
      // tikcpp/tikcfw before.
      std::vector<std::string> includes;
      for (const char* dir : {"asc/include", "asc/include/adv_api", "asc/include/basic_api", "asc/include/utils", "asc/impl/adv_api",
                              "asc/impl/basic_api", "asc/impl/utils", "asc", "tikcpp/tikcfw", "tikcpp/tikcfw/impl", "tikcpp/tikcfw/interface"})
        if (fs::is_directory(devkit + "/" + dir)) includes.push_back("-I" + devkit + "/" + dir);
      const bool headers = fs::exists(devkit + "/asc/include/kernel_operator.h") || fs::exists(devkit + "/tikcpp/tikcfw/kernel_operator.h");
      if (!headers) {  // a partial install: another may be whole
        tried += "\n  " + compiler + ", but no Ascend C headers (kernel_operator.h) in " + devkit + "/asc/include or " + devkit +
                 "/tikcpp/tikcfw";
        continue;
      }
      // The linker CANN's build links device code with, beside the compiler.
      std::string linker;
      for (const std::string& at : {fs::path(compiler).parent_path().string() + "/ld.lld", devkit + "/bin/ld.lld"})
        if (linker.empty() && fs::exists(at)) linker = at;
      if (linker.empty()) {
        tried += "\n  " + compiler + ", but no linker ld.lld beside it (" + fs::path(compiler).parent_path().string() + "/ld.lld or " + devkit +
                 "/bin/ld.lld)";
        continue;
      }
      // CANN's flags for kernels of the vector cores (the devkit's bisheng_intf.cmake): its
      // stack sizes, overflow record, address transform, no scalar cache flush, no check of
      // kernel attributes across files; one kernel per binary, so the tiling key is 0; and the
      // devkit's version header, included first where the install has one.
      std::vector<std::string> command{compiler, "-c", "-O3", "-std=c++17", "-xcce", "--cce-aicore-only", "--cce-aicore-arch=" + kernel_arch(),
                                       "--cce-auto-sync", "--cce-disable-kernel-global-attr-check", "-mllvm", "-cce-aicore-stack-size=0x8000",
                                       "-mllvm", "-cce-aicore-function-stack-size=0x8000", "-mllvm", "-cce-aicore-record-overflow=true",
                                       "-mllvm", "-cce-aicore-addr-transform", "-mllvm", "-cce-aicore-dcci-insert-for-scalar=false",
                                       "-DTILING_KEY_VAR=0"};
      for (const std::string& version : {devkit + "/include/ascendc/asc_devkit_version.h", root + "/include/version/asc_devkit_version.h"})
        if (fs::exists(version)) {
          command.insert(command.end(), {"-include", version});
          break;
        }
      command.insert(command.end(), includes.begin(), includes.end());
      command.push_back("-I" + root + "/include");
      return {"cann", command, {linker, "-m", "aicorelinux", "-Ttext=0", "-static"}, ".bin"};
    }
  }
  throw Error(ErrorCode::Backend, "ascend: CANN's kernel compiler (ccec or bisheng) and Ascend C headers not found; set ASCEND_HOME_PATH. Looked at:" +
                                      tried);
}

Toolchain simulator_toolchain() {
  const std::string cxx = env("ESG_ASCEND_SIM_CXX").empty() ? ESG_ASCEND_SIM_CXX : env("ESG_ASCEND_SIM_CXX");
  const std::string include = env("ESG_ASCEND_SIM_INCLUDE").empty() ? ESG_ASCEND_SIM_INCLUDE : env("ESG_ASCEND_SIM_INCLUDE");
  if (!fs::exists(include + "/kernel_operator.h"))
    throw Error(ErrorCode::Backend, "ascend-sim: the simulator's Ascend C headers are not at " + include +
                                        " (build the tests tree, or set ESG_ASCEND_SIM_INCLUDE)");
  // Each vector instruction rounds its result: no multiply-add may be fused across them.
  return {"simulator", {cxx, "-std=c++17", "-O1", "-ffp-contract=off", "-c", "-fPIC", "-w", "-I" + include}, {cxx, "-shared"}, ".so"};
}

std::string kernel_cache_dir(const std::string& cache) {
  if (!cache.empty()) return (fs::path(cache) / "kernels").string();
  if (!env("ESG_KERNEL_CACHE").empty()) return env("ESG_KERNEL_CACHE");
  if (!env("XDG_CACHE_HOME").empty()) return env("XDG_CACHE_HOME") + "/esgraph/kernels";
  if (!env("HOME").empty()) return env("HOME") + "/.cache/esgraph/kernels";
  return (fs::temp_directory_path() / "esgraph-kernels").string();
}

BuiltKernel build_kernel(const Toolchain& toolchain, const KernelSource& source, const std::string& cache_dir) {
  // The key covers the source, the compiler command, the compiler's own file and the
  // simulator's headers, so an upgraded or changed toolchain never serves a stale binary.
  std::string identity = toolchain.name;
  for (const std::string& part : toolchain.command) identity += "\n" + part;
  for (const std::string& part : toolchain.link) identity += "\n" + part;
  uint64_t key = content_hash(identity + "\n" + source.code);
  std::error_code ec;
  if (const auto size = fs::file_size(toolchain.command.front(), ec); !ec) {
    const auto stamp = fs::last_write_time(toolchain.command.front(), ec).time_since_epoch().count();
    key = content_hash(std::to_string(size) + "@" + std::to_string(stamp), key);
  }
  if (toolchain.name == "simulator") {
    const std::string include = toolchain.command.back().substr(2);
    for (const char* header : {"/kernel_operator.h", "/aclsim_block.h"}) key = content_hash(read_head(include + header, SIZE_MAX), key);
  }
  char name[40];
  std::snprintf(name, sizeof name, "%s-%016" PRIx64, source.entry.c_str(), key);
  const fs::path dir = cache_dir;
  const fs::path binary = fs::absolute(dir / (std::string(name) + toolchain.extension));
  if (fs::exists(binary)) {
    write_core_json(binary);  // a cache from before the .json
    return {binary.string(), true};
  }
  fs::create_directories(dir, ec);
  if (ec) throw Error(ErrorCode::Backend, "ascend: cannot create the kernel cache " + dir.string() + ": " + ec.message());
  // Every build's own source, log and output; only the finished binary is renamed into place.
  const std::string own = runtime::private_path(name);
  const fs::path src = dir / (own + ".cpp");
  {
    std::ofstream out(src);
    out << source.code;
    if (!out) throw Error(ErrorCode::Backend, "ascend: cannot write " + src.string());
  }
  // Built under a private name and renamed: concurrent builds of one kernel never see half a file.
  const std::string object = (dir / (own + ".o")).string();
  const std::string tmp = (dir / (own + toolchain.extension + ".tmp")).string();
  const std::string log = (dir / (own + ".log")).string();
  std::vector<std::string> compile = toolchain.command, link = toolchain.link;
  compile.insert(compile.end(), {src.string(), "-o", object});
  link.insert(link.end(), {object, "-o", tmp});
  for (const auto& [step, argv] : {std::pair{"compiling", &compile}, std::pair{"linking", &link}}) {
    const int status = run(*argv, log);
    if (status == 0) continue;
    std::string command;
    for (const std::string& a : *argv) command += " " + a;
    fs::remove(object, ec);
    fs::remove(tmp, ec);
    throw Error(ErrorCode::Backend, std::string("ascend: ") + step + " kernel " + source.entry + " failed (" +
                                        (status < 0 ? "the program did not start" : "exit status " + std::to_string(status)) +
                                        "):" + command + "\n" + read_head(log, 4000) + "\n(source kept at " + src.string() + ")");
  }
  fs::remove(object, ec);
  write_core_json(binary);  // before the binary: a binary in the cache always has it
  fs::rename(tmp, binary, ec);
  if (ec) throw Error(ErrorCode::Backend, "ascend: cannot store " + binary.string() + ": " + ec.message());
  fs::remove(log, ec);
  fs::rename(src, dir / (std::string(name) + ".cpp"), ec);  // kept beside the binary, for reading
  return {binary.string(), false};
}

}  // namespace esg::ascend
