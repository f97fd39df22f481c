// Collectives through the C++ API in a world of one process (tests/distributed runs them over
// two ranks under mpirun): the world, each op a copy, the stats, refusals where they are built.
#include <doctest/doctest.h>

#include <vector>

#include "esgraph/esgraph.hpp"

TEST_CASE("collectives in a world of one: copies, counted, refused where built") {
  const esg::World w = esg::world();
  CHECK(w.size == 1);
  CHECK(w.rank == 0);
  int comm = 0;
  CHECK_THROWS_AS(esg::use_mpi_comm(&comm), esg::InvalidArgumentError);  // the world is already found

  esg::GraphBuilder b("collectives");
  esg::Tensor x = b.input("x", esg::DType::F32, {2, 3});
  CHECK_THROWS_AS(esg::all_reduce(x, esg::AllReduceOptions().ranks({1})), esg::AttributeError);
  CHECK_THROWS_AS(esg::send(x, 0), esg::AttributeError);  // to itself
  esg::Tensor gathered = esg::all_gather(x, esg::AllGatherOptions().axis(1));
  CHECK(gathered.shape() == std::vector<int64_t>{2, 3});
  const esg::Model m = esg::compile(b.build({gathered, esg::all_reduce(x, esg::AllReduceOptions().op(esg::AllReduceOp::Avg))}));
  const std::vector<float> values = {1, 2, 3, 4, 5, 6};
  const auto out = m.run({esg::HostTensor::from(esg::DType::F32, values, {2, 3})});
  CHECK(out.at(0).values<float>() == values);
  CHECK(out.at(1).values<float>() == values);
  CHECK(m.stats().collectives == 2);
  const std::vector<esg::Facts> streams = m.facts().rows("stream_launches");
  REQUIRE(streams.size() == 2);
  CHECK(streams[1].text("runs") == "collectives");  // a stream of their own, the last
}
