/* A C client as written for the oldest recorded release: compiled against that release's
   headers (tests/compat/api-<N>/include), run against the current library. */
#include <stdio.h>
#include <string.h>

#include <esgraph/c/esgraph.h>

#include "check.h"


int main(void) {
  esg_builder* b = esg_builder_create("old_client");
  int64_t xd[2], wd[2] = {16, 4}, cd[4] = {1, 3, 8, 8}, kd[4] = {4, 3, 3, 3}, sizes[2] = {1, 3}, bad[1] = {7};
  esg_tensor x, w, y, img, k, conv, parts;
  esg_softmax_options so;
  esg_conv2d_options co;
  esg_i64_list sl;
  esg_graph* g;
  void* bytes = NULL;
  size_t n = 0;
  xd[0] = esg_symbol(b, "batch");
  xd[1] = 16;
  x = esg_input(b, "x", ESG_F32, xd, 2);
  w = esg_input(b, "w", ESG_F32, wd, 2);
  esg_softmax_options_init(&so);
  so.axis = 1;
  y = esg_softmax(esg_relu(esg_matmul(x, w, NULL), NULL), &so);
  CHECK(esg_tensor_rank(y) == 2 && esg_tensor_dim(y, 1) == 4);
  img = esg_input(b, "img", ESG_F32, cd, 4);
  k = esg_input(b, "k", ESG_F32, kd, 4);
  esg_conv2d_options_init(&co);
  co.groups = 1;
  conv = esg_conv2d(img, k, &co);
  CHECK(esg_tensor_dim(conv, 2) == 6);
  sl.data = sizes;
  sl.size = 2;
  {
    esg_split_options spo;
    esg_split_options_init(&spo);
    spo.axis = 1;
    parts = esg_split(y, sl, &spo);
    CHECK(esg_tensor_output_count(parts) == 2);
  }
  CHECK(!esg_tensor_valid(esg_add(x, esg_input(b, "bad", ESG_F32, bad, 1), NULL)));
  CHECK(esg_builder_status(b) == ESG_ERR_SHAPE);
  esg_builder_clear_error(b);
  g = esg_builder_build(b, &y, 1);
  CHECK(g != NULL);
  CHECK(esg_graph_serialize(g, &bytes, &n) == ESG_OK && n > 0);
  esg_free(bytes);
  CHECK(esg_version() != NULL && strlen(esg_version()) >= 5);
  esg_graph_destroy(g);
  esg_builder_destroy(b);
  printf("old C client: headers %s, library %s\n", ESG_VERSION_STRING, esg_version());
  return check_summary("old C client");
}
