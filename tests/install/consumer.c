/* relu(x·2 - 1) on [-1, 0, 1, 2] through the installed C API, built with pkg-config's flags. */
#include <stdio.h>

#include <esgraph/c/esgraph.h>

int main(void) {
  esg_builder* b = esg_builder_create("consumer_c");
  int64_t dims[1] = {4};
  float two = 2.0f, one = 1.0f, x[4] = {-1, 0, 1, 2}, y[4] = {0};
  esg_tensor tx = esg_input(b, "x", ESG_F32, dims, 1);
  esg_tensor ty = esg_relu(esg_sub(esg_mul(tx, esg_constant(b, ESG_F32, NULL, 0, &two, sizeof two), NULL),
                                   esg_constant(b, ESG_F32, NULL, 0, &one, sizeof one), NULL), NULL);
  esg_graph* g = esg_builder_build(b, &ty, 1);
  esg_model* m = esg_compile(g, NULL);
  esg_buffer in = {x, sizeof x, ESG_F32, dims, 1}, out = {y, sizeof y, ESG_F32, dims, 1};
  int ok = m != NULL && esg_model_run(m, &in, 1, &out, 1) == ESG_OK && y[0] == 0 && y[1] == 0 && y[2] == 1 && y[3] == 3;
  esg_model_destroy(m);
  esg_graph_destroy(g);
  esg_builder_destroy(b);
  if (!ok) {
    fprintf(stderr, "consumer (C): %s\n", esg_last_error());
    return 1;
  }
  printf("consumer (C99, pkg-config): ok\n");
  return 0;
}
