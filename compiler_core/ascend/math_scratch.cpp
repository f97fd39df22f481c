#include "ascend/math_scratch.hpp"

#include <cstring>
#include <iterator>

namespace esg::ascend {
namespace {

struct Rule {
  const char* name;
  MathScratch f32, f16;
};

// From the devkit's impl/adv_api/tiling/math/<op>_tiling_impl.cpp for DAV_2201 (Atlas A2).
// Power (TS/ST): float 5·max(4n, 256) + 256, half 14·max(2n, 128) + 256.
constexpr Rule kRules[] = {
    {"Tanh", {4, 256, 0, 256}, {8, 1024, 0, 1024}},
    {"Erf", {12, 768, 0, 768}, {16, 2048, 0, 2048}},
    {"Sin", {12, 768, 0, 768}, {16, 2048, 0, 2048}},
    {"Cos", {12, 768, 0, 768}, {16, 2048, 0, 2048}},
    {"Tan", {16, 1024, 0, 1024}, {20, 2560, 0, 2560}},
    {"Asin", {8, 512, 0, 512}, {12, 1536, 0, 1536}},
    {"Acos", {8, 512, 0, 512}, {12, 1536, 0, 1536}},
    {"Atan", {20, 1280, 0, 1280}, {24, 3072, 0, 3072}},
    {"Sinh", {4, 256, 0, 256}, {8, 1024, 0, 1024}},
    {"Cosh", {8, 512, 0, 512}, {12, 1536, 0, 1536}},
    {"Asinh", {12, 768, 0, 768}, {6, 768, 0, 768}},
    {"Acosh", {4, 1024, 0, 256}, {4, 512, 0, 512}},
    {"Floor", {0, 0, 0, 0}, {4, 512, 0, 512}},
    {"Ceil", {4, 256, 0, 256}, {4, 512, 0, 512}},
    {"Round", {0, 0, 0, 0}, {2, 256, 0, 256}},
    {"Sign", {12, 768, 0, 768}, {6, 768, 0, 768}},
    {"Power", {20, 1280, 256, 1536}, {28, 1792, 256, 2048}},
};

}  // namespace

const MathScratch* math_scratch(const std::string& name, size_t type_size) {
  for (const Rule& r : kRules)
    if (name == r.name) return type_size == 2 ? &r.f16 : &r.f32;
  return nullptr;
}

}  // namespace esg::ascend
