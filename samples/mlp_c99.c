/* The same MLP from plain C99 through the C ABI. Errors are checked once, at the end. */
#include <stdio.h>

#include <esgraph/c/esgraph.h>

static esg_tensor dense(esg_builder* b, esg_tensor in, int64_t k, int64_t n, const char* name) {
  char wname[32], bname[32];
  int64_t wd[2], bd[1];
  wd[0] = k;
  wd[1] = n;
  bd[0] = n;
  sprintf(wname, "%s.w", name);
  sprintf(bname, "%s.b", name);
  return esg_add(esg_matmul(in, esg_input(b, wname, ESG_F32, wd, 2), NULL), esg_input(b, bname, ESG_F32, bd, 1), NULL);
}

int main(void) {
  esg_builder* b = esg_builder_create("mlp");
  int64_t xd[2];
  esg_tensor x, y;
  esg_graph* g;
  char* text;
  xd[0] = esg_symbol(b, "batch");
  xd[1] = 784;
  x = esg_input(b, "x", ESG_F32, xd, 2);
  y = esg_relu(dense(b, x, 784, 256, "fc1"), NULL);
  y = esg_relu(dense(b, y, 256, 128, "fc2"), NULL);
  y = esg_softmax(dense(b, y, 128, 10, "fc3"), NULL);
  /* One check for the whole chain: the builder keeps its first error. */
  if (esg_builder_status(b) != ESG_OK) {
    fprintf(stderr, "building failed: %s\n", esg_builder_error(b));
    esg_builder_destroy(b);
    return 1;
  }
  printf("y: %s[%s,%lld]\n", esg_dtype_name(esg_tensor_dtype(y)), esg_symbol_name(y, esg_tensor_dim(y, 0)),
         (long long)esg_tensor_dim(y, 1));
  g = esg_builder_build(b, &y, 1);
  text = esg_graph_to_text(g);
  printf("%s", text);
  esg_free(text);
  esg_graph_destroy(g);
  esg_builder_destroy(b);
  return 0;
}
