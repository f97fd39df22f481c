/* A two-layer MLP split over the ranks of an MPI job from plain C99, with MPI of the program's
   own: MPI_Init here, the communicator handed to esgraph, MPI_Finalize here. The first layer
   keeps this rank's columns, the second its rows, and one all_reduce sums the parts. Each rank
   prints the largest difference from the whole MLP computed in C.

     mpirun -np 2 build/default/samples/tensor_parallel_c99 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include <esgraph/c/esgraph.h>

#define ROWS 4
#define IN 16
#define HIDDEN 32
#define OUT 8

/* The same weights on every rank, from the same formula. */
static float weight(int i, int j, int salt) { return (float)sin(0.37 * i + 0.11 * j + salt) * 0.2f; }

int main(int argc, char** argv) {
  static float x[ROWS][IN], w1[IN][HIDDEN], w2[HIDDEN][OUT], want[ROWS][OUT], got[ROWS][OUT];
  static float w1_part[IN * HIDDEN], w2_part[HIDDEN * OUT];
  MPI_Comm comm = MPI_COMM_WORLD;
  int provided, size, rank, part, i, j, k, failed = 0;
  int64_t x_dims[2] = {ROWS, IN}, w1_dims[2], w2_dims[2], out_dims[2] = {ROWS, OUT};
  esg_builder* b;
  esg_tensor in, hidden, y;
  esg_graph* g;
  esg_model* m;
  esg_buffer inputs[1], outputs[1];
  double diff = 0;

  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (esg_dist_use_mpi_comm(&comm) != ESG_OK || esg_dist_world(&size, &rank) != ESG_OK) {
    fprintf(stderr, "%s\n", esg_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (HIDDEN % size) {
    fprintf(stderr, "%d hidden units do not split over %d ranks\n", HIDDEN, size);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  part = HIDDEN / size;
  for (i = 0; i < ROWS; ++i)
    for (j = 0; j < IN; ++j) x[i][j] = weight(i, j, 0);
  for (i = 0; i < IN; ++i)
    for (j = 0; j < HIDDEN; ++j) w1[i][j] = weight(i, j, 1);
  for (i = 0; i < HIDDEN; ++i)
    for (j = 0; j < OUT; ++j) w2[i][j] = weight(i, j, 2);
  /* This rank's shards: columns [rank * part, (rank + 1) * part) of w1, the same rows of w2. */
  for (i = 0; i < IN; ++i)
    for (j = 0; j < part; ++j) w1_part[i * part + j] = w1[i][rank * part + j];
  for (i = 0; i < part; ++i)
    for (j = 0; j < OUT; ++j) w2_part[i * OUT + j] = w2[rank * part + i][j];
  w1_dims[0] = IN, w1_dims[1] = part, w2_dims[0] = part, w2_dims[1] = OUT;

  b = esg_builder_create("tensor_parallel_mlp");
  in = esg_input(b, "x", ESG_F32, x_dims, 2);
  hidden = esg_relu(esg_matmul(in, esg_constant(b, ESG_F32, w1_dims, 2, w1_part, sizeof(float) * IN * part), NULL), NULL);
  y = esg_all_reduce(esg_matmul(hidden, esg_constant(b, ESG_F32, w2_dims, 2, w2_part, sizeof(float) * part * OUT), NULL), NULL);
  if (esg_builder_status(b) != ESG_OK) {
    fprintf(stderr, "building failed: %s\n", esg_builder_error(b));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  g = esg_builder_build(b, &y, 1);
  m = esg_compile(g, NULL);
  inputs[0].data = x, inputs[0].nbytes = sizeof x, inputs[0].dtype = ESG_F32, inputs[0].dims = x_dims, inputs[0].rank = 2;
  outputs[0].data = got, outputs[0].nbytes = sizeof got, outputs[0].dtype = ESG_F32, outputs[0].dims = out_dims, outputs[0].rank = 2;
  if (!m || esg_model_run(m, inputs, 1, outputs, 1) != ESG_OK) {
    fprintf(stderr, "rank %d: %s\n", rank, esg_last_error());
    failed = 1;
  }
  /* The whole MLP, in C. */
  for (i = 0; i < ROWS; ++i)
    for (k = 0; k < OUT; ++k) {
      double sum = 0;
      for (j = 0; j < HIDDEN; ++j) {
        double h = 0;
        int t;
        for (t = 0; t < IN; ++t) h += (double)x[i][t] * w1[t][j];
        sum += (h > 0 ? h : 0) * w2[j][k];
      }
      want[i][k] = (float)sum;
      if (fabs(want[i][k] - got[i][k]) > diff) diff = fabs(want[i][k] - got[i][k]);
    }
  printf("rank %d of %d: largest difference from the whole MLP %.2e\n", rank, size, diff);
  esg_model_destroy(m);
  esg_graph_destroy(g);
  esg_builder_destroy(b);
  MPI_Finalize();
  return failed || diff > 1e-4;
}
