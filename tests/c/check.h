/* A few lines of test harness for the C suites (C99): CHECK counts, and the closing line
   "<name>: N passed, N failed" that test runners read. */
#ifndef ESG_TESTS_CHECK_H
#define ESG_TESTS_CHECK_H

#include <stdio.h>

static int check_passed = 0, check_failed = 0;

#define CHECK(cond)                                                                            \
  do {                                                                                         \
    if (cond) {                                                                                \
      ++check_passed;                                                                          \
    } else {                                                                                   \
      ++check_failed;                                                                          \
      fprintf(stderr, "%s:%d: CHECK(%s) failed; last error: %s\n", __FILE__, __LINE__, #cond, \
              esg_last_error());                                                               \
    }                                                                                          \
  } while (0)

/* Prints the closing line and gives main's exit code. */
static int check_summary(const char* name) {
  printf("%s: %d passed, %d failed\n", name, check_passed, check_failed);
  return check_failed ? 1 : 0;
}

#endif
