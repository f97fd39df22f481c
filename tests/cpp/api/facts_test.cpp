// A model's record of facts through the C++ API: entries with their keys and kinds in order,
// lists whose rows are records, lookups that name what is missing, and a snapshot that outlives
// its model.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <esgraph/esgraph.hpp>

using esg::Tensor;

namespace {

esg::Model small_model() {
  esg::GraphBuilder b("facts");
  const Tensor x = b.input("x", esg::f32, {4, 8});
  const Tensor w = b.constant(std::vector<float>(24, 0.5f), {8, 3});
  return esg::compile(b.build({esg::relu(esg::matmul(x, w) + 1.0f), esg::exp(x)}));
}

}  // namespace

TEST_CASE("facts: every entry keyed and typed, the plan's figures beside the backend's") {
  const esg::Facts f = small_model().facts();  // the model is gone; its snapshot stays
  std::vector<std::string> keys;
  for (size_t i = 0; i < f.size(); ++i) keys.push_back(f[i].key);
  CHECK(std::count(keys.begin(), keys.end(), "launches") == 1);  // each key once
  CHECK(f.at("launches").kind == ESG_FACT_COUNT);
  CHECK(f.number("launches") == 2);
  CHECK(f.at("arena_bytes").kind == ESG_FACT_BYTES);
  CHECK(f.at("streams").kind == ESG_FACT_LEVEL);
  CHECK(f.text("backend") == "cpu");
  CHECK(f.number("library_calls") == 1);  // the matmul on oneDNN
  // Lists: the fused group with its ops (the exp alone is a fast kernel), the inputs with their types.
  CHECK(f.number("fast_kernels") == 1);
  const std::vector<esg::Facts> groups = f.rows("groups");
  REQUIRE(groups.size() == 1);
  CHECK(groups[0].text("ops") == "matmul+ add relu");
  CHECK(f.at("groups").kind == ESG_FACT_LIST);
  CHECK(f.at("groups").number == 1);
  CHECK(f.rows("inputs").at(0).text("type") == "f32[4,8]");
  // What a record lacks: a lookup names it; a list it lacks has no rows.
  CHECK_FALSE(f.has("no_such_key"));
  CHECK_THROWS_WITH_AS(f.at("no_such_key"), doctest::Contains("no_such_key"), esg::InvalidArgumentError);
  CHECK(f.rows("no_such_list").empty());
  CHECK(f.rows("launches").empty());  // a count has no rows
}

TEST_CASE("facts and stats agree: the struct is the record's main counts") {
  const esg::Model m = small_model();
  const esg::Facts f = m.facts();
  const esg_model_stats s = m.stats();
  CHECK(s.launches == f.number("launches"));
  CHECK(s.fused_groups == f.number("fused_groups"));
  CHECK(s.arena_bytes == f.number("arena_bytes"));
  CHECK(s.library_calls == f.number("library_calls"));
  CHECK(s.stages == 1);
}
