// all_reduce inside an esgraph model against Open MPI's MPI_Allreduce on buffers of the same
// size, osu-style: per size, blocks of iterations alternating between the two, the median
// block of each. Run under mpirun: `mpirun -np 2 build/default/bench/bench_allreduce`.
// Rank 0 prints one row per size: bytes, esgraph µs, MPI_Allreduce µs, the ratio, and
// MPI_Iallreduce polled to completion µs (the call esgraph makes, without the model around it).
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
    std::printf("%12s %12s %12s %8s %14s   (%d ranks, f32 sum, median of 7 blocks)\n", "bytes", "esgraph us", "MPI us", "ratio",
                "MPI_I* us", world.size);
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
    // MPI writes where the model writes: the same buffers (the shared-memory copies' speed
    // depends on where a buffer lies, by up to a quarter at 64 KiB here).
    float* const mpi_out = out[0].data<float>();
    const int iterations = static_cast<int>(std::max<int64_t>(3, std::min<int64_t>(1000, (int64_t{64} << 20) / bytes)));
    std::vector<double> ours, theirs, nonblocking;
    for (int block = 0; block < 7; ++block) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t = MPI_Wtime();
      for (int i = 0; i < iterations; ++i) m.run(in, out);
      ours.push_back((MPI_Wtime() - t) / iterations);
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
    double local[3] = {median(ours), median(theirs), median(nonblocking)}, worst[3] = {0, 0, 0};
    MPI_Reduce(local, worst, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (world.rank == 0)
      std::printf("%12lld %12.1f %12.1f %8.2f %14.1f\n", static_cast<long long>(bytes), worst[0] * 1e6, worst[1] * 1e6, worst[0] / worst[1],
                  worst[2] * 1e6);
  }
  MPI_Finalize();
}
