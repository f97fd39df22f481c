// The Ascend backend's parts below the model: the generated Ascend C of a few patterns as golden
// files (ESG_UPDATE_GOLDEN=1 rewrites them), the tiling over cores, and the simulated device's
// own checks (it must catch what real hardware would fault on, or the backend's tests would
// prove nothing): out-of-bounds and misaligned copies, Unified Buffer overflow, queue misuse,
// use after free, copies of the wrong kind.
#include <doctest/doctest.h>

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "ascend/acl_library.hpp"
#include "ascend/aclnn_library.hpp"
#include "ascend/aclnn_lowerings.hpp"
#include "ascend/kernel_build.hpp"
#include "ascend/kernel_common.hpp"
#include "ascend/kernel_source.hpp"
#include "ascend/row_kernel_source.hpp"
#include "backends/registry.hpp"
#include "ir/builder.hpp"
#include "ir_build.hpp"
#include "ir/error.hpp"
#include "ir/ops.gen.hpp"
#include "runtime/plan.hpp"

using namespace esg;
using ir::ValueId;
using test::node;
using test::scalar;

namespace {

// The one group the device would launch for the graph of `outputs`.
std::string kernel_of(ir::Builder& b, std::vector<ValueId> outputs) {
  const auto g = b.finish({outputs.data(), outputs.size()});
  const auto groups = runtime::find_groups(*g, backends::find("ascend-sim")->grouping(runtime::CompileOptions{}));
  REQUIRE(groups.size() == 1);
  return ascend::generate_kernel(*g, groups[0]).code;
}

void check_golden(const std::string& name, const std::string& code) {
  const std::string path = std::string(ESG_ASCEND_GOLDEN_DIR) + "/" + name + ".cpp";
  const char* update = std::getenv("ESG_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    std::ofstream(path) << code;
    return;
  }
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "missing golden file " << path << " (run with ESG_UPDATE_GOLDEN=1)");
  std::stringstream want;
  want << in.rdbuf();
  CHECK_MESSAGE(code == want.str(), "generated Ascend C differs from " << path);
}

}  // namespace

TEST_CASE("generated Ascend C: golden kernels of six patterns") {
  {
    // A chain with a broadcast scalar: sigmoid(x * y + 1.5).
    ir::Builder b;
    const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{64});
    const ValueId y = b.add_input("y", ir::DType::F32, ir::Shape{64});
    const ValueId z = node(b, ir::ops::sigmoid, {node(b, ir::ops::add, {node(b, ir::ops::mul, {x, y}), scalar(b, 1.5f)})});
    check_golden("chain_with_scalar", kernel_of(b, {z}));
  }
  {
    // GELU's tanh form: a select on an attribute becomes a branch on a literal.
    ir::Builder b;
    const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{8, 8});
    const ValueId z = node(b, ir::ops::gelu, {x}, {ir::AttrArg::of_enum(1)});
    check_golden("gelu_tanh", kernel_of(b, {z}));
  }
  {
    // A bias row broadcast over [N, 24], and two outputs.
    ir::Builder b;
    const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{5, 24});
    const ValueId bias = b.add_input("bias", ir::DType::F32, ir::Shape{24});
    const ValueId sum = node(b, ir::ops::add, {x, bias});
    const ValueId act = node(b, ir::ops::relu, {sum});
    const ValueId twice = node(b, ir::ops::mul, {sum, scalar(b, 2.0f)});
    check_golden("bias_two_outputs", kernel_of(b, {act, twice}));
  }
  {
    // The same instructions over half tiles.
    ir::Builder b;
    const ValueId x = b.add_input("x", ir::DType::F16, ir::Shape{32});
    check_golden("silu_f16", kernel_of(b, {node(b, ir::ops::silu, {x})}));
  }
  {
    // Masks: where(x > y and not isnan(y), x, y * 0.5): comparisons as bits, a bool value
    // inside the group, a select per element.
    ir::Builder b;
    const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{300});
    const ValueId y = b.add_input("y", ir::DType::F32, ir::Shape{300});
    const ValueId keep = node(b, ir::ops::logical_and, {node(b, ir::ops::greater, {x, y}), node(b, ir::ops::logical_not, {node(b, ir::ops::is_nan, {y})})});
    check_golden("where_by_mask", kernel_of(b, {node(b, ir::ops::where, {keep, x, node(b, ir::ops::mul, {y, scalar(b, 0.5f)})})}));
  }
  {
    // Types at the edges: an f16 input of an f32 group, a bool input, a bool and an f16 result.
    ir::Builder b;
    const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{300});
    const ValueId h = b.add_input("h", ir::DType::F16, ir::Shape{300});
    const ValueId keep = b.add_input("keep", ir::DType::Bool, ir::Shape{300});
    const ValueId wide = node(b, ir::ops::cast, {h}, {ir::AttrArg::of_dtype(ir::DType::F32)});
    const ValueId prod = node(b, ir::ops::where, {keep, node(b, ir::ops::mul, {x, wide}), x});
    const ValueId narrow = node(b, ir::ops::cast, {prod}, {ir::AttrArg::of_dtype(ir::DType::F16)});
    check_golden("types_at_the_edges", kernel_of(b, {node(b, ir::ops::greater, {prod, scalar(b, 0.0f)}), narrow}));
  }
}

TEST_CASE("generated Ascend C: golden row kernels") {
  {
    // layer_norm over the last two axes with a scale and a bias, f32.
    ir::Builder b;
    const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{4, 6, 10});
    const ValueId scale = b.add_input("scale", ir::DType::F32, ir::Shape{6, 10});
    const ValueId bias = b.add_input("bias", ir::DType::F32, ir::Shape{6, 10});
    const ValueId y = node(b, ir::ops::layer_norm, {x, scale, bias}, {ir::AttrArg::of_int(1), ir::AttrArg::of_float(1e-5)});
    const auto g = b.finish({&y, 1});
    check_golden("layer_norm_rows", ascend::generate_row_kernel(*g, g->nodes[g->values[g->outputs()[0]].producer]).code);
  }
  {
    // Attention's softmax(x * scale + mask) over f16 scores, the mask [B, 1, 1, S] read in place.
    ir::Builder b;
    const ValueId x = b.add_input("x", ir::DType::F16, ir::Shape{2, 4, 8, 8});
    const ValueId mask = b.add_input("mask", ir::DType::F16, ir::Shape{2, 1, 1, 8});
    const ValueId y = node(b, ir::ops::softmax, {x, mask}, {ir::AttrArg::of_int(-1), ir::AttrArg::of_float(0.125)});
    const auto g = b.finish({&y, 1});
    check_golden("masked_softmax_f16", ascend::generate_row_kernel(*g, g->nodes[g->values[g->outputs()[0]].producer]).code);
  }
}

TEST_CASE("tiling: whole tiles per block, every element covered once, at most `cores` blocks") {
  for (uint64_t total : {1ull, 63ull, 64ull, 65ull, 1000ull, 12224ull * 3 + 1}) {
    for (uint32_t cores : {1u, 2u, 3u, 8u, 64u}) {
      uint32_t blocks = 0;
      const ascend::Tiling t = ascend::tile_over_cores(total, 64, cores, &blocks);
      CHECK(t.total == total);
      CHECK(t.per_block % 64 == 0);
      CHECK(blocks >= 1);
      CHECK(blocks <= cores);
      CHECK(uint64_t(blocks) * t.per_block >= total);           // covered
      CHECK(uint64_t(blocks - 1) * t.per_block < total);        // no empty block
    }
  }
}

namespace {

// How a binary says where its kernel runs: `records` follow the kernel in its source
// (.ascend.meta records), and the .json beside it names `magic` (no .json for "").
struct Packaging {
  std::string records;
  std::string magic = ascend::acl::kVectorCoreMagic;  // what build_kernel writes
};

// The simulated device, with a kernel built from hand-written Ascend C; faults come back at
// the stream's synchronization.
struct SimDevice {
  std::shared_ptr<ascend::AclLibrary> acl = ascend::AclLibrary::open(ascend::AclLibrary::simulator_path());
  ascend::acl::Stream stream = nullptr;
  std::vector<void*> allocations;
  SimDevice() {
    ESG_ACL(*acl, aclrtSetDevice, 0);
    ESG_ACL(*acl, aclrtCreateStream, &stream);
  }
  ~SimDevice() {
    for (const std::string& f : files) std::filesystem::remove(f);
    for (void* p : allocations) acl->aclrtFree(p);
    acl->aclrtDestroyStream(stream);
    acl->aclrtResetDevice(0);
  }
  void* malloc(size_t bytes) {
    void* p = nullptr;
    ESG_ACL(*acl, aclrtMallocAlign32, &p, bytes, ascend::acl::kHugeFirst);
    allocations.push_back(p);
    return p;
  }
  // The binary of the kernel `k(GM_ADDR a, GM_ADDR b)` running `body`, packaged as `how`.
  std::string binary(const std::string& body, const Packaging& how) {
    ascend::KernelSource src;
    src.entry = "k";
    src.code = "#include \"kernel_operator.h\"\nusing namespace AscendC;\nextern \"C\" __global__ __aicore__ void k(GM_ADDR a, GM_ADDR b) {\n" +
               body + "\n}\n" + how.records;
    const std::string built = ascend::build_kernel(ascend::simulator_toolchain(), src, ascend::kernel_cache_dir("")).path;
    // A name never used before in this process: the dynamic loader keeps a library with unique
    // symbols loaded after its unload, and would hand back the old one for the same path.
    static int made = 0;
    const auto stem = std::filesystem::temp_directory_path() / ("esg-packaged-" + std::to_string(::getpid()) + "-" + std::to_string(made++));
    files.push_back(stem.string() + ".so");
    files.push_back(stem.string() + ".json");
    std::filesystem::copy_file(built, files[files.size() - 2], std::filesystem::copy_options::overwrite_existing);
    if (!how.magic.empty()) std::ofstream(files.back()) << "{\"magic\": \"" << how.magic << "\"}\n";
    return files[files.size() - 2];
  }
  std::vector<std::string> files;  // the binaries and .json files made, removed at the end
  // Loads `path`: the status, and the message when it failed.
  std::pair<int, std::string> load(const std::string& path, ascend::acl::BinHandle* bin) {
    const int status = acl->aclrtBinaryLoadFromFile(path.c_str(), nullptr, bin);
    return {status, status ? acl->recent_error() : std::string()};
  }
  // Runs `body` as the kernel `k(GM_ADDR a, GM_ADDR b)` over 1 block, its binary packaged as
  // `how`; the sync's status and message.
  std::pair<int, std::string> run(const std::string& body, void* a, void* b, const Packaging& how = {}) {
    ascend::acl::BinHandle bin = nullptr;
    ascend::acl::FuncHandle fn = nullptr;
    const auto [loaded, why] = load(binary(body, how), &bin);
    REQUIRE_MESSAGE(loaded == 0, why);
    ESG_ACL(*acl, aclrtBinaryGetFunction, bin, "k", &fn);
    ascend::acl::ArgsHandle args = nullptr;
    ascend::acl::ParamHandle param = nullptr;
    ESG_ACL(*acl, aclrtKernelArgsInit, fn, &args);
    for (void* p : {a, b}) ESG_ACL(*acl, aclrtKernelArgsAppend, args, &p, sizeof p, &param);
    ESG_ACL(*acl, aclrtKernelArgsFinalize, args);
    ESG_ACL(*acl, aclrtLaunchKernelWithConfig, fn, 1, stream, nullptr, args, nullptr);
    const int status = acl->aclrtSynchronizeStream(stream);
    const std::string message = status ? acl->recent_error() : std::string();
    acl->aclrtBinaryUnLoad(bin);
    return {status, message};
  }
};

// A kernel's .ascend.meta record with one type-length-value entry: kernel type `type`.
std::string meta_record(const char* kernel, int type) {
  return std::string("static const struct { unsigned short t, l; unsigned int v; } ") + kernel + "_meta_" + std::to_string(type) +
         " __attribute__((used, section(\".ascend.meta." + kernel + "\"))) = {1, 4, " + std::to_string(type) + "};\n";
}

}  // namespace

TEST_CASE("the simulated device faults where the hardware would") {
  SimDevice dev;
  float* a = static_cast<float*>(dev.malloc(32 * 4));
  float* b = static_cast<float*>(dev.malloc(64 * 4));
  const std::string pipe = "TPipe pipe; TQue<QuePosition::VECIN, 2> q; pipe.InitBuffer(q, 2, 256 * 4);\n"
                           "GlobalTensor<float> ga, gb; ga.SetGlobalBuffer((__gm__ float*)a, 1 << 20); gb.SetGlobalBuffer((__gm__ float*)b, 1 << 20);\n";
  // Where a kernel runs, as CANN's runtime v8.5.0 decides: its .ascend.meta record when every
  // kernel has one, else the binary's .json.
  const std::string use_a_tile = pipe + "q.FreeTensor(q.AllocTensor<float>());";
  SUBCASE("a binary with neither a record nor a .json is refused at load") {
    ascend::acl::BinHandle bin = nullptr;
    const auto [status, message] = dev.load(dev.binary(use_a_tile, {"", ""}), &bin);
    CHECK(status == 100000);
    CHECK(message.find("gives its kernels no .ascend.meta records and there is no") != std::string::npos);
  }
  SUBCASE("a .json naming the cube core: the kernel runs there and faults") {
    const auto [status, message] = dev.run(use_a_tile, a, b, {"", "RT_DEV_BINARY_MAGIC_ELF_AICUBE"});
    CHECK(status == 507015);
    CHECK(message.find("kernel k ran on the cube core") != std::string::npos);
  }
  SUBCASE("a record for every kernel decides over the .json") {
    CHECK(dev.run(use_a_tile, a, b, {meta_record("k", 3), "RT_DEV_BINARY_MAGIC_ELF_AICUBE"}).first == 0);
    CHECK(dev.run(use_a_tile, a, b, {meta_record("k", 3), ""}).first == 0);
    const auto [status, message] = dev.run(use_a_tile, a, b, {meta_record("k", 2)});
    CHECK(status == 507015);
    CHECK(message.find("kernel k ran on the cube core") != std::string::npos);
  }
  SUBCASE("a record without a valid kernel type, or more records than kernels, fails the load") {
    ascend::acl::BinHandle bin = nullptr;
    auto [status, message] = dev.load(dev.binary(use_a_tile, {meta_record("k", 0)}), &bin);
    CHECK(status == 100000);
    CHECK(message.find("kernel k has no valid kernel type in an .ascend.meta record") != std::string::npos);
    std::tie(status, message) = dev.load(dev.binary(use_a_tile, {meta_record("k", 3) + meta_record("k_helper", 3)}), &bin);
    CHECK(status == 100000);
    CHECK(message.find("has 2 .ascend.meta records for 1 kernels") != std::string::npos);
  }
  SUBCASE("every generated kernel carries its vector-core record") {
    ir::Builder bld;
    const ValueId x = bld.add_input("x", ir::DType::F32, ir::Shape{8});
    const std::string code = kernel_of(bld, {node(bld, ir::ops::exp, {x})});
    CHECK(code.find("section(\".ascend.meta.esg_") != std::string::npos);
    CHECK(code.find("= {1, 4, 3};") != std::string::npos);
  }
  SUBCASE("load options on a file are refused, as CANN refuses the magic option there") {
    ascend::acl::BinHandle bin = nullptr;
    int options = 0;
    CHECK(dev.acl->aclrtBinaryLoadFromFile("/nonexistent.o", &options, &bin) == 107000);
  }
  SUBCASE("a well-behaved kernel runs") {
    const auto [status, message] = dev.run(pipe + "LocalTensor<float> t = q.AllocTensor<float>(); DataCopy(t, ga, 32); q.EnQue(t);\n"
                                                  "t = q.DeQue<float>(); Adds(t, t, 1.0f, 32);\n" + ascend::pipe_flag("V_MTE3") +
                                                  " DataCopy(gb, t, 32); q.FreeTensor(t);",
                                           a, b);
    CHECK(status == 0);
  }
  // The copy pipe and the vector pipe run apart: a queue or a flag orders them.
  SUBCASE("a vector instruction on a copy in that nothing ordered before it") {
    for (const char* body : {"LocalTensor<float> t = q.AllocTensor<float>(); DataCopy(t, ga, 32); Exp(t, t, 32);",
                             "TBuf<TPosition::VECCALC> v; pipe.InitBuffer(v, 256); LocalTensor<float> t = v.Get<float>(); DataCopy(t, ga, 32); "
                             "Adds(t, t, 1.0f, 32);"}) {
      const auto [status, message] = dev.run(pipe + body, a, b);
      CHECK(status == 507015);
      CHECK(message.find("uses Unified Buffer bytes that a copy from global memory wrote with nothing ordering the copy before it") !=
            std::string::npos);
    }
  }
  SUBCASE("a copy out of bytes the vector pipe wrote, with nothing ordering it after them") {
    const std::string compute = "TBuf<TPosition::VECCALC> v; pipe.InitBuffer(v, 256); LocalTensor<float> t = v.Get<float>(); "
                                "Duplicate(t, 1.0f, 32); ";
    const auto [status, message] = dev.run(pipe + compute + "DataCopy(gb, t, 32);", a, b);
    CHECK(status == 507015);
    CHECK(message.find("DataCopy to global memory reads Unified Buffer bytes the vector pipe used with nothing ordering it before") !=
          std::string::npos);
    CHECK(dev.run(pipe + compute + ascend::pipe_flag("V_MTE3") + " DataCopy(gb, t, 32);", a, b).first == 0);
  }
  SUBCASE("a copy in of global bytes a copy out wrote, with no MTE3_MTE2 flag between") {
    const std::string out_then_in = "TBuf<TPosition::VECCALC> v; pipe.InitBuffer(v, 256); LocalTensor<float> t = v.Get<float>(); "
                                    "Duplicate(t, 1.0f, 32); " + ascend::pipe_flag("V_MTE3") + " DataCopy(gb, t, 32);\n";
    const std::string read_back = "TBuf<TPosition::VECCALC> w; pipe.InitBuffer(w, 256); DataCopy(w.Get<float>(), gb, 32);";
    const auto [bare, why] = dev.run(pipe + out_then_in + read_back, a, b);
    CHECK(bare == 507015);
    CHECK(why.find("DataCopy from global memory reads bytes a copy out of this block wrote with nothing ordering that copy before it "
                   "(an MTE3_MTE2 flag)") != std::string::npos);
    CHECK(dev.run(pipe + out_then_in + ascend::pipe_flag("MTE3_MTE2") + read_back, a, b).first == 0);
  }
  SUBCASE("a copy in over bytes the vector pipe used, with nothing ordering it after them") {
    const auto [status, message] =
        dev.run(pipe + "TBuf<TPosition::VECCALC> v; pipe.InitBuffer(v, 256); LocalTensor<float> t = v.Get<float>(); Duplicate(t, 1.0f, 32); "
                       "DataCopy(t, ga, 32);",
                a, b);
    CHECK(status == 507015);
    CHECK(message.find("overwrites Unified Buffer bytes the vector pipe used") != std::string::npos);
  }
  SUBCASE("the scalar unit: a read of a copy in, a write the vector pipe uses, with no flag between") {
    const std::string row = "TBuf<TPosition::VECIN> v; pipe.InitBuffer(v, 256); LocalTensor<float> u = v.Get<float>(); DataCopy(u, ga, 32);\n";
    const auto [read, why_read] = dev.run(pipe + row + "u.SetValue(40, u.GetValue(0));", a, b);
    CHECK(read == 507015);
    CHECK(why_read.find("GetValue of Unified Buffer bytes that a copy from global memory wrote") != std::string::npos);
    const std::string after_copy = "event_t e = static_cast<event_t>(GetTPipePtr()->FetchEventID(HardEvent::MTE2_S)); "
                                   "SetFlag<HardEvent::MTE2_S>(e); WaitFlag<HardEvent::MTE2_S>(e); u.SetValue(32, u.GetValue(0));\n";
    const auto [write, why_write] = dev.run(pipe + row + after_copy + "Adds(u, u, 1.0f, 64);", a, b);
    CHECK(write == 507015);
    CHECK(why_write.find("the scalar unit wrote with nothing ordering the writes before it") != std::string::npos);
    const auto ordered = dev.run(pipe + row + after_copy +
                                        "e = static_cast<event_t>(GetTPipePtr()->FetchEventID(HardEvent::S_V)); SetFlag<HardEvent::S_V>(e); "
                                        "WaitFlag<HardEvent::S_V>(e); Adds(u, u, 1.0f, 64);",
                                    a, b);
    CHECK_MESSAGE(ordered.first == 0, ordered.second);
  }
  SUBCASE("the scalar unit reads what the vector pipe wrote only after a V_S flag") {
    const std::string reduce = "TBuf<TPosition::VECCALC> v; pipe.InitBuffer(v, 512); LocalTensor<float> u = v.Get<float>(); "
                               "Duplicate(u, 2.0f, 64); ReduceSum(u[64], u, u[72], 64);\n";
    const auto bare = dev.run(pipe + reduce + "u.SetValue(100, u.GetValue(64));", a, b);
    CHECK(bare.first == 507015);
    CHECK(bare.second.find("GetValue of Unified Buffer bytes the vector pipe used with nothing ordering it before (a V_S flag)") !=
          std::string::npos);
    const auto flagged = dev.run(pipe + reduce +
                                     "event_t e = static_cast<event_t>(GetTPipePtr()->FetchEventID(HardEvent::V_S)); SetFlag<HardEvent::V_S>(e); "
                                     "WaitFlag<HardEvent::V_S>(e); u.SetValue(100, u.GetValue(64));",
                                 a, b);
    CHECK_MESSAGE(flagged.first == 0, flagged.second);
  }
  SUBCASE("the queue or a flag orders them") {
    const auto flagged = dev.run(
        pipe + "LocalTensor<float> t = q.AllocTensor<float>(); DataCopy(t, ga, 32); q.EnQue(t); t = q.DeQue<float>(); Exp(t, t, 32); "
               "q.FreeTensor(t); t = q.AllocTensor<float>(); DataCopy(t, ga, 32); q.EnQue(t); q.FreeTensor(q.DeQue<float>());\n"
               "TBuf<TPosition::VECIN> v; pipe.InitBuffer(v, 256); LocalTensor<float> u = v.Get<float>(); DataCopy(u, ga, 32);\n"
               "event_t e = static_cast<event_t>(GetTPipePtr()->FetchEventID(HardEvent::MTE2_V)); SetFlag<HardEvent::MTE2_V>(e); "
               "WaitFlag<HardEvent::MTE2_V>(e); Adds(u, u, 1.0f, 32);\n"
               "e = static_cast<event_t>(GetTPipePtr()->FetchEventID(HardEvent::V_MTE2)); SetFlag<HardEvent::V_MTE2>(e); "
               "WaitFlag<HardEvent::V_MTE2>(e); DataCopy(u, ga, 32);",
        a, b);
    CHECK_MESSAGE(flagged.first == 0, flagged.second);
  }
  SUBCASE("reading past a device allocation") {
    const auto [status, message] = dev.run(pipe + "LocalTensor<float> t = q.AllocTensor<float>(); DataCopy(t, ga, 64);", a, b);
    CHECK(status == 507015);
    CHECK(message.find("out of bounds of mem#") != std::string::npos);
  }
  SUBCASE("a DataCopy that is not whole 32-byte blocks") {
    const auto [status, message] = dev.run(pipe + "LocalTensor<float> t = q.AllocTensor<float>(); DataCopy(t, ga, 7);", a, b);
    CHECK(status == 507015);
    CHECK(message.find("not a multiple of 32 (use DataCopyPad)") != std::string::npos);
  }
  SUBCASE("more Unified Buffer than the core has") {
    const auto [status, message] = dev.run("TPipe pipe; TBuf<TPosition::VECCALC> t; pipe.InitBuffer(t, 200 * 1024);", a, b);
    CHECK(status == 507015);
    CHECK(message.find("the Unified Buffer holds 196608 bytes") != std::string::npos);
  }
  SUBCASE("dequeuing an empty queue") {
    const auto [status, message] = dev.run(pipe + "LocalTensor<float> t = q.DeQue<float>();", a, b);
    CHECK(status == 507015);
    CHECK(message.find("DeQue of an empty queue") != std::string::npos);
  }
  const std::string math = "TBuf<TPosition::VECCALC> tb; pipe.InitBuffer(tb, 2048); LocalTensor<float> t = q.AllocTensor<float>();\n";
  SUBCASE("the higher-level math in place") {
    const auto [status, message] = dev.run(pipe + math + "Tanh(t, t, tb.Get<uint8_t>(), 64);", a, b);
    CHECK(status == 507015);
    CHECK(message.find("Tanh: the destination overlaps the source") != std::string::npos);
  }
  SUBCASE("the higher-level math with less temporary buffer than CANN's minimum, or over an operand") {
    const auto [status, message] = dev.run(pipe + math + "Erf(t, t[64], tb.Get<uint8_t>(512), 64);", a, b);
    CHECK(status == 507015);
    CHECK(message.find("Erf needs a temporary buffer of at least 768 bytes for float (CANN's GetErfMaxMinTmpSize), has 512") !=
          std::string::npos);
    const auto [over, why] = dev.run(pipe + math + "Tanh(t[128], t[64], t.ReinterpretCast<uint8_t>(), 64);", a, b);
    CHECK(over == 507015);
    CHECK(why.find("Tanh: the temporary buffer overlaps an operand") != std::string::npos);
    const auto enough = dev.run(pipe + math + "Power(t, t[64], 2.0f, tb.Get<uint8_t>(), 64); Tanh(t, t[64], tb.Get<uint8_t>(256), 64);", a, b);
    CHECK_MESSAGE(enough.first == 0, enough.second);  // (no structured binding: clang refuses one inside the check's lambda)
  }
  SUBCASE("a reduction sums within each repeat, then the repeats in order") {
    const auto [status, message] = dev.run(pipe + "TBuf<TPosition::VECCALC> w; pipe.InitBuffer(w, 64 * 4); LocalTensor<float> s = w.Get<float>();\n"
                                                  "LocalTensor<float> t = q.AllocTensor<float>();\n"
                                                  "for (uint32_t i = 0; i < 100; ++i) t.SetValue(i, static_cast<float>(i + 1));\n"
                                                  "event_t e = static_cast<event_t>(GetTPipePtr()->FetchEventID(HardEvent::S_V));\n"
                                                  "SetFlag<HardEvent::S_V>(e); WaitFlag<HardEvent::S_V>(e);\n"
                                                  "ReduceSum(t[128], t, s, 100); ReduceMax(t[136], t, s, 100);\n" + ascend::pipe_flag("V_MTE3") +
                                                  " DataCopy(gb, t[128], 16);",
                                           a, b);
    REQUIRE(status == 0);
    float out[16];
    ESG_ACL(*dev.acl, aclrtMemcpy, out, sizeof out, b, sizeof out, ascend::acl::kDeviceToHost);
    CHECK(out[0] == 5050.0f);
    CHECK(out[8] == 100.0f);
  }
  SUBCASE("a reduction with less scratch than CANN documents") {
    // 100 floats are two 256-byte repeats: ReduceMax needs 2 results each, in whole blocks of 8.
    const auto [status, message] = dev.run(pipe + "TBuf<TPosition::VECCALC> w; pipe.InitBuffer(w, 32); LocalTensor<float> t = q.AllocTensor<float>();\n"
                                                  "Duplicate(t, 1.0f, 100); ReduceMax(t[128], t, w.Get<float>(4), 100);",
                                           a, b);
    CHECK(status == 507015);
    CHECK(message.find("ReduceMax of 100 elements needs 8 elements of scratch, has 4") != std::string::npos);
  }
  SUBCASE("a vector instruction longer than its operands") {
    const auto [status, message] = dev.run(pipe + "LocalTensor<float> t = q.AllocTensor<float>(); Exp(t, t, 257);", a, b);
    CHECK(status == 507015);
    CHECK(message.find("Exp of 257 elements on a tensor of 256") != std::string::npos);
  }
}

TEST_CASE("kernels are linked before they load: the simulated loader refuses a relocatable object, as the device would misplace it") {
  SimDevice dev;
  // What the compile step alone leaves: a relocatable object (ET_REL).
  ascend::Toolchain compile_only = ascend::simulator_toolchain();
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("esg-unlinked-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string src = (dir / "k.cpp").string(), object = (dir / "k.o").string();
  std::ofstream(src) << "extern \"C\" int k() { return 1; }\n";
  std::string command;
  for (const std::string& part : compile_only.command) command += part + " ";
  REQUIRE(std::system((command + src + " -o " + object).c_str()) == 0);
  ascend::acl::BinHandle bin = nullptr;
  CHECK(dev.acl->aclrtBinaryLoadFromFile(object.c_str(), nullptr, &bin) != 0);
  CHECK(dev.acl->recent_error().find("is a relocatable object (ELF type ET_REL)") != std::string::npos);
  std::filesystem::remove_all(dir);
  // The kernels the backend builds are linked: they load and run.
  void* a = dev.malloc(64);
  void* b = dev.malloc(64);
  CHECK(dev.run("", a, b).first == 0);
}

TEST_CASE("the simulated heap catches use after free and copies of the wrong kind") {
  SimDevice dev;
  void* p = dev.malloc(64);
  float host[16] = {};
  CHECK(dev.acl->aclrtMemcpy(p, 64, p, 64, ascend::acl::kHostToDevice) == 100000);  // the source is device memory
  CHECK(dev.acl->recent_error().find("source is device memory but the copy kind says host") != std::string::npos);
  CHECK(dev.acl->aclrtMemcpy(host, sizeof host, p, 64, ascend::acl::kHostToDevice) == 100000);  // the destination is not
  CHECK(dev.acl->recent_error().find("destination: not device memory") != std::string::npos);
  CHECK(dev.acl->aclrtMemcpy(p, 64, host, 128, ascend::acl::kHostToDevice) == 100000);  // more than the destination holds
  void* q = dev.malloc(64);
  dev.allocations.pop_back();
  REQUIRE(dev.acl->aclrtFree(q) == 0);
  CHECK(dev.acl->aclrtMemcpy(host, sizeof host, q, 64, ascend::acl::kDeviceToHost) == 100000);
  CHECK(dev.acl->recent_error().find("use after free") != std::string::npos);
  CHECK(dev.acl->aclrtFree(q) == 100000);  // a double free
  CHECK(dev.acl->recent_error().find("double free") != std::string::npos);
  // The loader turns a failing call into an error with AscendCL's message.
  CHECK_THROWS_WITH_AS(ESG_ACL(*dev.acl, aclrtFree, q), doctest::Contains("ascend: aclrtFree failed with AscendCL error 100000: aclsim: aclrtFree: double free"),
                       ir::Error);
}

// CANN's operator documentation: aclnnConvolution and aclnnAvgPool2d take NCL, NCHW or NCDHW
// descriptors by rank for their images and refuse ND; the other ops' tensors are ND.
TEST_CASE("the simulated operator library refuses the descriptor formats CANN's documentation refuses") {
  namespace aclnn = ascend::aclnn;
  SimDevice dev;
  const std::shared_ptr<ascend::AclnnLibrary> lib = ascend::AclnnLibrary::open(*dev.acl);
  void* x = dev.malloc(1 * 2 * 5 * 5 * 4);
  void* w = dev.malloc(3 * 2 * 3 * 3 * 4);
  void* bias = dev.malloc(3 * 4);
  void* y = dev.malloc(1 * 3 * 3 * 3 * 4);
  auto convolve = [&](bool images, int8_t cube_math = 1) {
    ascend::AclnnDescriptors make(*lib);
    make.set_images(images);
    aclnn::Tensor* in = make.tensor({1, 2, 5, 5}, aclnn::kFloat, x);
    aclnn::Tensor* weight = make.tensor({3, 2, 3, 3}, aclnn::kFloat, w);
    aclnn::Tensor* b = make.tensor({3}, aclnn::kFloat, bias);  // ND either way: rank 1
    aclnn::Tensor* out = make.tensor({1, 3, 3, 3}, aclnn::kFloat, y);
    uint64_t workspace = 0;
    aclnn::Executor* executor = nullptr;
    const aclnn::Status planned = lib->aclnnConvolutionGetWorkspaceSize(in, weight, b, make.int_array({1, 1}), make.int_array({0, 0}),
                                                                        make.int_array({1, 1}), false, make.int_array({0, 0}), 1, out, cube_math,
                                                                        &workspace, &executor);
    if (planned == 0) {  // run, which takes the executor, before the descriptors go
      REQUIRE(workspace == 0);
      CHECK(lib->aclnnConvolution(nullptr, 0, executor, dev.stream) == 0);
      CHECK(dev.acl->aclrtSynchronizeStream(dev.stream) == 0);
    }
    return planned;
  };
  CHECK(convolve(false) == 161002);  // ACLNN_ERR_PARAM_INVALID
  CHECK(dev.acl->recent_error().find("4-D tensor of aclFormat 2 where CANN documents NCL, NCHW or NCDHW") !=
        std::string::npos);
  CHECK(convolve(true) == 0);
  // cubeMathType 0 (KEEP_DTYPE) with FLOAT: not supported on any product ops-nn's page lists.
  CHECK(convolve(true, 0) == 161002);
  CHECK(dev.acl->recent_error().find("cubeMathType 0 (KEEP_DTYPE) with FLOAT input is not supported") != std::string::npos);

  ascend::AclnnDescriptors make(*lib);
  make.set_images(true);  // images where the op wants ND
  aclnn::Tensor* a = make.tensor({1, 1, 3, 3}, aclnn::kFloat, y);
  uint64_t workspace = 0;
  aclnn::Executor* executor = nullptr;
  CHECK(lib->aclnnMatmulGetWorkspaceSize(a, a, a, 0, &workspace, &executor) == 161002);
  CHECK(dev.acl->recent_error().find("where CANN documents ND") != std::string::npos);
}

// CANN 8.0-8.1 document an asynchronous copy from or to pageable host memory as an error at
// execution (8.3 on: a silently synchronous copy), and 8.0-8.3 want its addresses 64-byte aligned.
TEST_CASE("the simulated device refuses asynchronous copies from or to host memory that is not page-locked") {
  namespace acl = ascend::acl;
  SimDevice dev;
  void* p = dev.malloc(256);
  alignas(64) float pageable[32] = {};
  auto message = [&] { return dev.acl->recent_error(); };
  CHECK(dev.acl->aclrtMemcpyAsync(p, 128, pageable, 128, acl::kHostToDevice, dev.stream) == 100000);
  CHECK(message().find("source is pageable memory, not from aclrtMallocHost") != std::string::npos);
  CHECK(dev.acl->aclrtMemcpyAsync(pageable, 128, p, 128, acl::kDeviceToHost, dev.stream) == 100000);
  CHECK(message().find("destination is pageable memory") != std::string::npos);

  void* pinned = nullptr;
  REQUIRE(dev.acl->aclrtMallocHost(&pinned, 128) == 0);
  CHECK(dev.acl->aclrtMemcpyAsync(p, 256, pinned, 128, acl::kHostToDevice, dev.stream) == 0);
  CHECK(dev.acl->aclrtMemcpyAsync(pinned, 128, p, 128, acl::kDeviceToHost, dev.stream) == 0);
  CHECK(dev.acl->aclrtSynchronizeStream(dev.stream) == 0);
  SUBCASE("a copy past the block's end") {
    CHECK(dev.acl->aclrtMemcpyAsync(p, 256, pinned, 192, acl::kHostToDevice, dev.stream) == 100000);
    CHECK(message().find("pageable memory") != std::string::npos);
  }
  SUBCASE("an address inside the block that is not 64-byte aligned") {
    CHECK(dev.acl->aclrtMemcpyAsync(p, 256, static_cast<uint8_t*>(pinned) + 32, 64, acl::kHostToDevice, dev.stream) == 100000);
    CHECK(message().find("not 64-byte aligned") != std::string::npos);
  }
  SUBCASE("a synchronous copy takes pageable memory") {
    CHECK(dev.acl->aclrtMemcpy(p, 128, pageable, 128, acl::kHostToDevice) == 0);
  }
  REQUIRE(dev.acl->aclrtFreeHost(pinned) == 0);
  CHECK(dev.acl->aclrtMemcpyAsync(p, 256, pinned, 128, acl::kHostToDevice, dev.stream) == 100000);  // freed
  CHECK(dev.acl->aclrtFreeHost(pinned) == 100000);  // twice
}

// CANN's cross-stream capture, as the simulator models it (the backend's multi-stream models
// depend on it): a stream joins the capture by waiting on an event recorded in it, and must merge
// back before the capture ends; replays keep the order across streams; a fault on a joined
// stream surfaces where the run synchronizes.
TEST_CASE("the simulated device captures across streams joined by events") {
  namespace acl = ascend::acl;
  SimDevice dev;
  acl::Stream side = nullptr;
  ESG_ACL(*dev.acl, aclrtCreateStream, &side);
  acl::Event start = nullptr, done = nullptr, plain = nullptr;
  ESG_ACL(*dev.acl, aclrtCreateEventExWithFlag, &start, acl::kEventSync);
  ESG_ACL(*dev.acl, aclrtCreateEventExWithFlag, &done, acl::kEventSync);
  ESG_ACL(*dev.acl, aclrtCreateEvent, &plain);
  float* a = static_cast<float*>(dev.malloc(64));
  float* b = static_cast<float*>(dev.malloc(64));
  float* c = static_cast<float*>(dev.malloc(64));
  auto begin = [&] { ESG_ACL(*dev.acl, aclmdlRICaptureBegin, dev.stream, acl::kCaptureGlobal); };
  auto end = [&](acl::ModelRI* model) { return dev.acl->aclmdlRICaptureEnd(dev.stream, model); };
  auto message = [&] { return dev.acl->recent_error(); };
  acl::ModelRI model = nullptr;

  SUBCASE("a joined stream that merges back replays in order, every time") {
    // main: a -> b; side (after b): b -> c; main (after the side): c -> a.
    begin();
    ESG_ACL(*dev.acl, aclrtMemcpyAsync, b, 64, a, 64, acl::kDeviceToDevice, dev.stream);
    ESG_ACL(*dev.acl, aclrtRecordEvent, start, dev.stream);
    ESG_ACL(*dev.acl, aclrtStreamWaitEvent, side, start);
    ESG_ACL(*dev.acl, aclrtMemcpyAsync, c, 64, b, 64, acl::kDeviceToDevice, side);
    ESG_ACL(*dev.acl, aclrtRecordEvent, done, side);
    ESG_ACL(*dev.acl, aclrtStreamWaitEvent, dev.stream, done);
    ESG_ACL(*dev.acl, aclrtMemcpyAsync, a, 64, c, 64, acl::kDeviceToDevice, dev.stream);
    REQUIRE(end(&model) == 0);
    for (float v : {1.5f, -2.0f, 7.0f}) {
      std::vector<float> host(16, v), back(16, 0.0f);
      ESG_ACL(*dev.acl, aclrtMemcpy, a, 64, host.data(), 64, acl::kHostToDevice);
      ESG_ACL(*dev.acl, aclmdlRIExecuteAsync, model, dev.stream);
      ESG_ACL(*dev.acl, aclrtSynchronizeStream, dev.stream);
      ESG_ACL(*dev.acl, aclrtMemcpy, back.data(), 64, c, 64, acl::kDeviceToHost);
      CHECK(back == host);
    }
    SUBCASE("and a fault on the joined stream surfaces at the run's synchronization") {
      dev.allocations.erase(std::find(dev.allocations.begin(), dev.allocations.end(), static_cast<void*>(c)));
      ESG_ACL(*dev.acl, aclrtFree, c);
      ESG_ACL(*dev.acl, aclmdlRIExecuteAsync, model, dev.stream);
      CHECK(dev.acl->aclrtSynchronizeStream(dev.stream) == 507015);
      CHECK(message().find("use after free") != std::string::npos);
    }
    ESG_ACL(*dev.acl, aclmdlRIDestroy, model);
  }
  SUBCASE("a fault on the stream that began the capture: the joined stream still reaches its end first") {
    // main: a -> b faults (a freed); side: c -> b after the start; main waits for the side.
    begin();
    ESG_ACL(*dev.acl, aclrtRecordEvent, start, dev.stream);
    ESG_ACL(*dev.acl, aclrtMemcpyAsync, b, 64, a, 64, acl::kDeviceToDevice, dev.stream);
    ESG_ACL(*dev.acl, aclrtStreamWaitEvent, side, start);
    ESG_ACL(*dev.acl, aclrtMemcpyAsync, c, 64, b, 64, acl::kDeviceToDevice, side);
    ESG_ACL(*dev.acl, aclrtRecordEvent, done, side);
    ESG_ACL(*dev.acl, aclrtStreamWaitEvent, dev.stream, done);
    REQUIRE(end(&model) == 0);
    std::vector<float> host(16, 3.0f), back(16, 0.0f);
    ESG_ACL(*dev.acl, aclrtMemcpy, b, 64, host.data(), 64, acl::kHostToDevice);
    dev.allocations.erase(std::find(dev.allocations.begin(), dev.allocations.end(), static_cast<void*>(a)));
    ESG_ACL(*dev.acl, aclrtFree, a);
    ESG_ACL(*dev.acl, aclmdlRIExecuteAsync, model, dev.stream);
    CHECK(dev.acl->aclrtSynchronizeStream(dev.stream) == 507015);
    ESG_ACL(*dev.acl, aclrtMemcpy, back.data(), 64, c, 64, acl::kDeviceToHost);
    CHECK(back == host);  // the joined stream's copy is done when the run's synchronization returns
    ESG_ACL(*dev.acl, aclmdlRIDestroy, model);
  }
  SUBCASE("a joined stream that never merges back fails the capture") {
    begin();
    ESG_ACL(*dev.acl, aclrtRecordEvent, start, dev.stream);
    ESG_ACL(*dev.acl, aclrtStreamWaitEvent, side, start);
    ESG_ACL(*dev.acl, aclrtMemcpyAsync, c, 64, b, 64, acl::kDeviceToDevice, side);
    CHECK(end(&model) == 107025);
    CHECK(message().find("joined the capture and never merged back") != std::string::npos);
    // Both streams have left the capture: they run and synchronize again.
    ESG_ACL(*dev.acl, aclrtSynchronizeStream, side);
  }
  SUBCASE("a wait in a capture on an event recorded outside it") {
    ESG_ACL(*dev.acl, aclrtRecordEvent, done, side);
    begin();
    CHECK(dev.acl->aclrtStreamWaitEvent(dev.stream, done) == 107024);
    REQUIRE(end(&model) == 0);
    ESG_ACL(*dev.acl, aclmdlRIDestroy, model);
  }
  SUBCASE("what CANN documents no capture of: a reset, an event made without ACL_EVENT_SYNC") {
    begin();
    CHECK(dev.acl->aclrtRecordEvent(plain, dev.stream) == 207000);
    CHECK(message().find("ACL_EVENT_SYNC") != std::string::npos);
    CHECK(dev.acl->aclrtResetEvent(plain, dev.stream) == 207000);
    REQUIRE(end(&model) == 0);
    ESG_ACL(*dev.acl, aclmdlRIDestroy, model);
    CHECK(dev.acl->aclrtResetEvent(start, dev.stream) == 207000);  // never an ACL_EVENT_SYNC event
  }
  SUBCASE("a synchronous copy is refused on every thread in global mode, on the capturing one only in thread-local mode") {
    std::vector<float> host(16, 1.0f);
    auto copy = [&] { return dev.acl->aclrtMemcpy(a, 64, host.data(), 64, acl::kHostToDevice); };
    auto copy_elsewhere = [&] {
      int error = -1;
      std::thread([&] { error = copy(); }).join();
      return error;
    };
    begin();
    CHECK(copy() == 107027);
    CHECK(copy_elsewhere() == 107027);
    REQUIRE(end(&model) == 0);
    ESG_ACL(*dev.acl, aclmdlRIDestroy, model);
    ESG_ACL(*dev.acl, aclmdlRICaptureBegin, dev.stream, acl::kCaptureThreadLocal);
    CHECK(copy() == 107027);
    CHECK(copy_elsewhere() == 0);  // another binding's build goes on meanwhile
    REQUIRE(end(&model) == 0);
    ESG_ACL(*dev.acl, aclmdlRIDestroy, model);
  }
  // Every record reached before its event goes.
  dev.acl->aclrtSynchronizeStream(side);
  dev.acl->aclrtSynchronizeStream(dev.stream);
  for (acl::Event e : {start, done, plain}) dev.acl->aclrtDestroyEvent(e);
  dev.acl->aclrtDestroyStream(side);
}

TEST_CASE("the kernels' core version names the SoCs they run on") {
  CHECK(ascend::arch_mismatch("dav-c220-vec", "Ascend910B1").empty());
  CHECK(ascend::arch_mismatch("dav-c220-vec", "Ascend910B4").empty());
  CHECK(ascend::arch_mismatch("dav-c220-vec", "Ascend910_9391").empty());
  // 310P's core has no DataCopyPad, with which the kernels copy tails: refused on it, and built for it.
  for (const auto& [arch, soc] : {std::pair{"dav-c220-vec", "Ascend310P3"}, {"dav-m200", "Ascend310P3"}, {"dav-m200", "Ascend910B2"}})
    CHECK(ascend::arch_mismatch(arch, soc).find("esgraph builds no kernels for dav-m200 (Ascend310P): they copy the tail of each tile with "
                                                "DataCopyPad") != std::string::npos);
  for (const char* first : {"Ascend910A", "Ascend910B", "Ascend910ProB", "Ascend310"})
    CHECK(ascend::arch_mismatch("dav-c220-vec", first).find("builds no kernels for its core version") != std::string::npos);
  CHECK(ascend::arch_mismatch("dav-c310", "Ascend910A").empty());  // a core version the user chose: not second-guessed
}

// CANN's install as it lays out its compiler and Ascend C headers: 8.5 on under
// <root>/<arch>-linux (bisheng, asc/include), before under <root>/compiler (ccec, tikcpp/tikcfw).
TEST_CASE("CANN's kernel compiler and headers are found in either install layout, with CANN's vector-core flags") {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("esg-cann-" + std::to_string(::getpid()));
  fs::remove_all(root);
  const char* saved = std::getenv("ASCEND_HOME_PATH");
  const std::string restore = saved ? saved : "";
  ::setenv("ASCEND_HOME_PATH", root.c_str(), 1);
  auto touch = [](const fs::path& p) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << "";
  };
  auto has = [](const std::vector<std::string>& command, const std::string& part) {
    return std::find(command.begin(), command.end(), part) != command.end();
  };
  struct utsname host;
  REQUIRE(::uname(&host) == 0);
  const fs::path devkit85 = root / (std::string(host.machine) + "-linux");

  SUBCASE("8.5: bisheng and asc/include under <root>/<arch>-linux") {
    touch(devkit85 / "ccec_compiler/bin/ccec");  // both ship; CANN 8.5's build drives bisheng
    touch(devkit85 / "ccec_compiler/bin/bisheng");
    touch(devkit85 / "ccec_compiler/bin/ld.lld");
    touch(devkit85 / "asc/include/kernel_operator.h");
    touch(devkit85 / "include/ascendc/asc_devkit_version.h");
    fs::create_directories(devkit85 / "asc/impl/basic_api");
    const ascend::Toolchain toolchain = ascend::cann_toolchain();
    const std::vector<std::string>& command = toolchain.command;
    CHECK(command.front() == (devkit85 / "ccec_compiler/bin/bisheng").string());
    CHECK(has(command, "--cce-disable-kernel-global-attr-check"));
    const auto include = std::find(command.begin(), command.end(), "-include");
    REQUIRE(include != command.end());
    CHECK(include[1] == (devkit85 / "include/ascendc/asc_devkit_version.h").string());
    // Linked as CANN links device code: an executable at address 0, no relocation left.
    CHECK(toolchain.link == std::vector<std::string>{(devkit85 / "ccec_compiler/bin/ld.lld").string(), "-m", "aicorelinux", "-Ttext=0", "-static"});
    CHECK(toolchain.extension == ".bin");
    CHECK(has(command, "-I" + (devkit85 / "asc/include").string()));
    CHECK(has(command, "-I" + (devkit85 / "asc/impl/basic_api").string()));
    CHECK_FALSE(has(command, "-I" + (devkit85 / "asc/impl/adv_api").string()));  // only what exists
    for (const char* flag : {"--cce-aicore-arch=dav-c220-vec", "--cce-aicore-only", "--cce-auto-sync", "-cce-aicore-stack-size=0x8000",
                             "-cce-aicore-record-overflow=true", "-cce-aicore-addr-transform", "-cce-aicore-dcci-insert-for-scalar=false",
                             "-DTILING_KEY_VAR=0"})
      CHECK_MESSAGE(has(command, flag), flag);
  }
  SUBCASE("before 8.5: ccec and tikcpp/tikcfw under <root>/compiler") {
    touch(root / "compiler/ccec_compiler/bin/ccec");
    touch(root / "compiler/ccec_compiler/bin/bisheng");
    touch(root / "compiler/ccec_compiler/bin/ld.lld");
    touch(root / "compiler/tikcpp/tikcfw/kernel_operator.h");
    fs::create_directories(root / "compiler/tikcpp/tikcfw/impl");
    const ascend::Toolchain toolchain = ascend::cann_toolchain();
    const std::vector<std::string>& command = toolchain.command;
    CHECK(command.front() == (root / "compiler/ccec_compiler/bin/ccec").string());
    CHECK_FALSE(has(command, "-include"));  // no version header in this install
    CHECK(toolchain.link.front() == (root / "compiler/ccec_compiler/bin/ld.lld").string());
    CHECK(has(command, "-I" + (root / "compiler/tikcpp/tikcfw").string()));
    CHECK(has(command, "-I" + (root / "compiler/tikcpp/tikcfw/impl").string()));
  }
  SUBCASE("a compiler without the headers, and nothing at all, are errors naming the places") {
    CHECK_THROWS_WITH_AS(ascend::cann_toolchain(), doctest::Contains((devkit85 / "ccec_compiler/bin/{ccec,bisheng}").string().c_str()),
                         ir::Error);
    touch(devkit85 / "ccec_compiler/bin/bisheng");
    CHECK_THROWS_WITH_AS(ascend::cann_toolchain(), doctest::Contains("bisheng, but no Ascend C headers (kernel_operator.h)"), ir::Error);
    touch(devkit85 / "asc/include/kernel_operator.h");
    CHECK_THROWS_WITH_AS(ascend::cann_toolchain(), doctest::Contains("bisheng, but no linker ld.lld beside it"), ir::Error);
  }
  if (saved) ::setenv("ASCEND_HOME_PATH", restore.c_str(), 1);
  else ::unsetenv("ASCEND_HOME_PATH");
  fs::remove_all(root);
}
