/* The C ABI from strict C99: build an MLP, check shapes, errors, options and files. */
#define _POSIX_C_SOURCE 200809L /* pthreads and nanosleep, for cancelling a run from another thread */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h> /* getpid, for the model files' temporary names */

#include <esgraph/c/esgraph.h>

#include "check.h"


static int shape_is(esg_tensor t, size_t rank, const int64_t* dims) {
  size_t i;
  if (esg_tensor_rank(t) != rank) return 0;
  for (i = 0; i < rank; ++i)
    if (esg_tensor_dim(t, i) != dims[i]) return 0;
  return 1;
}

static void test_mlp(const char* dir) {
  esg_builder* b = esg_builder_create("mlp");
  int64_t batch = esg_symbol(b, "batch");
  int64_t xd[2], w1d[2] = {784, 256}, b1d[1] = {256}, w2d[2] = {256, 10}, b2d[1] = {10};
  esg_tensor x, w1, b1, w2, b2, h, logits, probs;
  esg_graph *g, *back;
  char path[512];
  char *text, *text2, *dot;
  xd[0] = batch;
  xd[1] = 784;
  x = esg_input(b, "x", ESG_F32, xd, 2);
  w1 = esg_input(b, "w1", ESG_F32, w1d, 2);
  b1 = esg_input(b, "b1", ESG_F32, b1d, 1);
  w2 = esg_input(b, "w2", ESG_F32, w2d, 2);
  b2 = esg_input(b, "b2", ESG_F32, b2d, 1);
  h = esg_relu(esg_add(esg_matmul(x, w1, NULL), b1, NULL), NULL);
  logits = esg_add(esg_matmul(h, w2, NULL), b2, NULL);
  probs = esg_softmax(logits, NULL);
  CHECK(esg_builder_status(b) == ESG_OK);
  CHECK(esg_tensor_dtype(probs) == ESG_F32);
  {
    int64_t want[2];
    want[0] = batch;
    want[1] = 10;
    CHECK(shape_is(probs, 2, want));
  }
  CHECK(strcmp(esg_symbol_name(probs, batch), "batch") == 0);
  g = esg_builder_build(b, &probs, 1);
  CHECK(g != NULL);
  CHECK(esg_graph_node_count(g) == 6);
  CHECK(esg_graph_verify(g) == ESG_OK);
  CHECK(!esg_tensor_valid(probs));
  text = esg_graph_to_text(g);
  CHECK(text && strstr(text, "graph mlp(%x: f32[batch,784]") == text);
  dot = esg_graph_to_dot(g);
  CHECK(dot && strstr(dot, "digraph") == dot);
  sprintf(path, "%s/c99_mlp.esg", dir);
  CHECK(esg_graph_save(g, path) == ESG_OK);
  back = esg_graph_load(path);
  CHECK(back != NULL);
  text2 = esg_graph_to_text(back);
  CHECK(text2 && strcmp(text, text2) == 0);
  esg_free(text);
  esg_free(text2);
  esg_free(dot);
  esg_graph_destroy(g);
  esg_graph_destroy(back);
  esg_builder_destroy(b);
  remove(path);
}

static void test_options(void) {
  esg_builder* b = esg_builder_create(NULL);
  int64_t xd[4] = {1, 8, 16, 16}, wd[4] = {8, 4, 3, 3};
  int64_t strides[2] = {2, 2}, want[4] = {1, 8, 8, 8};
  esg_tensor x = esg_input(b, "x", ESG_F32, xd, 4), w = esg_input(b, "w", ESG_F32, wd, 4), y;
  esg_conv2d_options o;
  esg_gelu_options go;
  esg_conv2d_options_init(&o);
  CHECK(o.struct_size == sizeof o);
  CHECK(o.groups == 1 && o.strides.size == 2 && o.strides.data[0] == 1);
  o.groups = 2;
  o.strides.data = strides;
  o.pads.data = NULL;
  o.pads.size = 0;
  CHECK(!esg_tensor_valid(esg_conv2d(x, w, &o))); /* pads must have 4 entries */
  CHECK(esg_last_status() == ESG_ERR_ATTRIBUTE);
  esg_conv2d_options_init(&o);
  o.groups = 2;
  o.strides.data = strides;
  {
    int64_t pads[4] = {1, 1, 1, 1};
    o.pads.data = pads;
    y = esg_conv2d(x, w, &o);
  }
  CHECK(shape_is(y, 4, want));
  esg_gelu_options_init(&go);
  go.approximate = ESG_GELU_APPROXIMATE_TANH;
  CHECK(esg_tensor_valid(esg_gelu(x, &go)));
  go.struct_size = 0;
  CHECK(!esg_tensor_valid(esg_gelu(x, &go)));
  CHECK(esg_last_status() == ESG_ERR_INVALID_ARGUMENT);
  esg_builder_destroy(b);
}

/* A caller built against newer headers: a larger struct whose unknown tail is zero works,
   a non-zero byte there is refused. */
static void test_newer_options(void) {
  struct newer {
    esg_softmax_options known;
    int64_t added_later;
  } n;
  esg_builder* b = esg_builder_create(NULL);
  int64_t xd[2] = {2, 3};
  esg_tensor x = esg_input(b, "x", ESG_F32, xd, 2);
  esg_softmax_options_init_(&n.known, sizeof n);
  CHECK(n.known.struct_size == sizeof n);
  CHECK(n.known.axis == -1);
  CHECK(n.added_later == 0);
  CHECK(esg_tensor_valid(esg_softmax(x, &n.known)));
  n.added_later = 5;
  CHECK(!esg_tensor_valid(esg_softmax(x, &n.known)));
  CHECK(esg_last_status() == ESG_ERR_UNSUPPORTED);
  CHECK(strstr(esg_last_error(), "newer headers") != NULL);
  esg_builder_destroy(b);
}

static void test_errors(void) {
  esg_builder* b = esg_builder_create(NULL);
  esg_builder* other = esg_builder_create(NULL);
  int64_t ad[2] = {2, 3}, cd[1] = {4};
  esg_tensor a = esg_input(b, "a", ESG_F32, ad, 2);
  esg_tensor c = esg_input(b, "c", ESG_F32, cd, 1);
  esg_tensor foreign = esg_input(other, "f", ESG_F32, cd, 1);
  esg_tensor bad = esg_add(a, c, NULL), chained;
  esg_tensor none;
  CHECK(!esg_tensor_valid(bad));
  CHECK(esg_last_status() == ESG_ERR_SHAPE);
  CHECK(strstr(esg_last_error(), "cannot broadcast [2,3] with [4]") != NULL);
  /* The chain goes on failing; the builder keeps the first error. */
  chained = esg_exp(esg_neg(bad, NULL), NULL);
  CHECK(!esg_tensor_valid(chained));
  CHECK(esg_builder_status(b) == ESG_ERR_SHAPE);
  CHECK(strstr(esg_builder_error(b), "cannot broadcast") != NULL);
  CHECK(esg_builder_build(b, &a, 1) == NULL);
  /* Inputs are fed by name: none, an empty one and a repeated one are refused. */
  CHECK(!esg_tensor_valid(esg_input(b, NULL, ESG_F32, cd, 1)) && esg_last_status() == ESG_ERR_INVALID_ARGUMENT);
  CHECK(!esg_tensor_valid(esg_input(b, "", ESG_F32, cd, 1)) && strstr(esg_last_error(), "needs a name") != NULL);
  CHECK(!esg_tensor_valid(esg_input(b, "a", ESG_F32, cd, 1)) && strstr(esg_last_error(), "an input named `a` already") != NULL);
  /* Without sticky errors a failed call reports through esg_last_error only. */
  esg_builder_clear_error(b);
  esg_builder_set_sticky_errors(b, false);
  CHECK(!esg_tensor_valid(esg_add(a, c, NULL)) && esg_last_status() == ESG_ERR_SHAPE);
  CHECK(esg_builder_status(b) == ESG_OK);
  esg_builder_set_sticky_errors(b, true);
  CHECK(!esg_tensor_valid(esg_add(a, c, NULL)) && esg_builder_status(b) == ESG_ERR_SHAPE);
  esg_builder_set_sticky_errors(NULL, false); /* a NULL builder: nothing happens */
  /* A constant's size is checked before a byte is copied: SIZE_MAX is the caller's error. */
  esg_builder_clear_error(b);
  CHECK(!esg_tensor_valid(esg_constant(b, ESG_F32, cd, 1, cd, (size_t)-1)) && esg_last_status() == ESG_ERR_INVALID_ARGUMENT);
  CHECK(strstr(esg_last_error(), "f32[4] needs 16 bytes, got 18446744073709551615") != NULL);
  esg_builder_clear_error(b);
  {
    /* A tensor of a destroyed builder is refused, never followed, even when a new builder
       takes the old one's address. */
    esg_builder* gone = esg_builder_create(NULL);
    esg_builder* next;
    esg_tensor orphan = esg_input(gone, "o", ESG_F32, cd, 1);
    esg_builder_destroy(gone);
    next = esg_builder_create(NULL);
    (void)esg_input(next, "n", ESG_F32, cd, 1);
    CHECK(!esg_tensor_valid(orphan));
    CHECK(!esg_tensor_valid(esg_exp(orphan, NULL)));
    CHECK(esg_last_status() == ESG_ERR_LIFETIME);
    CHECK(esg_tensor_rank(orphan) == (size_t)-1);
    esg_builder_destroy(next);
    esg_builder_destroy(NULL);
  }
  CHECK(!esg_tensor_valid(esg_add(c, foreign, NULL)));
  CHECK(esg_last_status() == ESG_ERR_LIFETIME);
  memset(&none, 0, sizeof none);
  CHECK(!esg_tensor_valid(esg_exp(none, NULL)));
  CHECK(esg_last_status() == ESG_ERR_INVALID_ARGUMENT);
  CHECK(esg_tensor_rank(none) == (size_t)-1);
  CHECK(esg_graph_load("/nonexistent/x.esg") == NULL);
  CHECK(esg_last_status() == ESG_ERR_IO);
  CHECK(esg_graph_deserialize("junk", 4) == NULL);
  CHECK(esg_last_status() == ESG_ERR_FORMAT);
  {
    /* An axis out of range names the attribute and the valid range. */
    esg_softmax_options so;
    esg_softmax_options_init(&so);
    so.axis = -3;
    CHECK(!esg_tensor_valid(esg_softmax(a, &so)));
    CHECK(esg_last_status() == ESG_ERR_ATTRIBUTE);
    CHECK(strstr(esg_last_error(), "`axis` = -3 is out of range for rank 2 (valid: -2 .. 1)") != NULL);
  }
  {
    /* Every truncation of a real graph file is refused, without a crash or a leak. */
    esg_builder* fb = esg_builder_create("f");
    esg_tensor t = esg_exp(esg_input(fb, "t", ESG_F32, cd, 1), NULL);
    esg_graph* g = esg_builder_build(fb, &t, 1);
    void* bytes = NULL;
    size_t n = 0, cut, refused = 0;
    CHECK(esg_graph_serialize(g, &bytes, &n) == ESG_OK);
    for (cut = 0; cut < n; ++cut) {
      esg_graph* back = esg_graph_deserialize(bytes, cut);
      refused += back == NULL && esg_last_status() == ESG_ERR_FORMAT;
      esg_graph_destroy(back);
    }
    CHECK(refused == n);
    esg_free(bytes);
    esg_graph_destroy(g);
    esg_builder_destroy(fb);
  }
  CHECK(esg_input(NULL, "x", ESG_F32, cd, 1).priv_builder == NULL);
  CHECK(esg_builder_pop_name_scope(b) == ESG_ERR_INVALID_ARGUMENT);
  esg_builder_destroy(b);
  esg_builder_destroy(other);
}

/* A caller-owned buffer over `data`. */
/* The model of the graph `b` builds with the one output `y`, compiled with the default options. */
static esg_model* compile_output(esg_builder* b, esg_tensor y) {
  esg_graph* g = esg_builder_build(b, &y, 1);
  esg_model* m = esg_compile(g, NULL);
  esg_graph_destroy(g);
  CHECK(m != NULL);
  return m;
}

static esg_buffer buffer(void* data, size_t nbytes, esg_dtype dtype, const int64_t* dims, size_t rank) {
  esg_buffer b;
  b.data = data;
  b.nbytes = nbytes;
  b.dtype = dtype;
  b.dims = dims;
  b.rank = rank;
  return b;
}

static void test_split_and_while(void) {
  esg_builder* b = esg_builder_create(NULL);
  int64_t xd[1] = {5}, sizes[2] = {2, 3};
  esg_i64_list sl;
  esg_tensor x = esg_input(b, "x", ESG_F32, xd, 1), first, i0, limit, cond_r, body_r[2], init[2], outs;
  esg_subgraph cond, body;
  int64_t none[1];
  sl.data = sizes;
  sl.size = 2;
  first = esg_split(x, sl, NULL);
  CHECK(esg_tensor_output_count(first) == 2);
  CHECK(esg_tensor_dim(esg_tensor_output(first, 1), 0) == 3);
  CHECK(!esg_tensor_valid(esg_tensor_output(first, 2)));
  i0 = esg_constant(b, ESG_I64, none, 0, &sizes[0], sizeof(int64_t));
  limit = esg_scalar_like(i0, 10);
  init[0] = i0;
  init[1] = x;
  {
    /* A body ended but given to no op is discarded with what was made in it; discarding
       what is not such a body is refused. */
    esg_subgraph unused;
    CHECK(esg_builder_begin_subgraph(b, init, 2) == ESG_OK);
    cond_r = esg_less(esg_subgraph_param(b, 0), limit, NULL);
    unused = esg_builder_end_subgraph(b, &cond_r, 1);
    CHECK(unused != 0);
    CHECK(esg_builder_discard_subgraphs(b, unused) == ESG_OK);
    CHECK(esg_builder_discard_subgraphs(b, unused) == ESG_ERR_INVALID_ARGUMENT);
    esg_builder_clear_error(b);
  }
  CHECK(esg_builder_begin_subgraph(b, init, 2) == ESG_OK);
  cond_r = esg_less(esg_subgraph_param(b, 0), limit, NULL);
  cond = esg_builder_end_subgraph(b, &cond_r, 1);
  CHECK(esg_builder_begin_subgraph(b, init, 2) == ESG_OK);
  body_r[0] = esg_add(esg_subgraph_param(b, 0), esg_scalar_like(i0, 1), NULL);
  body_r[1] = esg_exp(esg_subgraph_param(b, 1), NULL);
  body = esg_builder_end_subgraph(b, body_r, 2);
  CHECK(cond != 0 && body != 0);
  outs = esg_while(init, 2, cond, body, NULL);
  CHECK(esg_tensor_output_count(outs) == 2);
  CHECK(esg_tensor_dtype(esg_tensor_output(outs, 1)) == ESG_F32);
  CHECK(esg_builder_status(b) == ESG_OK);
  {
    /* The finished graph shows the while's two bodies: parameters, results, and the cond
     * body's capture of `limit` from the top level. */
    char limit_name[64];
    esg_tensor result = esg_tensor_output(outs, 1);
    esg_graph* g;
    size_t n, i;
    int64_t node = -1, cond_body, step_body, outer = -1;
    strncpy(limit_name, esg_tensor_name(limit), sizeof limit_name - 1);
    limit_name[sizeof limit_name - 1] = 0;
    g = esg_builder_build(b, &result, 1);
    CHECK(g != NULL);
    n = esg_graph_body_node_count(g, 0);
    for (i = 0; i < n; ++i)
      if (strcmp(esg_graph_node_op(g, esg_graph_body_node(g, 0, i)), "while") == 0) node = esg_graph_body_node(g, 0, i);
    CHECK(node >= 0 && esg_graph_node_body_count(g, node) == 2);
    cond_body = esg_graph_node_body(g, node, 0);
    step_body = esg_graph_node_body(g, node, 1);
    CHECK(cond_body > 0 && step_body > 0 && cond_body != step_body);
    CHECK(esg_graph_body_param_count(g, cond_body) == 2 && esg_graph_body_result_count(g, cond_body) == 1);
    CHECK(esg_graph_value_dtype(g, esg_graph_body_result(g, cond_body, 0)) == ESG_BOOL);
    CHECK(esg_graph_body_result_count(g, step_body) == 2 && esg_graph_body_node_count(g, step_body) >= 2);
    CHECK(esg_graph_body_capture_count(g, cond_body) == 1);
    CHECK(esg_graph_body_capture(g, cond_body, 0, &outer) >= 0 && outer >= 0);
    CHECK(strcmp(esg_graph_value_name(g, outer), limit_name) == 0);
    esg_graph_destroy(g);
  }
  esg_builder_destroy(b);
}

static void test_compile_and_run(void) {
  esg_builder* b = esg_builder_create("c_model");
  int64_t xd[2], w_dims[2] = {2, 2}, one[1] = {2};
  float w[4] = {1, 2, 3, 4}, x[2] = {1, 1}, y[2] = {0, 0};
  esg_tensor tx, tw, ty;
  esg_graph* g;
  esg_model* m;
  esg_compile_options o;
  esg_buffer in, out, bad;
  const char* names[1] = {"batch"};
  int64_t sizes[1] = {1};
  int64_t out_dims[2];
  size_t rank = 0;
  esg_dtype dt = ESG_DTYPE_INVALID;
  char* report;
  esg_model_stats stats;
  struct { size_t struct_size; int64_t plans, launches; } old_stats; /* an older caller's, shorter */
  xd[0] = esg_symbol(b, "batch");
  xd[1] = 2;
  tx = esg_input(b, "x", ESG_F32, xd, 2);
  tw = esg_constant(b, ESG_F32, w_dims, 2, w, sizeof w);
  ty = esg_matmul(tx, tw, NULL);
  g = esg_builder_build(b, &ty, 1);
  esg_compile_options_init(&o);
  CHECK(o.streams == 1 && o.fusion && o.memory_reuse);
  CHECK(o.max_plans == 16 && !o.grow_memory);
  o.symbol_names = names;
  o.symbol_sizes = sizes;
  o.num_symbols = 1;
  m = esg_compile(g, &o);
  esg_graph_destroy(g); /* the model keeps its own copy */
  CHECK(m != NULL);
  CHECK(esg_model_num_inputs(m) == 1 && esg_model_num_outputs(m) == 1);
  CHECK(strcmp(esg_model_input_name(m, 0), "x") == 0);
  xd[0] = 1;
  in = buffer(x, sizeof x, ESG_F32, xd, 2);
  CHECK(esg_model_output_shape(m, &in, 1, 0, &dt, out_dims, 2, &rank) == ESG_OK);
  CHECK(dt == ESG_F32 && rank == 2 && out_dims[0] == 1 && out_dims[1] == 2);
  out = buffer(y, sizeof y, ESG_F32, out_dims, 2);
  CHECK(esg_model_run(m, &in, 1, &out, 1) == ESG_OK);
  CHECK(y[0] == 4 && y[1] == 6); /* [1,1] @ [[1,2],[3,4]] */
  bad = in;
  bad.nbytes = 4;
  CHECK(esg_model_run(m, &bad, 1, &out, 1) == ESG_ERR_INVALID_ARGUMENT);
  bad = in;
  bad.dims = one;
  bad.rank = 1;
  bad.nbytes = 8;
  CHECK(esg_model_run(m, &bad, 1, &out, 1) == ESG_ERR_SHAPE);
  CHECK(esg_model_run(m, &in, 0, &out, 1) == ESG_ERR_INVALID_ARGUMENT);
  { /* an output that is (or overlaps) an input is refused by run, prepare and profile, naming both */
    esg_buffer alias = buffer(x, sizeof x, ESG_F32, out_dims, 2);
    CHECK(esg_model_run(m, &in, 1, &alias, 1) == ESG_ERR_INVALID_ARGUMENT);
    CHECK(strstr(esg_last_error(), "output 0 shares memory with input 0") != NULL);
    CHECK(esg_model_prepare(m, &in, 1, &alias, 1) == NULL && esg_last_status() == ESG_ERR_INVALID_ARGUMENT);
    CHECK(esg_model_profile(m, &in, 1, &alias, 1, "unused.json") == ESG_ERR_INVALID_ARGUMENT);
    CHECK(x[0] == 1 && x[1] == 1); /* nothing ran */
  }
  { /* a range instead of a size: 1..2 runs, 3 is refused; a symbol bound and ranged is refused */
    const char* range_names[1] = {"batch"};
    int64_t low[1] = {1}, high[1] = {2};
    esg_compile_options ro;
    esg_model* ranged;
    esg_builder* rb = esg_builder_create("ranged");
    int64_t rd[2];
    esg_tensor rx, ry;
    esg_graph* rg;
    float x3[6] = {1, 1, 1, 1, 1, 1}, y3[6];
    int64_t d3[2] = {3, 2};
    esg_buffer in3 = buffer(x3, sizeof x3, ESG_F32, d3, 2), out3 = buffer(y3, sizeof y3, ESG_F32, d3, 2);
    rd[0] = esg_symbol(rb, "batch");
    rd[1] = 2;
    rx = esg_input(rb, "x", ESG_F32, rd, 2);
    ry = esg_relu(rx, NULL);
    rg = esg_builder_build(rb, &ry, 1);
    esg_builder_destroy(rb);
    esg_compile_options_init(&ro);
    ro.range_names = range_names;
    ro.range_min = low;
    ro.range_max = high;
    ro.num_ranges = 1;
    ranged = esg_compile(rg, &ro);
    CHECK(ranged != NULL);
    CHECK(esg_model_run(ranged, &in, 1, &out, 1) == ESG_OK);
    CHECK(esg_model_run(ranged, &in3, 1, &out3, 1) == ESG_ERR_SHAPE);
    CHECK(strstr(esg_last_error(), "outside the range 1..2") != NULL);
    { /* one symbolic plan for the range, bound to each batch */
      float x2[4] = {1, -1, 2, -2}, y2[4];
      int64_t d2[2] = {2, 2};
      esg_buffer in2 = buffer(x2, sizeof x2, ESG_F32, d2, 2), out2 = buffer(y2, sizeof y2, ESG_F32, d2, 2);
      esg_model_stats rs;
      CHECK(esg_model_run(ranged, &in2, 1, &out2, 1) == ESG_OK);
      CHECK(y2[0] == 1 && y2[1] == 0 && y2[2] == 2 && y2[3] == 0);
      CHECK(esg_model_get_stats(ranged, &rs) == ESG_OK);
      CHECK(rs.plans == 1 && rs.bindings == 2);
    }
    esg_model_destroy(ranged);
    { /* grown on demand: batch 1 and batch 2 are classes of their own */
      esg_model* grown;
      float x2[4] = {1, -1, 2, -2}, y2[4];
      int64_t d2[2] = {2, 2};
      esg_buffer in2 = buffer(x2, sizeof x2, ESG_F32, d2, 2), out2 = buffer(y2, sizeof y2, ESG_F32, d2, 2);
      esg_model_stats gs;
      ro.grow_memory = true;
      grown = esg_compile(rg, &ro);
      CHECK(grown != NULL);
      CHECK(esg_model_run(grown, &in, 1, &out, 1) == ESG_OK);
      CHECK(esg_model_run(grown, &in2, 1, &out2, 1) == ESG_OK);
      CHECK(y2[0] == 1 && y2[1] == 0 && y2[2] == 2 && y2[3] == 0);
      CHECK(esg_model_get_stats(grown, &gs) == ESG_OK);
      CHECK(gs.plans == 2);
      esg_model_destroy(grown);
      ro.grow_memory = false;
    }
    ro.symbol_names = names;
    ro.symbol_sizes = sizes;
    ro.num_symbols = 1;
    CHECK(esg_compile(rg, &ro) == NULL);
    CHECK(esg_last_status() == ESG_ERR_INVALID_ARGUMENT);
    esg_graph_destroy(rg);
  }
  { /* batch was bound to 1: a batch of 2 is refused, naming the symbol */
    float x2[4] = {1, 1, 1, 1}, y2[4];
    int64_t d2[2] = {2, 2};
    esg_buffer in2 = buffer(x2, sizeof x2, ESG_F32, d2, 2), out2 = buffer(y2, sizeof y2, ESG_F32, d2, 2);
    CHECK(esg_model_run(m, &in2, 1, &out2, 1) == ESG_ERR_SHAPE);
    CHECK(strstr(esg_last_error(), "compiled with batch = 1") != NULL);
  }
  report = esg_model_report(m);
  CHECK(report && strstr(report, "arena") != NULL);
  esg_free(report);
  memset(&stats, 0xff, sizeof stats);
  CHECK(esg_model_get_stats(m, &stats) == ESG_OK);
  CHECK(stats.struct_size == sizeof stats);
  CHECK(stats.plans == 1 && stats.launches == 1 && stats.fused_groups == 0);
  CHECK(stats.arena_bytes == 0 && stats.streams == 1 && stats.device_kernels == 0 && stats.captured == 0);
  memset(&old_stats, 0xff, sizeof old_stats);
  CHECK(esg_model_get_stats_(m, (esg_model_stats*)(void*)&old_stats, sizeof old_stats) == ESG_OK);
  CHECK(old_stats.struct_size == sizeof old_stats && old_stats.plans == 1 && old_stats.launches == 1);
  CHECK(esg_model_get_stats_(m, NULL, sizeof stats) == ESG_ERR_INVALID_ARGUMENT);
  CHECK(esg_model_get_stats_(m, &stats, 1) == ESG_ERR_INVALID_ARGUMENT);
  CHECK(esg_model_get_stats(NULL, &stats) == ESG_ERR_INVALID_ARGUMENT);
  esg_model_destroy(m);
  CHECK(esg_compile(NULL, NULL) == NULL && esg_last_status() == ESG_ERR_INVALID_ARGUMENT);
  esg_builder_destroy(b);
}

/* u64 values above int64's range cross the C ABI and compare unsigned; the dtype codes of
 * API 2 have names and sizes, and the first code after them has neither. */
/* Attention from C: one query against two keys, with and without a mask masking the second
   out; then q and k of different ranks, refused where written. */
static void test_attention(void) {
  esg_builder* b = esg_builder_create("attention");
  int64_t qd[4] = {1, 1, 1, 2}, kd[4] = {1, 1, 2, 2}, md[1] = {2};
  float q[2] = {1, 0}, k[4] = {1, 0, 0, 1}, v[4] = {1, 2, 3, 4}, mask[2] = {0, -1e9f}, y[4] = {0, 0, 0, 0};
  esg_tensor tq = esg_input(b, "q", ESG_F32, qd, 4), tk = esg_input(b, "k", ESG_F32, kd, 4), tv = esg_input(b, "v", ESG_F32, kd, 4);
  esg_tensor outs[2];
  esg_attention_options o;
  esg_graph* g;
  esg_model* m;
  esg_buffer in[4], out[2];
  esg_attention_options_init(&o);
  CHECK(o.num_heads == 1 && o.scale == 0 && !o.seq_first);
  outs[0] = esg_attention(tq, tk, tv, NULL); /* scale 1/sqrt(2) */
  o.mask = esg_input(b, "mask", ESG_F32, md, 1);
  o.scale = 2;
  outs[1] = esg_attention(tq, tk, tv, &o);
  CHECK(esg_tensor_valid(outs[0]) && esg_tensor_valid(outs[1]));
  CHECK(!esg_tensor_valid(esg_attention(tq, esg_input(b, "k3", ESG_F32, kd + 1, 3), tv, NULL)));
  CHECK(esg_last_status() == ESG_ERR_SHAPE);
  CHECK(strstr(esg_last_error(), "one rank") != NULL);
  g = esg_builder_build(b, outs, 2);
  CHECK(g == NULL); /* the builder kept its first error */
  esg_builder_destroy(b);

  b = esg_builder_create("attention");
  tq = esg_input(b, "q", ESG_F32, qd, 4), tk = esg_input(b, "k", ESG_F32, kd, 4), tv = esg_input(b, "v", ESG_F32, kd, 4);
  o.mask = esg_input(b, "mask", ESG_F32, md, 1);
  outs[0] = esg_attention(tq, tk, tv, NULL);
  outs[1] = esg_attention(tq, tk, tv, &o);
  g = esg_builder_build(b, outs, 2);
  esg_builder_destroy(b);
  CHECK(g != NULL);
  m = esg_compile(g, NULL);
  esg_graph_destroy(g);
  CHECK(m != NULL);
  in[0] = buffer(q, sizeof q, ESG_F32, qd, 4);
  in[1] = buffer(k, sizeof k, ESG_F32, kd, 4);
  in[2] = buffer(v, sizeof v, ESG_F32, kd, 4);
  in[3] = buffer(mask, sizeof mask, ESG_F32, md, 1);
  out[0] = buffer(y, 2 * sizeof(float), ESG_F32, qd, 4);
  out[1] = buffer(y + 2, 2 * sizeof(float), ESG_F32, qd, 4);
  CHECK(esg_model_run(m, in, 4, out, 2) == ESG_OK);
  /* softmax([1/sqrt(2), 0]) = [0.66976, 0.33024] over v's rows; the mask leaves the first row */
  CHECK(fabsf(y[0] - 1.6604769f) < 1e-5f && fabsf(y[1] - 2.6604769f) < 1e-5f);
  CHECK(y[2] == 1 && y[3] == 2);
  esg_model_destroy(m);
}

static void test_unsigned(void) {
  esg_builder* b = esg_builder_create(NULL);
  int64_t dims[1] = {3};
  uint64_t floor_value = (uint64_t)1 << 63, x[3], y[3] = {0, 0, 0};
  esg_tensor tx, tf, ty;
  esg_model* m;
  esg_buffer in, out;
  x[0] = 5;
  x[1] = UINT64_MAX;
  x[2] = floor_value + 1;
  CHECK(esg_dtype_size(ESG_U16) == 2 && esg_dtype_size(ESG_U32) == 4 && esg_dtype_size(ESG_U64) == 8);
  CHECK(strcmp(esg_dtype_name(ESG_U16), "u16") == 0 && strcmp(esg_dtype_name(ESG_U64), "u64") == 0);
  CHECK(esg_dtype_size((esg_dtype)(ESG_U64 + 1)) == 0 && strcmp(esg_dtype_name((esg_dtype)(ESG_U64 + 1)), "invalid") == 0);
  tx = esg_input(b, "x", ESG_U64, dims, 1);
  tf = esg_constant(b, ESG_U64, NULL, 0, &floor_value, sizeof floor_value);
  ty = esg_maximum(tx, tf, NULL);
  m = compile_output(b, ty);
  in = buffer(x, sizeof x, ESG_U64, dims, 1);
  out = buffer(y, sizeof y, ESG_U64, dims, 1);
  CHECK(esg_model_run(m, &in, 1, &out, 1) == ESG_OK);
  CHECK(y[0] == floor_value && y[1] == UINT64_MAX && y[2] == floor_value + 1);
  esg_model_destroy(m);
  esg_builder_destroy(b);
}

/* sequence_at: a sequence is an array of tensors; the position is read at run time, negative
   from the end, and one outside the sequence fails the run naming it. Elements of two shapes
   are refused when the graph is built. */
static void test_sequence_at(void) {
  esg_builder* b = esg_builder_create(NULL);
  int64_t two[1] = {2}, three[1] = {3};
  float values[3][2] = {{1, 2}, {3, 4}, {5, 6}}, y[2] = {0, 0};
  int64_t position = -1;
  esg_tensor elements[3], pos, ty, odd[2];
  esg_model* m;
  esg_buffer in[4], out;
  int k;
  for (k = 0; k < 3; ++k) {
    char name[4] = {'e', (char)('0' + k), 0, 0};
    elements[k] = esg_input(b, name, ESG_F32, two, 1);
    in[k] = buffer(values[k], sizeof values[k], ESG_F32, two, 1);
  }
  pos = esg_input(b, "p", ESG_I64, NULL, 0);
  in[3] = buffer(&position, sizeof position, ESG_I64, NULL, 0);
  ty = esg_sequence_at(elements, 3, pos, NULL);
  CHECK(esg_tensor_valid(ty));
  m = compile_output(b, ty);
  out = buffer(y, sizeof y, ESG_F32, two, 1);
  CHECK(esg_model_run(m, in, 4, &out, 1) == ESG_OK && y[0] == 5 && y[1] == 6);
  position = 1;
  CHECK(esg_model_run(m, in, 4, &out, 1) == ESG_OK && y[0] == 3 && y[1] == 4);
  position = 3;
  CHECK(esg_model_run(m, in, 4, &out, 1) == ESG_ERR_INVALID_ARGUMENT &&
        strstr(esg_last_error(), "sequence_at: position 3 is outside a sequence of 3 element(s)") != NULL);
  esg_model_destroy(m);
  esg_builder_destroy(b);
  b = esg_builder_create(NULL);
  odd[0] = esg_input(b, "narrow", ESG_F32, two, 1);
  odd[1] = esg_input(b, "wide", ESG_F32, three, 1);
  CHECK(!esg_tensor_valid(esg_sequence_at(odd, 2, esg_input(b, "p", ESG_I64, NULL, 0), NULL)) &&
        strstr(esg_last_error(), "elements[1] [3] differs from elements[0] [2]") != NULL);
  esg_builder_destroy(b);
}

/* matmul_integer: a dynamically quantized product's u8 rows, their zero point given at run time,
   times constant s8 weights, summed exactly in int32 on the integer GEMM (the facts count it);
   a zero point that is neither one value nor one per row is refused by name. */
static void test_matmul_integer(void) {
  esg_builder* b = esg_builder_create(NULL);
  int64_t a_dims[2] = {2, 3}, w_dims[2] = {3, 2}, three[1] = {3}, out_dims[2] = {2, 2};
  uint8_t a[6] = {255, 0, 10, 1, 2, 3}, zero = 1;
  int8_t w[6] = {-128, 127, -128, 127, 5, -5}, w_zero = 0;
  int32_t y[4] = {0, 0, 0, 0};
  esg_tensor ta = esg_input(b, "a", ESG_U8, a_dims, 2);
  esg_tensor tz = esg_input(b, "zero", ESG_U8, NULL, 0);
  esg_tensor tw = esg_constant(b, ESG_I8, w_dims, 2, w, sizeof w);
  esg_tensor twz = esg_constant(b, ESG_I8, NULL, 0, &w_zero, 1);
  esg_tensor ty = esg_matmul_integer(ta, tw, tz, twz, NULL);
  esg_model* m;
  esg_buffer in[2], out;
  esg_fact fact;
  esg_facts* facts;
  esg_builder_set_sticky_errors(b, false);
  CHECK(!esg_tensor_valid(esg_matmul_integer(ta, tw, esg_constant(b, ESG_U8, three, 1, a, 3), twz, NULL)));
  CHECK(esg_last_status() == ESG_ERR_SHAPE && strstr(esg_last_error(), "`a_zero_point` must hold one value or one per row") != NULL);
  m = compile_output(b, ty);
  facts = esg_model_facts(m);
  in[0] = buffer(a, sizeof a, ESG_U8, a_dims, 2);
  in[1] = buffer(&zero, 1, ESG_U8, NULL, 0);
  out = buffer(y, sizeof y, ESG_I32, out_dims, 2);
  CHECK(esg_model_run(m, in, 2, &out, 1) == ESG_OK);
  /* (255-1)(-128) + (0-1)(-128) + (10-1)(5) = -32339; (255-1)(127) - 127 - 45 = 32086 */
  CHECK(y[0] == -32339 && y[1] == 32086 && y[2] == 0 - 128 + 10 && y[3] == 0 + 127 - 10);
  CHECK(esg_facts_find(facts, "integer_matmuls", &fact) == ESG_OK && fact.number == 1);
  esg_facts_free(facts);
  esg_model_destroy(m);
  esg_builder_destroy(b);
}

/* A residual sum of u8 values (quantized_add): (a - 10) / 2 + (b - 3) / 4, quantized with scale 1
 * and zero point 5, a Relu folded (min 0): 200 and 250 give 95 + 61.75, 157 + 5 = 162. */
static void test_quantized_add(void) {
  esg_builder* b = esg_builder_create(NULL);
  int64_t dims[1] = {3};
  uint8_t a[3] = {0, 10, 200}, c[3] = {3, 3, 250}, y[3] = {9, 9, 9}, za = 10, zb = 3, zy = 5;
  float sa = 0.5f, sb = 0.25f, sy = 1.0f;
  esg_quantized_add_options o;
  esg_tensor ta, tb, ty;
  esg_model* m;
  esg_buffer in[2], out;
  esg_quantized_add_options_init(&o);
  o.min = 0.0;
  ta = esg_input(b, "a", ESG_U8, dims, 1); /* declared in order: C evaluates a call's arguments in any order */
  tb = esg_input(b, "b", ESG_U8, dims, 1);
  ty = esg_quantized_add(ta, esg_constant(b, ESG_F32, NULL, 0, &sa, 4), esg_constant(b, ESG_U8, NULL, 0, &za, 1), tb,
                         esg_constant(b, ESG_F32, NULL, 0, &sb, 4), esg_constant(b, ESG_U8, NULL, 0, &zb, 1),
                         esg_constant(b, ESG_F32, NULL, 0, &sy, 4), esg_constant(b, ESG_U8, NULL, 0, &zy, 1), &o);
  m = compile_output(b, ty);
  in[0] = buffer(a, sizeof a, ESG_U8, dims, 1);
  in[1] = buffer(c, sizeof c, ESG_U8, dims, 1);
  out = buffer(y, sizeof y, ESG_U8, dims, 1);
  CHECK(esg_model_run(m, in, 2, &out, 1) == ESG_OK);
  CHECK(y[0] == 5 && y[1] == 5 && y[2] == 162); /* -5 + 0 clamped to 0 by the Relu: the zero point */
  esg_model_destroy(m);
  esg_builder_destroy(b);
}

/* Post-training quantization: y = relu(x w1) w2, calibrated on two batches; the quantized graph
 * against the float products computed here in double, and every misuse a clear error. */
static void test_quantize(void) {
  esg_builder* b = esg_builder_create("quantize_me");
  int64_t x_dims[2] = {4, 3}, w1_dims[2] = {3, 5}, w2_dims[2] = {5, 2}, y_dims[2] = {4, 2};
  float w1[15], w2[10], x[2][12], y[8];
  double h[4][5], want[8], lo = 1e30, hi = -1e30, range_lo = 1e30, range_hi = -1e30, worst = 0;
  const char* kept[1] = {"matmul"};
  const char* typo[1] = {"no_such_node"};
  const char* null_name[1] = {NULL};
  esg_tensor tx, th, ty;
  esg_graph *g, *qg;
  esg_quantized* q;
  esg_quantized_layer layer;
  esg_quantize_options o;
  esg_buffer batches[2], in, out;
  esg_model* m;
  int i, j, k, n;
  for (i = 0; i < 15; ++i) w1[i] = (float)((i % 7) - 3) * 0.25f;
  for (i = 0; i < 10; ++i) w2[i] = (float)((i % 5) - 2) * 0.5f;
  for (n = 0; n < 2; ++n)
    for (i = 0; i < 12; ++i) x[n][i] = (float)((i * 7 + n * 5) % 11 - 5) * 0.3f;
  tx = esg_input(b, "x", ESG_F32, x_dims, 2);
  th = esg_relu(esg_matmul(tx, esg_constant(b, ESG_F32, w1_dims, 2, w1, sizeof w1), NULL), NULL);
  ty = esg_matmul(th, esg_constant(b, ESG_F32, w2_dims, 2, w2, sizeof w2), NULL);
  g = esg_builder_build(b, &ty, 1);
  CHECK(g != NULL);
  for (n = 0; n < 2; ++n) batches[n] = buffer(x[n], sizeof x[n], ESG_F32, x_dims, 2);

  q = esg_quantize(g, batches, 2, NULL);
  CHECK(q != NULL && esg_quantized_num_layers(q) == 2);
  /* The first product's result in double, over both batches: the layer's reported range. */
  for (n = 0; n < 2; ++n)
    for (i = 0; i < 4; ++i)
      for (j = 0; j < 5; ++j) {
        double v = 0;
        for (k = 0; k < 3; ++k) v += (double)x[n][i * 3 + k] * w1[k * 5 + j];
        lo = v < lo ? v : lo, hi = v > hi ? v : hi;
        h[i][j] = v > 0 ? v : 0; /* the last batch's, for the output below */
      }
  CHECK(esg_quantized_layer_get(q, 0, &layer) == ESG_OK);
  CHECK(strcmp(layer.op, "matmul") == 0 && !layer.quantized_result && layer.scale == 0);
  CHECK(fabs(layer.min - lo) < 1e-5 && fabs(layer.max - hi) < 1e-5);
  CHECK(layer.max_error > 0 && layer.max_error < 0.05 * (hi - lo) && layer.sqnr_db > 20);
  for (i = 0; i < 4; ++i)
    for (j = 0; j < 2; ++j) {
      double v = 0;
      for (k = 0; k < 5; ++k) v += h[i][k] * w2[k * 2 + j];
      want[i * 2 + j] = v;
      range_lo = v < range_lo ? v : range_lo, range_hi = v > range_hi ? v : range_hi;
    }
  qg = esg_quantized_graph(q);
  CHECK(qg != NULL);
  m = esg_compile(qg, NULL);
  CHECK(m != NULL);
  in = buffer(x[1], sizeof x[1], ESG_F32, x_dims, 2);
  out = buffer(y, sizeof y, ESG_F32, y_dims, 2);
  CHECK(esg_model_run(m, &in, 1, &out, 1) == ESG_OK);
  for (i = 0; i < 8; ++i) worst = fabs(y[i] - want[i]) > worst ? fabs(y[i] - want[i]) : worst;
  CHECK(worst > 0 && worst < 0.05 * (range_hi - range_lo));
  esg_model_destroy(m);
  esg_graph_destroy(qg);
  CHECK(esg_quantized_layer_get(q, 2, &layer) == ESG_ERR_INVALID_ARGUMENT && strstr(esg_last_error(), "past the 2 layers"));
  CHECK(esg_quantized_layer_get(q, 0, NULL) == ESG_ERR_INVALID_ARGUMENT);
  esg_quantized_destroy(q);

  /* Options: entropy, symmetric, one scale per tensor. */
  esg_quantize_options_init(&o);
  o.calibration = ESG_CALIBRATE_ENTROPY;
  o.symmetric = true;
  o.per_tensor_weights = true;
  q = esg_quantize(g, batches, 2, &o);
  CHECK(q != NULL && esg_quantized_num_layers(q) == 2);
  esg_quantized_destroy(q);
  /* Weight-only: 4-bit codes for both products, no batch needed (nothing measured: NaN). */
  esg_quantize_options_init(&o);
  o.weight_only_bits = 4;
  q = esg_quantize(g, NULL, 0, &o);
  CHECK(q != NULL && esg_quantized_num_layers(q) == 2);
  CHECK(esg_quantized_layer_get(q, 1, &layer) == ESG_OK && layer.max_error != layer.max_error && !layer.quantized_result);
  qg = esg_quantized_graph(q);
  m = esg_compile(qg, NULL);
  CHECK(m != NULL && esg_model_run(m, &in, 1, &out, 1) == ESG_OK);
  worst = 0;
  for (i = 0; i < 8; ++i) worst = fabs(y[i] - want[i]) > worst ? fabs(y[i] - want[i]) : worst;
  CHECK(worst < 0.2 * (range_hi - range_lo)); /* 4-bit weights: within their coarse step */
  esg_model_destroy(m);
  esg_graph_destroy(qg);
  esg_quantized_destroy(q);
  o.block_size = 24;
  CHECK(esg_quantize(g, NULL, 0, &o) == NULL && strstr(esg_last_error(), "block_size 24"));
  /* Misuse. */
  CHECK(esg_quantize(NULL, batches, 2, NULL) == NULL && esg_last_status() == ESG_ERR_INVALID_ARGUMENT);
  CHECK(esg_quantize(g, batches, 0, NULL) == NULL && strstr(esg_last_error(), "no calibration batch"));
  CHECK(esg_quantize(g, NULL, 2, NULL) == NULL && esg_last_status() == ESG_ERR_INVALID_ARGUMENT);
  esg_quantize_options_init(&o);
  o.calibration = 7;
  CHECK(esg_quantize(g, batches, 2, &o) == NULL && strstr(esg_last_error(), "not an esg_calibration"));
  esg_quantize_options_init(&o);
  o.percentile = 0;
  CHECK(esg_quantize(g, batches, 2, &o) == NULL && strstr(esg_last_error(), "percentile"));
  esg_quantize_options_init(&o);
  o.keep_float = kept, o.num_keep_float = 1;
  CHECK(esg_quantize(g, batches, 2, &o) == NULL && strstr(esg_last_error(), "nothing to quantize"));
  o.keep_float = typo;
  CHECK(esg_quantize(g, batches, 2, &o) == NULL && strstr(esg_last_error(), "no_such_node"));
  o.keep_float = null_name;
  CHECK(esg_quantize(g, batches, 2, &o) == NULL && strstr(esg_last_error(), "keep_float[0] is NULL"));
  batches[1].dtype = ESG_F64;
  batches[1].nbytes = 2 * sizeof x[1];
  CHECK(esg_quantize(g, batches, 2, NULL) == NULL && esg_last_status() != ESG_OK);
  CHECK(esg_quantized_graph(NULL) == NULL && esg_quantized_num_layers(NULL) == 0);
  esg_quantized_destroy(NULL);
  esg_graph_destroy(g);
  esg_builder_destroy(b);
}

/* Weight-only 4-bit weights (matmul_nbits): K = 40 in two blocks of 32 (the second padded with
 * zero codes), N = 5 columns; each column's codes are its index j at every k, so with zero point
 * z and scale s a column's weight is (j - z) * s everywhere, and y = sum(a) * (j - z) * s. */
static void test_matmul_nbits(void) {
  esg_builder* b = esg_builder_create(NULL);
  int64_t a_dims[2] = {2, 40}, b_dims[3] = {5, 2, 16}, block_dims[2] = {5, 2}, out_dims[2] = {2, 5};
  float a[80], scales[10], y[10], y4[10];
  uint8_t codes[160], zero_points[10];
  int i, j, ok = 1;
  esg_matmul_nbits_options o;
  esg_tensor ta, ty, outs[2];
  esg_graph* g;
  esg_model* m;
  esg_buffer in, results[2];
  esg_fact fact;
  esg_facts* facts;
  for (i = 0; i < 80; ++i) a[i] = i < 40 ? 0.5f : -1.0f; /* row sums 20 and -40 */
  for (j = 0; j < 5; ++j)
    for (i = 0; i < 32; ++i) codes[j * 32 + i] = (uint8_t)(i < 20 ? j | j << 4 : 0); /* K = 40: 8 codes in the second block */
  for (i = 0; i < 10; ++i) {
    scales[i] = 0.25f;
    zero_points[i] = 3;
  }
  ta = esg_input(b, "a", ESG_F32, a_dims, 2);
  esg_matmul_nbits_options_init(&o);
  o.zero_points = esg_constant(b, ESG_U8, block_dims, 2, zero_points, sizeof zero_points);
  ty = esg_matmul_nbits(ta, esg_constant(b, ESG_U8, b_dims, 3, codes, sizeof codes), esg_constant(b, ESG_F32, block_dims, 2, scales, sizeof scales), &o);
  esg_builder_set_sticky_errors(b, false);
  o.block_size = 24;
  CHECK(!esg_tensor_valid(esg_matmul_nbits(ta, esg_constant(b, ESG_U8, b_dims, 3, codes, sizeof codes),
                                           esg_constant(b, ESG_F32, block_dims, 2, scales, sizeof scales), &o)));
  CHECK(esg_last_status() == ESG_ERR_ATTRIBUTE && strstr(esg_last_error(), "`block_size` must be a power of two") != NULL);
  o.block_size = 32;
  o.accuracy_level = 5;
  CHECK(!esg_tensor_valid(esg_matmul_nbits(ta, esg_constant(b, ESG_U8, b_dims, 3, codes, sizeof codes),
                                           esg_constant(b, ESG_F32, block_dims, 2, scales, sizeof scales), &o)));
  CHECK(esg_last_status() == ESG_ERR_ATTRIBUTE && strstr(esg_last_error(), "accuracy_level") != NULL);
  /* accuracy_level 4 may round a's rows to int8, 32 values to a scale: a row of one value
     rounds to itself, so the products are those of level 0 */
  o.accuracy_level = 4;
  outs[0] = ty;
  outs[1] = esg_matmul_nbits(ta, esg_constant(b, ESG_U8, b_dims, 3, codes, sizeof codes), esg_constant(b, ESG_F32, block_dims, 2, scales, sizeof scales), &o);
  g = esg_builder_build(b, outs, 2);
  m = esg_compile(g, NULL);
  esg_graph_destroy(g);
  CHECK(m != NULL);
  in = buffer(a, sizeof a, ESG_F32, a_dims, 2);
  results[0] = buffer(y, sizeof y, ESG_F32, out_dims, 2);
  results[1] = buffer(y4, sizeof y4, ESG_F32, out_dims, 2);
  CHECK(esg_model_run(m, &in, 1, results, 2) == ESG_OK);
  for (j = 0; j < 5; ++j) ok &= y[j] == 20.0f * (float)(j - 3) * 0.25f && y[5 + j] == -40.0f * (float)(j - 3) * 0.25f;
  for (j = 0; j < 10; ++j) ok &= fabsf(y4[j] - y[j]) <= 1e-5f * fabsf(y[j]);
  CHECK(ok);
  facts = esg_model_facts(m);
  CHECK(esg_facts_find(facts, "reference_kernels", &fact) == ESG_OK && fact.number == 0);
  esg_facts_free(facts);
  esg_model_destroy(m);
  esg_builder_destroy(b);
}

/* The Ascend backend on the simulated device: the same model, the same values; an unknown
 * backend is refused. */
static void test_ascend_sim(void) {
  esg_builder* b = esg_builder_create(NULL);
  int64_t dims[1] = {100};
  float x[100], y[100], two = 2.0f;
  esg_tensor tx, ty;
  esg_graph* g;
  esg_model* m;
  esg_compile_options o;
  esg_buffer in, out;
  int i, ok = 1;
  esg_facts* facts;
  esg_fact fact;
  for (i = 0; i < 100; ++i) x[i] = (float)i - 50.0f;
  tx = esg_input(b, "x", ESG_F32, dims, 1);
  ty = esg_relu(esg_mul(tx, esg_constant(b, ESG_F32, NULL, 0, &two, sizeof two), NULL), NULL);
  g = esg_builder_build(b, &ty, 1);
  /* The table's names: "cpu" first, the simulated Ascend among them, NULL past the end. */
  CHECK(esg_backend_count() >= 3 && strcmp(esg_backend_name(0), "cpu") == 0);
  for (i = 0, ok = 0; i < (int)esg_backend_count(); ++i) ok += strcmp(esg_backend_name((size_t)i), "ascend-sim") == 0;
  CHECK(ok == 1 && esg_backend_name(esg_backend_count()) == NULL && esg_backend_name((size_t)-1) == NULL);
  ok = 1;
  esg_compile_options_init(&o);
  o.backend = "tpu";
  CHECK(esg_compile(g, &o) == NULL && esg_last_status() == ESG_ERR_INVALID_ARGUMENT);
  CHECK(strstr(esg_last_error(), "backend 'tpu'; valid: 'cpu', ") != NULL);
  /* A precision no backend has, and one the Ascend backend leaves to the CPU. */
  o.backend = NULL;
  o.precision = "f8";
  CHECK(esg_compile(g, &o) == NULL && esg_last_status() == ESG_ERR_INVALID_ARGUMENT);
  CHECK(strstr(esg_last_error(), "precision 'f8'; valid: 'f32', 'bf16'") != NULL);
  o.backend = "ascend-sim";
  o.precision = "bf16";
  CHECK(esg_compile(g, &o) == NULL && esg_last_status() == ESG_ERR_UNSUPPORTED);
  o.precision = NULL;
  /* Options the backend does not declare, out of range, or not name=value integers. */
  o.backend = NULL;
  o.ai_cores = 3;
  CHECK(esg_compile(g, &o) == NULL && strstr(esg_last_error(), "backend 'cpu' has no option `ai_cores` (it takes channel_block, vnni)") != NULL);
  o.backend = "ascend-sim";
  o.backend_options = "ai_cores=3, cores=2";
  CHECK(esg_compile(g, &o) == NULL && strstr(esg_last_error(), "no option `cores` (it takes device, ai_cores, host_fallback)") != NULL);
  o.backend_options = "host_fallback=2";
  CHECK(esg_compile(g, &o) == NULL && strstr(esg_last_error(), "host_fallback 2 (0 .. 1)") != NULL);
  o.backend_options = "ai_cores";
  CHECK(esg_compile(g, &o) == NULL && strstr(esg_last_error(), "`ai_cores` is not name=value") != NULL);
  o.backend_options = "ai_cores=3x";
  CHECK(esg_compile(g, &o) == NULL && strstr(esg_last_error(), "ai_cores takes an integer, got `3x`") != NULL);
  o.backend_options = "ai_cores=99999999999999999999";
  CHECK(esg_compile(g, &o) == NULL && esg_last_status() == ESG_ERR_INVALID_ARGUMENT);
  o.backend_options = " ai_cores = 3 ,";
  m = esg_compile(g, &o);
  CHECK(m != NULL);
  in = buffer(x, sizeof x, ESG_F32, dims, 1);
  out = buffer(y, sizeof y, ESG_F32, dims, 1);
  CHECK(esg_model_run(m, &in, 1, &out, 1) == ESG_OK);
  for (i = 0; i < 100; ++i) ok = ok && y[i] == (x[i] > 0 ? 2 * x[i] : 0.0f);
  CHECK(ok);
  facts = esg_model_facts(m);
  CHECK(esg_facts_find(facts, "backend", &fact) == ESG_OK && strcmp(fact.text, "ascend") == 0);
  CHECK(esg_facts_find(facts, "simulated", &fact) == ESG_OK && fact.kind == ESG_FACT_LEVEL && fact.number == 1);
  esg_facts_free(facts);
  esg_model_destroy(m);
  esg_graph_destroy(g);
  esg_builder_destroy(b);
  /* atanh has no device lowering: refused, unless host_fallback runs it on the host. */
  b = esg_builder_create(NULL);
  tx = esg_input(b, "x", ESG_F32, dims, 1);
  ty = esg_atanh(esg_mul(tx, esg_constant(b, ESG_F32, NULL, 0, &two, sizeof two), NULL), NULL);
  g = esg_builder_build(b, &ty, 1);
  CHECK(esg_compile(g, &o) == NULL && esg_last_status() == ESG_ERR_UNSUPPORTED);
  CHECK(strstr(esg_last_error(), "host_fallback") != NULL);
  for (i = 0; i < 100; ++i) x[i] = (float)i / 250.0f - 0.2f;
  o.host_fallback = true;
  m = esg_compile(g, &o);
  CHECK(m != NULL);
  CHECK(esg_model_run(m, &in, 1, &out, 1) == ESG_OK);
  ok = 1;
  for (i = 0; i < 100; ++i) ok = ok && fabsf(y[i] - atanhf(2 * x[i])) <= 1e-6f * (1 + fabsf(y[i]));
  CHECK(ok);
  esg_model_destroy(m);
  esg_graph_destroy(g);
  esg_builder_destroy(b);
}

/* Two branches on two streams, each on its own thread; a kernel error inside a stream comes back
 * as the run's status and leaves the model usable; out-of-range options are refused. */
static void test_streams_and_threads(void) {
  esg_builder* b = esg_builder_create("branches");
  const int64_t xd[2] = {64, 64}, id[1] = {4};
  static float x[64 * 64], left[64 * 64], right[4 * 64];
  int64_t idx[4] = {0, 1, 63, 2};
  int64_t left_dims[2] = {64, 64}, right_dims[2] = {4, 64};
  esg_tensor tx = esg_input(b, "x", ESG_F32, xd, 2), ti = esg_input(b, "i", ESG_I64, id, 1), ty[2];
  esg_graph* g;
  esg_model* m;
  esg_compile_options o;
  esg_buffer in[2], out[2];
  size_t k;
  for (k = 0; k < 64 * 64; ++k) x[k] = 0.01f * (float)(k % 7);
  ty[0] = esg_tanh(esg_matmul(tx, tx, NULL), NULL);
  ty[1] = esg_gather(esg_add(tx, tx, NULL), ti, NULL);
  g = esg_builder_build(b, ty, 2);
  esg_compile_options_init(&o);
  o.streams = 17;
  CHECK(esg_compile(g, &o) == NULL && esg_last_status() == ESG_ERR_INVALID_ARGUMENT);
  o.streams = 2;
  o.threads = -1;
  CHECK(esg_compile(g, &o) == NULL && esg_last_status() == ESG_ERR_INVALID_ARGUMENT);
  o.threads = 2;
  m = esg_compile(g, &o);
  CHECK(m != NULL);
  in[0] = buffer(x, sizeof x, ESG_F32, xd, 2);
  in[1] = buffer(idx, sizeof idx, ESG_I64, id, 1);
  out[0] = buffer(left, sizeof left, ESG_F32, left_dims, 2);
  out[1] = buffer(right, sizeof right, ESG_F32, right_dims, 2);
  for (k = 0; k < 3; ++k) {
    idx[2] = 99; /* out of range: the gather's stream fails, the other stops */
    CHECK(esg_model_run(m, in, 2, out, 2) == ESG_ERR_INVALID_ARGUMENT);
    CHECK(strstr(esg_last_error(), "out of range") != NULL);
    idx[2] = 63;
    CHECK(esg_model_run(m, in, 2, out, 2) == ESG_OK);
    CHECK(right[2 * 64 + 1] == 2 * x[63 * 64 + 1] && right[1 * 64 + 5] == 2 * x[1 * 64 + 5]);
    CHECK(left[0] > 0.0f && left[0] < 1.0f);
  }
  esg_model_destroy(m);
  esg_graph_destroy(g);
  esg_builder_destroy(b);
}

/* Reading a finished graph back: inputs, outputs, nodes in order, attributes of every kind,
 * constants' bytes; bad ids and indexes are errors, not crashes. */
static void test_inspection(void) {
  esg_builder* b = esg_builder_create("inspect");
  int64_t xd[2], wd[2] = {3, 2}, pads[4] = {0, 1, 1, 0};
  float w[6] = {1, 2, 3, 4, 5, 6};
  esg_tensor x, wt, y, z;
  esg_leaky_relu_options lr;
  esg_pad_options po;
  esg_graph* g;
  const int64_t* ints = NULL;
  const void* data;
  size_t nbytes = 0, n, i, found_pad = 0;
  int64_t node[4], outer = 0;
  xd[0] = esg_symbol(b, "batch");
  xd[1] = 3;
  x = esg_input(b, "x", ESG_F32, xd, 2);
  wt = esg_constant(b, ESG_F32, wd, 2, w, sizeof w);
  esg_leaky_relu_options_init(&lr);
  lr.alpha = 0.25;
  y = esg_leaky_relu(esg_matmul(x, wt, NULL), &lr);
  esg_pad_options_init(&po);
  po.mode = ESG_PAD_MODE_REFLECT;
  z = esg_pad(y, (esg_i64_list){pads, 4}, &po);
  CHECK(esg_tensor_set_name(z, "z") == ESG_OK);
  g = esg_builder_build(b, &z, 1);
  CHECK(g != NULL);
  CHECK(strcmp(esg_graph_name(g), "inspect") == 0);
  CHECK(esg_graph_input_count(g) == 1 && esg_graph_output_count(g) == 1);
  {
    /* Names stay valid while the graph lives, however many are read. */
    const char* x_name = esg_graph_value_name(g, esg_graph_input(g, 0));
    const char* z_name = esg_graph_value_name(g, esg_graph_output(g, 0));
    CHECK(strcmp(x_name, "x") == 0 && strcmp(z_name, "z") == 0);
  }
  CHECK(esg_graph_value_rank(g, esg_graph_input(g, 0)) == 2);
  CHECK(strcmp(esg_graph_dim_symbol(g, esg_graph_value_dim(g, esg_graph_input(g, 0), 0)), "batch") == 0);
  CHECK(esg_graph_value_dim(g, esg_graph_output(g, 0), 1) == 3);
  n = esg_graph_body_node_count(g, 0);
  CHECK(n == 4);  /* constant, matmul, leaky_relu, pad */
  for (i = 0; i < n && i < 4; ++i) node[i] = esg_graph_body_node(g, 0, i);
  CHECK(esg_graph_body_param_count(g, 0) == 1 && esg_graph_body_param(g, 0, 0) == esg_graph_input(g, 0));
  CHECK(esg_graph_body_result(g, 0, 0) == esg_graph_output(g, 0) && esg_graph_body_capture_count(g, 0) == 0);
  CHECK(strcmp(esg_graph_node_op(g, node[0]), "constant") == 0);
  data = esg_graph_node_data(g, node[0], &nbytes);
  CHECK(data && nbytes == sizeof w && memcmp(data, w, sizeof w) == 0);
  CHECK(esg_graph_node_data(g, node[1], &nbytes) == NULL && nbytes == 0);
  CHECK(strcmp(esg_graph_node_op(g, node[1]), "matmul") == 0);
  CHECK(esg_graph_node_input_count(g, node[1]) == 2 && esg_graph_node_input(g, node[1], 0) == esg_graph_input(g, 0));
  CHECK(esg_graph_node_input(g, node[1], 1) == esg_graph_node_output(g, node[0], 0));
  CHECK(esg_graph_node_attr_kind(g, node[1], 0) == ESG_ATTR_BOOL && esg_graph_node_attr_int(g, node[1], 0) == 0);
  CHECK(esg_graph_node_attr_float(g, node[2], 0) == 0.25);
  for (i = 0; i < n; ++i) {
    int64_t id = node[i];
    if (strcmp(esg_graph_node_op(g, id), "pad") != 0) continue;
    found_pad = 1;
    CHECK(esg_graph_node_attr_count(g, id) == 3);
    CHECK(strcmp(esg_graph_node_attr_name(g, id, 0), "pads") == 0);
    CHECK(esg_graph_node_attr_ints(g, id, 0, &ints) == 4 && ints && ints[1] == 1 && ints[3] == 0);
    CHECK(esg_graph_node_attr_kind(g, id, 1) == ESG_ATTR_ENUM && strcmp(esg_graph_node_attr_string(g, id, 1), "reflect") == 0);
    CHECK(esg_graph_node_output(g, id, 0) == esg_graph_output(g, 0));
    CHECK(esg_graph_node_body_count(g, id) == 0 && esg_graph_node_body(g, id, 0) == -1);
  }
  CHECK(found_pad);
  /* Out of range or of the wrong kind: a clear error and a neutral result. */
  CHECK(esg_graph_node_op(g, 99) == NULL && esg_last_status() == ESG_ERR_INVALID_ARGUMENT);
  CHECK(strstr(esg_last_error(), "no node 99") != NULL);
  CHECK(esg_graph_value_name(g, -5) == NULL && esg_last_status() == ESG_ERR_INVALID_ARGUMENT);
  CHECK(esg_graph_node_attr_float(g, node[1], 0) == 0.0 && esg_last_status() == ESG_ERR_INVALID_ARGUMENT);
  CHECK(esg_graph_node_attr_ints(g, node[2], 0, &ints) == 0 && ints == NULL);
  CHECK(esg_graph_body_node(g, 7, 0) == -1 && strstr(esg_last_error(), "no body 7") != NULL);
  CHECK(esg_graph_body_capture(g, 0, 0, &outer) == -1 && outer == -1);
  CHECK(esg_graph_value_dim(g, esg_graph_input(g, 0), 7) == 0 && esg_last_status() == ESG_ERR_INVALID_ARGUMENT);
  CHECK(esg_graph_dim_symbol(g, 3) == NULL);
  CHECK(esg_graph_input(NULL, 0) == -1 && esg_graph_body_node_count(NULL, 0) == 0);
  esg_graph_destroy(g);
  esg_builder_destroy(b);
}

/* A model counting i up to its input n: n iterations of a loop body. */
static esg_graph* counting_loop(void) {
  esg_builder* b = esg_builder_create("count");
  int64_t zero = 0;
  esg_tensor n = esg_input(b, "n", ESG_I64, NULL, 0), i0, cond_r, body_r, out;
  esg_subgraph cond, body;
  esg_graph* g;
  i0 = esg_constant(b, ESG_I64, NULL, 0, &zero, sizeof zero);
  esg_builder_begin_subgraph(b, &i0, 1);
  cond_r = esg_less(esg_subgraph_param(b, 0), n, NULL);
  cond = esg_builder_end_subgraph(b, &cond_r, 1);
  esg_builder_begin_subgraph(b, &i0, 1);
  body_r = esg_add(esg_subgraph_param(b, 0), esg_scalar_like(i0, 1), NULL);
  body = esg_builder_end_subgraph(b, &body_r, 1);
  out = esg_while(&i0, 1, cond, body, NULL);
  g = esg_builder_build(b, &out, 1);
  CHECK(g != NULL);
  esg_builder_destroy(b);
  return g;
}

static esg_status count_to(const esg_model* m, int64_t n, int64_t* got) {
  esg_buffer in = buffer(&n, sizeof n, ESG_I64, NULL, 0), out = buffer(got, sizeof *got, ESG_I64, NULL, 0);
  return esg_model_run(m, &in, 1, &out, 1);
}

struct cancelled_run {
  const esg_model* model;
  esg_status status;
  int done;
  pthread_mutex_t mu;
};

static void* run_forever(void* arg) {
  struct cancelled_run* r = (struct cancelled_run*)arg;
  int64_t got = 0;
  esg_status s = count_to(r->model, (int64_t)1 << 62, &got);
  pthread_mutex_lock(&r->mu);
  r->status = s;
  r->done = 1;
  pthread_mutex_unlock(&r->mu);
  return NULL;
}

static void test_run_limits(void) {
  esg_graph* g = counting_loop();
  esg_compile_options o;
  esg_model* m;
  int64_t got = 0;
  esg_compile_options_init(&o);
  CHECK(o.max_loop_iterations == 10000000 && o.max_nodes == 4194304); /* the documented defaults */
  o.max_loop_iterations = 100;
  m = esg_compile(g, &o);
  CHECK(m != NULL);
  CHECK(count_to(m, 100, &got) == ESG_OK && got == 100);
  CHECK(count_to(m, 101, &got) == ESG_ERR_LIMIT);
  CHECK(strstr(esg_last_error(), "max_loop_iterations (100 iterations in all)") != NULL);
  CHECK(count_to(m, 3, &got) == ESG_OK && got == 3);
  CHECK(esg_model_cancel(NULL) == ESG_ERR_INVALID_ARGUMENT);
  esg_model_destroy(m);

  /* Cancelled from another thread, a run with no cap stops; the next one runs. */
  o.max_loop_iterations = 0;
  m = esg_compile(g, &o);
  CHECK(m != NULL);
  {
    struct cancelled_run r;
    pthread_t t;
    int done = 0;
    struct timespec pause = {0, 20 * 1000 * 1000};
    r.model = m;
    r.status = ESG_OK;
    r.done = 0;
    pthread_mutex_init(&r.mu, NULL);
    CHECK(pthread_create(&t, NULL, run_forever, &r) == 0);
    nanosleep(&pause, NULL);
    while (!done) { /* a cancel before the run began would miss it: repeat until it ends */
      CHECK(esg_model_cancel(m) == ESG_OK);
      nanosleep(&pause, NULL);
      pthread_mutex_lock(&r.mu);
      done = r.done;
      pthread_mutex_unlock(&r.mu);
    }
    pthread_join(t, NULL);
    pthread_mutex_destroy(&r.mu);
    CHECK(r.status == ESG_ERR_CANCELLED);
  }
  CHECK(count_to(m, 4, &got) == ESG_OK && got == 4);
  esg_model_destroy(m);

  /* A graph over max_nodes is not compiled. */
  o.max_nodes = 2;
  CHECK(esg_compile(g, &o) == NULL && esg_last_status() == ESG_ERR_LIMIT);
  CHECK(strstr(esg_last_error(), "more than max_nodes (2)") != NULL);
  esg_graph_destroy(g);

  /* Bodies nest 64 deep at most. */
  {
    esg_builder* b = esg_builder_create("deep");
    int64_t dims[1] = {2};
    esg_tensor x = esg_input(b, "x", ESG_F32, dims, 1);
    int depth;
    for (depth = 1; depth <= 64; ++depth) CHECK(esg_builder_begin_subgraph(b, NULL, 0) == ESG_OK);
    CHECK(esg_builder_begin_subgraph(b, NULL, 0) == ESG_ERR_LIMIT);
    CHECK(strstr(esg_last_error(), "at most 64 deep") != NULL);
    (void)x;
    esg_builder_destroy(b);
  }
}

/* Bodies made in another order than the op lists them (the else branch first): the graph's
   text, derived names included, is the same after a save and load (found by the graph-file
   fuzzer). */
static void test_bodies_made_out_of_order_survive_a_reload(void) {
  esg_builder* b = esg_builder_create("out_of_order");
  int64_t dims[1] = {3};
  esg_tensor x = esg_input(b, "x", ESG_F32, dims, 1), flag = esg_input(b, "flag", ESG_BOOL, NULL, 0), r, y;
  esg_subgraph then_body, else_body;
  esg_graph *g, *back;
  void* data = NULL;
  size_t size = 0;
  char *text, *text_back;
  CHECK(esg_builder_begin_subgraph(b, NULL, 0) == ESG_OK);
  r = esg_exp(x, NULL);
  else_body = esg_builder_end_subgraph(b, &r, 1);
  CHECK(esg_builder_begin_subgraph(b, NULL, 0) == ESG_OK);
  r = esg_neg(x, NULL);
  then_body = esg_builder_end_subgraph(b, &r, 1);
  y = esg_if(flag, then_body, else_body, NULL);
  g = esg_builder_build(b, &y, 1);
  CHECK(g != NULL);
  CHECK(esg_graph_serialize(g, &data, &size) == ESG_OK);
  back = esg_graph_deserialize(data, size);
  CHECK(back != NULL);
  text = esg_graph_to_text(g);
  text_back = esg_graph_to_text(back);
  CHECK(text && text_back && strcmp(text, text_back) == 0);
  esg_free(text);
  esg_free(text_back);
  esg_free(data);
  esg_graph_destroy(back);
  esg_graph_destroy(g);
  esg_builder_destroy(b);
}


/* nonzero's count is known only once it ran: output_shape says -1 there, run_allocated gives
   the outputs at the sizes the run came to, and a caller's buffer must come to that size. */
static void test_sizes_the_data_decides(void) {
  esg_builder* b = esg_builder_create("sized_by_data");
  int64_t xd[1] = {5}, dims[2] = {0, 0}, wrong[2] = {1, 2};
  float x[5] = {0, 2, 0, -1, 3};
  int64_t idx[3], big[4];
  esg_tensor tx, tn, ts;
  esg_tensor outs[2];
  esg_graph* g;
  esg_model* m;
  esg_buffer in, made[2], out, too_many[3];
  esg_model_stats stats;
  esg_dtype dt = ESG_DTYPE_INVALID;
  size_t rank = 0;
  tx = esg_input(b, "x", ESG_F32, xd, 1);
  tn = esg_nonzero(tx, NULL);
  ts = esg_reduce_sum(tn, NULL); /* a size the data decides, then a scalar it does not */
  outs[0] = tn;
  outs[1] = ts;
  g = esg_builder_build(b, outs, 2);
  CHECK(g != NULL);
  m = esg_compile(g, NULL);
  esg_graph_destroy(g);
  CHECK(m != NULL);
  in = buffer(x, sizeof x, ESG_F32, xd, 1);
  CHECK(esg_model_output_shape(m, &in, 1, 0, &dt, dims, 2, &rank) == ESG_OK);
  CHECK(dt == ESG_I64 && rank == 2 && dims[0] == 1 && dims[1] == -1);
  CHECK(esg_model_run_allocated(m, &in, 1, made, 2) == ESG_OK);
  CHECK(made[0].dtype == ESG_I64 && made[0].rank == 2 && made[0].dims[0] == 1 && made[0].dims[1] == 3);
  CHECK(made[0].nbytes == 3 * sizeof(int64_t));
  CHECK(((int64_t*)made[0].data)[0] == 1 && ((int64_t*)made[0].data)[1] == 3 && ((int64_t*)made[0].data)[2] == 4);
  CHECK(made[1].rank == 0 && *(int64_t*)made[1].data == 8);
  esg_buffer_free(&made[0]);
  esg_buffer_free(&made[1]);
  CHECK(made[0].data == NULL && made[0].dims == NULL && made[0].rank == 0);
  esg_buffer_free(&made[0]); /* a zeroed buffer: nothing */
  esg_buffer_free(NULL);
  /* a caller's buffer of the size the run comes to is filled; another size is refused */
  dims[0] = 1;
  dims[1] = 3;
  out = buffer(idx, sizeof idx, ESG_I64, dims, 2);
  too_many[0] = out;
  too_many[1] = buffer(big, sizeof(int64_t), ESG_I64, NULL, 0);
  CHECK(esg_model_run(m, &in, 1, too_many, 2) == ESG_OK);
  CHECK(idx[0] == 1 && idx[1] == 3 && idx[2] == 4 && big[0] == 8);
  too_many[0] = buffer(big + 1, 2 * sizeof(int64_t), ESG_I64, wrong, 2); /* memory of its own beside output 1 */
  CHECK(esg_model_run(m, &in, 1, too_many, 2) == ESG_ERR_SHAPE);
  CHECK(strstr(esg_last_error(), "came to [1,3]") != NULL);
  /* bad calls allocate nothing and zero the buffers */
  memset(too_many, 0x5a, sizeof too_many);
  CHECK(esg_model_run_allocated(m, &in, 1, too_many, 3) == ESG_ERR_INVALID_ARGUMENT);
  CHECK(too_many[0].data == NULL && too_many[2].dims == NULL);
  CHECK(esg_model_run_allocated(m, &in, 1, NULL, 2) == ESG_ERR_INVALID_ARGUMENT);
  CHECK(esg_model_run_allocated(NULL, &in, 1, made, 2) == ESG_ERR_INVALID_ARGUMENT);
  CHECK(esg_model_run_allocated(m, &in, 0, made, 2) == ESG_ERR_INVALID_ARGUMENT);
  CHECK(made[0].data == NULL && made[1].data == NULL);
  CHECK(esg_model_get_stats(m, &stats) == ESG_OK);
  CHECK(stats.stages == 2 && stats.sized_ops == 1);
  esg_model_destroy(m);
  { /* a shape given as a tensor: reshape_to reads it as the run goes */
    int64_t sd[1] = {2}, shape[2] = {-1, 1}, got_dims[2];
    esg_tensor ts_in, ty;
    esg_buffer ins[2], y;
    tx = esg_input(b, "x", ESG_F32, xd, 1);
    ts_in = esg_input(b, "shape", ESG_I64, sd, 1);
    ty = esg_reshape_to(tx, ts_in, NULL);
    g = esg_builder_build(b, &ty, 1);
    m = esg_compile(g, NULL);
    esg_graph_destroy(g);
    CHECK(m != NULL);
    ins[0] = in;
    ins[1] = buffer(shape, sizeof shape, ESG_I64, sd, 1);
    CHECK(esg_model_output_shape(m, ins, 2, 0, &dt, got_dims, 2, &rank) == ESG_OK);
    CHECK(rank == 2 && got_dims[0] == -1 && got_dims[1] == -1);
    CHECK(esg_model_run_allocated(m, ins, 2, &y, 1) == ESG_OK);
    CHECK(y.rank == 2 && y.dims[0] == 5 && y.dims[1] == 1 && ((float*)y.data)[4] == 3);
    esg_buffer_free(&y);
    shape[0] = 2; /* 5 elements in rows of 2: refused, naming reshape */
    CHECK(esg_model_run_allocated(m, ins, 2, &y, 1) == ESG_ERR_SHAPE);
    CHECK(strstr(esg_last_error(), "reshape") != NULL && y.data == NULL);
    esg_model_destroy(m);
  }
  { /* pad_to: the pads a tensor of the caller's, read as the run goes */
    int64_t xd2[2] = {1, 2}, pd[1] = {4}, pads[4] = {0, 1, 1, 0};
    float xs2[2] = {1, 2};
    esg_tensor tp, ty;
    esg_buffer ins[2], y;
    esg_pad_to_options po;
    esg_pad_to_options_init(&po);
    po.value = 9;
    tx = esg_input(b, "x2", ESG_F32, xd2, 2);
    tp = esg_input(b, "pads", ESG_I64, pd, 1);
    ty = esg_pad_to(tx, tp, &po);
    g = esg_builder_build(b, &ty, 1);
    m = esg_compile(g, NULL);
    esg_graph_destroy(g);
    CHECK(m != NULL);
    ins[0] = buffer(xs2, sizeof xs2, ESG_F32, xd2, 2);
    ins[1] = buffer(pads, sizeof pads, ESG_I64, pd, 1);
    CHECK(esg_model_run_allocated(m, ins, 2, &y, 1) == ESG_OK);
    CHECK(y.rank == 2 && y.dims[0] == 2 && y.dims[1] == 3);
    CHECK(((float*)y.data)[0] == 9 && ((float*)y.data)[1] == 1 && ((float*)y.data)[2] == 2 && ((float*)y.data)[5] == 9);
    esg_buffer_free(&y);
    pads[1] = -1; /* a negative pad: pad's own refusal */
    CHECK(esg_model_run_allocated(m, ins, 2, &y, 1) == ESG_ERR_ATTRIBUTE);
    CHECK(strstr(esg_last_error(), "pad") != NULL);
    esg_model_destroy(m);
  }
  { /* max_memory_bytes: a shape read from data past the cap fails that run only */
    int64_t sd[1] = {2}, shape[2] = {1 << 20, 1 << 10};
    esg_tensor ts_in, ty;
    esg_buffer y, shape_in;
    esg_compile_options o;
    esg_compile_options_init(&o);
    CHECK(o.max_memory_bytes == 0);
    o.max_memory_bytes = 1 << 20;
    ts_in = esg_input(b, "fill shape", ESG_I64, sd, 1);
    ty = esg_fill_to(ts_in, NULL);
    g = esg_builder_build(b, &ty, 1);
    m = esg_compile(g, &o);
    esg_graph_destroy(g);
    CHECK(m != NULL);
    shape_in = buffer(shape, sizeof shape, ESG_I64, sd, 1);
    CHECK(esg_model_run_allocated(m, &shape_in, 1, &y, 1) == ESG_ERR_LIMIT);
    CHECK(strstr(esg_last_error(), "max_memory_bytes (1048576)") != NULL && y.data == NULL);
    shape[0] = 3, shape[1] = 2;
    CHECK(esg_model_run_allocated(m, &shape_in, 1, &y, 1) == ESG_OK);
    CHECK(y.rank == 2 && y.dims[0] == 3 && y.dims[1] == 2);
    esg_buffer_free(&y);
    esg_model_destroy(m);
  }
  esg_builder_destroy(b);
}

/* Collectives in a world of one process (no launcher): the world, a copy, the stats, and the
   communicator hand-over refused once the world is found (tests/distributed runs two ranks). */
static void test_collectives(void) {
  esg_builder* b = esg_builder_create("collectives");
  int64_t xd[1] = {3};
  float x[3] = {1, 2, 3}, y[3] = {0, 0, 0};
  int size = -1, rank = -1, comm = 0;
  int64_t bad_ranks[1] = {1};
  esg_all_reduce_options o;
  esg_tensor tx, ty;
  esg_graph* g;
  esg_model* m;
  esg_buffer in, out;
  esg_model_stats stats;
  CHECK(esg_dist_world(&size, &rank) == ESG_OK && size == 1 && rank == 0);
  CHECK(esg_dist_world(NULL, NULL) == ESG_OK);
  CHECK(esg_dist_use_mpi_comm(NULL) == ESG_ERR_INVALID_ARGUMENT);
  CHECK(esg_dist_use_mpi_comm(&comm) == ESG_ERR_INVALID_ARGUMENT);
  CHECK(strstr(esg_last_error(), "the world is already found") != NULL);
  tx = esg_input(b, "x", ESG_F32, xd, 1);
  esg_all_reduce_options_init(&o);
  /* a group naming a rank outside the world: refused where it is built */
  o.ranks.data = bad_ranks;
  o.ranks.size = 1;
  CHECK(!esg_tensor_valid(esg_all_reduce(tx, &o)));
  CHECK(esg_builder_status(b) == ESG_ERR_ATTRIBUTE);
  CHECK(strstr(esg_builder_error(b), "outside the world of 1 process") != NULL);
  esg_builder_clear_error(b);
  o.ranks.size = 0;
  o.op = ESG_ALL_REDUCE_OP_MAX;
  ty = esg_all_reduce(tx, &o);
  g = esg_builder_build(b, &ty, 1);
  CHECK(g != NULL);
  m = esg_compile(g, NULL);
  esg_graph_destroy(g);
  in = buffer(x, sizeof x, ESG_F32, xd, 1);
  out = buffer(y, sizeof y, ESG_F32, xd, 1);
  CHECK(m && esg_model_run(m, &in, 1, &out, 1) == ESG_OK);
  CHECK(y[0] == 1 && y[2] == 3);
  CHECK(esg_model_get_stats(m, &stats) == ESG_OK);
  CHECK(stats.collectives == 1 && stats.collective_bytes == (int64_t)sizeof x);
  esg_model_destroy(m);
  esg_builder_destroy(b);
  CHECK(ESG_ERR_COMMUNICATION == 14);
}

/* A prepared run: buffers checked once, each run straight to the program; the model may be
   destroyed first; bad buffers are refused when prepared. */
static void test_prepared_runs(void) {
  esg_builder* b = esg_builder_create("prepared");
  int64_t xd[1] = {3}, wrong[1] = {2};
  float x[3] = {1, 2, 3}, y[3] = {0, 0, 0};
  esg_tensor tx, ty;
  esg_model* m;
  esg_prepared* p;
  esg_buffer in, out, bad;
  tx = esg_input(b, "x", ESG_F32, xd, 1);
  ty = esg_mul(esg_add(tx, tx, NULL), tx, NULL); /* 2 x^2 */
  m = compile_output(b, ty);
  in = buffer(x, sizeof x, ESG_F32, xd, 1);
  out = buffer(y, sizeof y, ESG_F32, xd, 1);
  CHECK(esg_model_prepare(NULL, &in, 1, &out, 1) == NULL && esg_last_status() == ESG_ERR_INVALID_ARGUMENT);
  CHECK(esg_model_prepare(m, &in, 0, &out, 1) == NULL && esg_last_status() == ESG_ERR_INVALID_ARGUMENT);
  bad = buffer(y, 2 * sizeof(float), ESG_F32, wrong, 1); /* a whole buffer, of the wrong shape: the model refuses it */
  CHECK(esg_model_prepare(m, &in, 1, &bad, 1) == NULL && esg_last_status() == ESG_ERR_SHAPE);
  CHECK(strstr(esg_last_error(), "prepare: output 0 (f32[3]) got a buffer of shape [2]") != NULL);
  bad = buffer(x, sizeof x, ESG_I32, xd, 1);
  CHECK(esg_model_prepare(m, &bad, 1, &out, 1) == NULL && esg_last_status() == ESG_ERR_DTYPE);
  p = esg_model_prepare(m, &in, 1, &out, 1);
  CHECK(p != NULL);
  esg_model_destroy(m); /* the prepared run keeps the model */
  CHECK(esg_prepared_run(p) == ESG_OK);
  CHECK(y[0] == 2 && y[1] == 8 && y[2] == 18);
  x[0] = 4; /* the same buffers, new bytes */
  CHECK(esg_prepared_run(p) == ESG_OK);
  CHECK(y[0] == 32 && y[2] == 18);
  CHECK(esg_prepared_run(NULL) == ESG_ERR_INVALID_ARGUMENT);
  esg_prepared_destroy(p);
  esg_prepared_destroy(NULL);
  esg_builder_destroy(b);
}

/* Two outputs in one stretch of memory are refused by run, prepare and profile, naming both;
   outputs side by side in one array are fine. */
static void test_outputs_that_overlap(void) {
  esg_builder* b = esg_builder_create("two_outputs");
  int64_t d[1] = {2};
  float x[2] = {1, -2}, y[4] = {9, 9, 9, 9};
  esg_tensor tx, outs[2];
  esg_graph* g;
  esg_model* m;
  esg_buffer in, o[2];
  tx = esg_input(b, "x", ESG_F32, d, 1);
  outs[0] = esg_relu(tx, NULL);
  outs[1] = esg_neg(tx, NULL);
  g = esg_builder_build(b, outs, 2);
  esg_builder_destroy(b);
  m = esg_compile(g, NULL);
  esg_graph_destroy(g);
  CHECK(m != NULL);
  in = buffer(x, sizeof x, ESG_F32, d, 1);
  o[0] = buffer(y, 2 * sizeof(float), ESG_F32, d, 1);
  o[1] = buffer(y + 1, 2 * sizeof(float), ESG_F32, d, 1); /* shares y[1] with output 0 */
  CHECK(esg_model_run(m, &in, 1, o, 2) == ESG_ERR_INVALID_ARGUMENT);
  CHECK(strstr(esg_last_error(), "output 1 shares memory with output 0") != NULL);
  CHECK(esg_model_prepare(m, &in, 1, o, 2) == NULL && esg_last_status() == ESG_ERR_INVALID_ARGUMENT);
  CHECK(esg_model_profile(m, &in, 1, o, 2, "unused.json") == ESG_ERR_INVALID_ARGUMENT);
  CHECK(y[0] == 9 && y[1] == 9 && y[2] == 9); /* nothing ran */
  o[1] = buffer(y + 2, 2 * sizeof(float), ESG_F32, d, 1); /* side by side */
  CHECK(esg_model_run(m, &in, 1, o, 2) == ESG_OK);
  CHECK(y[0] == 1 && y[1] == 0 && y[2] == -1 && y[3] == 2);
  esg_model_destroy(m);
}

/* A file's bytes, read whole (the caller frees them with free), or NULL. */
static unsigned char* read_file(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  unsigned char* bytes = NULL;
  long n;
  *size = 0;
  if (!f) return NULL;
  if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0) {
    bytes = (unsigned char*)malloc((size_t)n);
    if (bytes && fread(bytes, 1, (size_t)n, f) == (size_t)n) {
      *size = (size_t)n;
    } else {
      free(bytes);
      bytes = NULL;
    }
  }
  fclose(f);
  return bytes;
}

/* The compiled-model file: a saved model loads and runs to the same bits without compiling;
   a missing file, a truncated one, a compile choice set on load and NULL paths are refused. */
/* The compile cache: a second compile of `m`'s graph loads the first one's entry; a graph keyed
   on its file is found before the file is read. */
static void test_compile_cache(const esg_model* m) {
  esg_graph* g = esg_model_graph(m);
  esg_compile_options o;
  esg_model_stats stats;
  esg_model *first, *second, *found;
  char source[256], dir[256], command[300];
  sprintf(source, "/tmp/esg_c99_%ld_source.esg", (long)getpid());
  sprintf(dir, "/tmp/esg_c99_%ld_cache", (long)getpid());
  CHECK(g != NULL);
  if (!g) return;
  CHECK(esg_graph_save(g, source) == ESG_OK);
  esg_compile_options_init(&o);
  o.cache_dir = dir;
  first = esg_compile(g, &o);
  second = esg_compile(g, &o);
  CHECK(first != NULL && second != NULL);
  memset(&stats, 0, sizeof stats);
  CHECK(esg_model_get_stats(second, &stats) == ESG_OK);
  CHECK(stats.cache_hits == 1 && stats.plans == 0);
  CHECK(esg_model_find_cached(source, &o) == NULL && esg_last_status() == ESG_OK);
  o.cache_source = source;
  esg_model_destroy(esg_compile(g, &o));
  found = esg_model_find_cached(source, &o);
  CHECK(found != NULL);
  memset(&stats, 0, sizeof stats);
  CHECK(found && esg_model_get_stats(found, &stats) == ESG_OK && stats.cache_hits == 1);
  CHECK(esg_model_find_cached(NULL, &o) == NULL && esg_last_status() == ESG_ERR_INVALID_ARGUMENT);
  esg_model_destroy(found);
  esg_model_destroy(second);
  esg_model_destroy(first);
  esg_graph_destroy(g);
  remove(source);
  sprintf(command, "rm -rf %s", dir);
  CHECK(system(command) == 0);
}

static void test_model_file(void) {
  esg_builder* b = esg_builder_create("model_file");
  int64_t xd[2] = {3, 4}, wd[2] = {4, 5}, bd[1] = {5};
  float w[20], bias[5], x[12], y[15], y_loaded[15];
  esg_tensor tx, ty;
  esg_model *m, *loaded;
  esg_compile_options o;
  esg_model_stats stats;
  esg_buffer in, out;
  int64_t yd[2] = {3, 5};
  char path[256], half_path[256], dir_path[256];
  unsigned char* bytes;
  size_t size = 0, i;
  FILE* f;
  for (i = 0; i < 20; ++i) w[i] = (float)i * 0.37f - 3.1f;
  for (i = 0; i < 5; ++i) bias[i] = 0.25f - (float)i * 0.5f;
  for (i = 0; i < 12; ++i) x[i] = (float)(i % 5) * 1.3f - 2.0f;
  sprintf(path, "/tmp/esg_c99_%ld.esgm", (long)getpid());
  sprintf(half_path, "/tmp/esg_c99_%ld_half.esgm", (long)getpid());
  sprintf(dir_path, "/tmp/esg_c99_%ld_missing/m.esgm", (long)getpid());
  tx = esg_input(b, "x", ESG_F32, xd, 2);
  ty = esg_tanh(esg_add(esg_matmul(tx, esg_constant(b, ESG_F32, wd, 2, w, sizeof w), NULL),
                        esg_constant(b, ESG_F32, bd, 1, bias, sizeof bias), NULL),
                NULL);
  CHECK(esg_builder_status(b) == ESG_OK);
  m = compile_output(b, ty);
  in = buffer(x, sizeof x, ESG_F32, xd, 2);
  out = buffer(y, sizeof y, ESG_F32, yd, 2);
  memset(y, 0, sizeof y);
  CHECK(esg_model_run(m, &in, 1, &out, 1) == ESG_OK);

  /* Round trip: the loaded model compiles nothing and gives the compiled one's bits. */
  CHECK(esg_model_save(m, path) == ESG_OK);
  loaded = esg_model_load(path, NULL);
  CHECK(loaded != NULL);
  if (loaded) {
    CHECK(esg_model_num_inputs(loaded) == 1 && esg_model_num_outputs(loaded) == 1);
    CHECK(strcmp(esg_model_input_name(loaded, 0), "x") == 0);
    out = buffer(y_loaded, sizeof y_loaded, ESG_F32, yd, 2);
    memset(y_loaded, 0xff, sizeof y_loaded);
    CHECK(esg_model_run(loaded, &in, 1, &out, 1) == ESG_OK);
    CHECK(memcmp(y, y_loaded, sizeof y) == 0);
    memset(&stats, 0, sizeof stats);
    CHECK(esg_model_get_stats(loaded, &stats) == ESG_OK);
    CHECK(stats.plans == 0 && stats.launches > 0);
    esg_model_destroy(loaded);
  }
  /* Threads and limits may be set on load. */
  esg_compile_options_init(&o);
  o.threads = 1;
  o.max_loop_iterations = 100;
  loaded = esg_model_load(path, &o);
  CHECK(loaded != NULL);
  esg_model_destroy(loaded);

  /* Refusals: a missing file or directory, a directory, half a file, a compile choice, NULL paths. */
  CHECK(esg_model_load("/nonexistent/model.esgm", NULL) == NULL && esg_last_status() == ESG_ERR_IO);
  CHECK(esg_model_load(dir_path, NULL) == NULL && esg_last_status() == ESG_ERR_IO);
  CHECK(esg_model_load("/tmp", NULL) == NULL && esg_last_status() == ESG_ERR_IO);
  bytes = read_file(path, &size);
  CHECK(bytes != NULL && size > 64);
  if (bytes) {
    f = fopen(half_path, "wb");
    CHECK(f != NULL);
    if (f) {
      CHECK(fwrite(bytes, 1, size / 2, f) == size / 2);
      fclose(f);
      CHECK(esg_model_load(half_path, NULL) == NULL && esg_last_status() == ESG_ERR_FORMAT);
      CHECK(strstr(esg_last_error(), "truncated") != NULL);
    }
    free(bytes);
  }
  esg_compile_options_init(&o);
  o.streams = 2;
  CHECK(esg_model_load(path, &o) == NULL && esg_last_status() == ESG_ERR_INVALID_ARGUMENT);
  CHECK(strstr(esg_last_error(), "streams") != NULL);
  CHECK(esg_model_load(NULL, NULL) == NULL && esg_last_status() == ESG_ERR_INVALID_ARGUMENT);
  CHECK(esg_model_save(m, NULL) == ESG_ERR_INVALID_ARGUMENT);
  CHECK(esg_model_save(NULL, path) == ESG_ERR_INVALID_ARGUMENT);
  CHECK(esg_model_save(m, dir_path) == ESG_ERR_IO);
  test_compile_cache(m);
  esg_model_destroy(m);
  esg_builder_destroy(b);
  remove(path);
  remove(half_path);
}

/* The model's record of facts: every entry enumerated with its key and kind, a list's rows read
   as records, lookups by key, and each misuse refused with a clear error. A snapshot outlives
   its model. */
static void test_facts(void) {
  esg_builder* b = esg_builder_create("facts");
  int64_t dims[2] = {4, 8}, w_dims[2] = {8, 3};
  float w[24] = {0};
  esg_tensor x = esg_input(b, "x", ESG_F32, dims, 2);
  esg_tensor bias = esg_constant(b, ESG_F32, w_dims + 1, 1, w, 3 * sizeof(float));
  esg_tensor y = esg_relu(esg_add(esg_matmul(x, esg_constant(b, ESG_F32, w_dims, 2, w, sizeof w), NULL), bias, NULL), NULL);
  esg_graph* g = esg_builder_build(b, &y, 1);
  esg_model* m = esg_compile(g, NULL);
  esg_facts* facts = esg_model_facts(m);
  esg_fact fact;
  const esg_facts* row;
  int64_t i, n = esg_facts_count(facts), seen = 0, passes = -1;
  int kinds_ok = 1;
  CHECK(facts != NULL && n > 10);
  for (i = 0; i < n; ++i) {
    CHECK(esg_facts_entry(facts, i, &fact) == ESG_OK);
    kinds_ok = kinds_ok && fact.kind >= ESG_FACT_COUNT && fact.kind <= ESG_FACT_LIST && fact.key[0] != 0 && fact.text != NULL;
    if (strcmp(fact.key, "launches") == 0) seen += fact.kind == ESG_FACT_COUNT && fact.number == 1;
    if (strcmp(fact.key, "arena_bytes") == 0) seen += fact.kind == ESG_FACT_BYTES;
    if (strcmp(fact.key, "backend") == 0) seen += fact.kind == ESG_FACT_TEXT && strcmp(fact.text, "cpu") == 0;
    if (strcmp(fact.key, "passes") == 0 && fact.kind == ESG_FACT_LIST) passes = i, seen += fact.number > 5;
  }
  CHECK(kinds_ok);
  CHECK(seen == 4);
  /* A row is a record: the first pass's step. */
  row = esg_facts_row(facts, passes, 0);
  CHECK(row != NULL && esg_facts_count(row) == 1);
  CHECK(esg_facts_entry(row, 0, &fact) == ESG_OK && strcmp(fact.key, "step") == 0 && strlen(fact.text) > 0);
  /* The same figure as the stats struct's. */
  CHECK(esg_facts_find(facts, "fused_groups", &fact) == ESG_OK && fact.number == 1);
  /* Misuse: each a clear error, nothing crashes. */
  CHECK(esg_facts_find(facts, "no_such_key", &fact) == ESG_ERR_INVALID_ARGUMENT);
  CHECK(strstr(esg_last_error(), "no_such_key") != NULL);
  CHECK(esg_facts_entry(facts, n, &fact) == ESG_ERR_INVALID_ARGUMENT);
  CHECK(esg_facts_entry(facts, -1, &fact) == ESG_ERR_INVALID_ARGUMENT);
  CHECK(esg_facts_entry(facts, 0, NULL) == ESG_ERR_INVALID_ARGUMENT);
  CHECK(esg_facts_entry(NULL, 0, &fact) == ESG_ERR_INVALID_ARGUMENT);
  CHECK(esg_facts_find(facts, NULL, &fact) == ESG_ERR_INVALID_ARGUMENT);
  CHECK(esg_facts_row(facts, passes, 1000) == NULL && esg_last_status() == ESG_ERR_INVALID_ARGUMENT);
  CHECK(esg_facts_row(facts, 0, 0) == NULL && strstr(esg_last_error(), "no list") != NULL); /* cache_hits: a count */
  CHECK(esg_facts_count(NULL) == -1);
  CHECK(esg_model_facts(NULL) == NULL && esg_last_status() == ESG_ERR_INVALID_ARGUMENT);
  esg_facts_free((esg_facts*)row); /* a row goes with its snapshot: ignored */
  esg_facts_free(NULL);
  /* The snapshot outlives the model. */
  esg_model_destroy(m);
  CHECK(esg_facts_find(facts, "launches", &fact) == ESG_OK && fact.number == 1);
  esg_facts_free(facts);
  esg_graph_destroy(g);
  esg_builder_destroy(b);
}

/* esg_constant_in_place: the caller's weights, read where they lie until the last user lets go. */
static int released = 0;
static void count_release(void* context) { released += *(int*)context; }

static void test_constant_in_place(void) {
  esg_builder* b = esg_builder_create("in_place");
  int64_t dims[2] = {1, 2}, w_dims[2] = {2, 2};
  float w[5] = {1, 2, 3, 4, 0}, x[2] = {1, 1}, y[2] = {0, 0};
  int one = 1, ten = 10;
  esg_tensor tx = esg_input(b, "x", ESG_F32, dims, 2);
  esg_tensor tw = esg_constant_in_place(b, ESG_F32, w_dims, 2, w, 4 * sizeof(float), count_release, &one);
  esg_tensor ty = esg_matmul(tx, tw, NULL);
  esg_graph* g = esg_builder_build(b, &ty, 1);
  esg_model* m;
  esg_buffer in, out;
  CHECK(g != NULL);
  m = esg_compile(g, NULL);
  CHECK(m != NULL);
  esg_graph_destroy(g);
  esg_builder_destroy(b);
  CHECK(released == 0); /* the model still reads the weights */
  in = buffer(x, sizeof x, ESG_F32, dims, 2);
  out = buffer(y, sizeof y, ESG_F32, dims, 2);
  CHECK(esg_model_run(m, &in, 1, &out, 1) == ESG_OK);
  CHECK(y[0] == 4 && y[1] == 6);
  esg_model_destroy(m);
  CHECK(released == 1); /* once, when the last user is gone */
  /* Refused calls release at once: the memory is handed over either way. */
  b = esg_builder_create("refused");
  released = 0;
  tw = esg_constant_in_place(b, ESG_F32, w_dims, 2, (const char*)w + 1, 4 * sizeof(float), count_release, &ten);
  CHECK(tw.priv_builder == NULL && esg_last_status() == ESG_ERR_INVALID_ARGUMENT);
  CHECK(strstr(esg_last_error(), "not aligned") != NULL);
  CHECK(released == 10);
  esg_builder_clear_error(b);
  tw = esg_constant_in_place(b, ESG_F32, w_dims, 2, w, 3 * sizeof(float), count_release, &one);
  CHECK(strstr(esg_last_error(), "needs 16 bytes, got 12") != NULL && released == 11);
  esg_builder_clear_error(b);
  tw = esg_constant_in_place(b, ESG_F32, w_dims, 2, NULL, 16, count_release, &one);
  CHECK(strstr(esg_last_error(), "data is NULL") != NULL && released == 12);
  tw = esg_constant_in_place(NULL, ESG_F32, w_dims, 2, w, 16, count_release, &one);
  CHECK(esg_last_status() == ESG_ERR_INVALID_ARGUMENT && released == 13);
  esg_builder_clear_error(b);
  tw = esg_constant_in_place(b, ESG_F32, w_dims, 2, w, 16, NULL, NULL); /* nothing to release */
  CHECK(tw.priv_builder == b);
  esg_builder_destroy(b);
}

int main(int argc, char** argv) {
  test_mlp(argc > 1 ? argv[1] : ".");
  test_options();
  test_newer_options();
  test_errors();
  test_split_and_while();
  test_compile_and_run();
  test_attention();
  test_unsigned();
  test_sequence_at();
  test_matmul_integer();
  test_matmul_nbits();
  test_quantized_add();
  test_quantize();
  test_ascend_sim();
  test_streams_and_threads();
  test_inspection();
  test_run_limits();
  test_bodies_made_out_of_order_survive_a_reload();
  test_sizes_the_data_decides();
  test_collectives();
  test_prepared_runs();
  test_outputs_that_overlap();
  test_model_file();
  test_facts();
  test_constant_in_place();
  return check_summary("c99");
}
