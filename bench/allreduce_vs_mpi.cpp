// all_reduce inside an esgraph model against Open MPI's MPI_Allreduce on buffers of the same
// size, osu-style: per size, blocks of iterations alternating between the two, the median
// block of each. Run under mpirun: `mpirun -np 2 build/default/bench/bench_allreduce`.
// Rank 0 prints one row per size: the bytes; the model's run (Model::run: inputs checked, plan
// looked up) and its prepared run (Model::prepare: both done once), in µs; MPI_Allreduce's µs
// and the ratios to it; and MPI_Iallreduce polled to completion (the call esgraph makes beyond
// ESG_MPI_BLOCKING_BELOW, without the model around it).
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "esgraph/esgraph.hpp"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm comm = MPI_COMM_WORLD;
  esg::use_mpi_comm(&comm);  // the C ABI path a user with MPI of their own takes
  const esg::World world = esg::world();
  const int64_t largest = argc > 1 ? std::atoll(argv[1]) : int64_t{256} << 20;
  if (world.rank == 0)
    std::printf("%10s %9s %12s %9s %9s %14s %9s   (%d ranks, f32 sum, median of 7 blocks)\n", "bytes", "run us", "prepared us", "MPI us",
                "run/MPI", "prepared/MPI", "MPI_I* us", world.size);
  for (int64_t bytes = 1024; bytes <= largest; bytes *= 4) {
    const int64_t n = bytes / 4;
    esg::GraphBuilder b("allreduce");
    esg::Tensor x = b.input("x", esg::DType::F32, {n});
    esg::Model m = esg::compile(b.build({esg::all_reduce(x)}));
    std::vector<esg::HostTensor> in{esg::HostTensor(esg::DType::F32, {n})}, out{esg::HostTensor(esg::DType::F32, {n})};
    std::fill(in[0].data<float>(), in[0].data<float>() + n, 1.0f);
    auto check = [&](const char* who) {
      if (out[0].data<float>()[n - 1] == static_cast<float>(world.size)) return;
      std::fprintf(stderr, "rank %d: %s's sum is wrong at %lld bytes\n", world.rank, who, static_cast<long long>(bytes));
      MPI_Abort(MPI_COMM_WORLD, 1);
    };
    m.run(in, out);  // the agreement check, the arena, the first touch
    check("esgraph");
    esg::PreparedRun prepared = m.prepare(in, out);
    prepared.run();
    check("the prepared run");
    // MPI writes where the model writes: the same buffers (the shared-memory copies' speed
    // depends on where a buffer lies, by up to a quarter at 64 KiB here).
    float* const mpi_out = out[0].data<float>();
    const int iterations = static_cast<int>(std::max<int64_t>(3, std::min<int64_t>(1000, (int64_t{64} << 20) / bytes)));
    std::vector<double> ours, ours_prepared, theirs, nonblocking;
    for (int block = 0; block < 7; ++block) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t = MPI_Wtime();
      for (int i = 0; i < iterations; ++i) m.run(in, out);
      ours.push_back((MPI_Wtime() - t) / iterations);
      MPI_Barrier(MPI_COMM_WORLD);
      t = MPI_Wtime();
      for (int i = 0; i < iterations; ++i) prepared.run();
      ours_prepared.push_back((MPI_Wtime() - t) / iterations);
      MPI_Barrier(MPI_COMM_WORLD);
      t = MPI_Wtime();
      for (int i = 0; i < iterations; ++i) MPI_Allreduce(in[0].data<float>(), mpi_out, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      theirs.push_back((MPI_Wtime() - t) / iterations);
      // The call esgraph makes, polled as esgraph polls it, without the model around it.
      MPI_Barrier(MPI_COMM_WORLD);
      t = MPI_Wtime();
      for (int i = 0; i < iterations; ++i) {
        MPI_Request q;
        MPI_Iallreduce(in[0].data<float>(), mpi_out, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &q);
        for (int done = 0; !done;) MPI_Test(&q, &done, MPI_STATUS_IGNORE);
      }
      nonblocking.push_back((MPI_Wtime() - t) / iterations);
    }
    check("MPI");
    // Every rank's medians, the slowest rank's reported (a collective ends when its last rank does).
    double local[4] = {median(ours), median(ours_prepared), median(theirs), median(nonblocking)}, worst[4] = {0, 0, 0, 0};
    MPI_Reduce(local, worst, 4, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (world.rank == 0)
      std::printf("%10lld %9.2f %12.2f %9.2f %9.2f %14.2f %9.1f\n", static_cast<long long>(bytes), worst[0] * 1e6, worst[1] * 1e6,
                  worst[2] * 1e6, worst[0] / worst[2], worst[1] / worst[2], worst[3] * 1e6);
  }
  MPI_Finalize();
}
