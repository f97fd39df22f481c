/* A client built against the current headers, run against a library built from the oldest
   released op set: options the library knows work, leaving newer options at their defaults
   works, and setting a newer option fails with a clear error instead of being ignored. */
#include <stdio.h>
#include <string.h>

#include <esgraph/c/esgraph.h>

#include "check.h"


int main(void) {
  esg_builder* b = esg_builder_create("new_client");
  int64_t xd[2] = {2, 8}, md[1] = {8};
  esg_tensor x = esg_input(b, "x", ESG_F32, xd, 2), mask = esg_input(b, "mask", ESG_F32, md, 1);
  esg_softmax_options o;
  CHECK(strcmp(esg_version(), ESG_VERSION_STRING) != 0); /* really an older library */

  esg_softmax_options_init(&o); /* the library's init: fields it does not know stay zero */
  o.axis = 1;
  CHECK(esg_tensor_valid(esg_softmax(x, &o)));

  esg_softmax_options_init(&o);
  o.scale = 0.5; /* an attribute the library does not have */
  CHECK(!esg_tensor_valid(esg_softmax(x, &o)));
  CHECK(esg_last_status() == ESG_ERR_UNSUPPORTED);
  CHECK(strstr(esg_last_error(), "built against newer headers") != NULL);

  esg_softmax_options_init(&o);
  o.mask = mask; /* an input the library does not have */
  CHECK(!esg_tensor_valid(esg_softmax(x, &o)));
  CHECK(esg_last_status() == ESG_ERR_UNSUPPORTED);

  esg_builder_clear_error(b);
  CHECK(esg_tensor_valid(esg_softmax(x, NULL)));
  esg_builder_destroy(b);
  printf("new client: headers %s, library %s\n", ESG_VERSION_STRING, esg_version());
  return check_summary("new client on an older library");
}
