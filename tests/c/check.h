/* A tiny check harness shared by the C test programs: CHECK counts and
 * reports, the program prints "N passed, N failed" at the end. */
#ifndef REDISLOCK_TEST_CHECK_H
#define REDISLOCK_TEST_CHECK_H

#include <stdio.h>
#include <string.h>

#include "redislock.h"

static int passed, failed;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (cond) {                                                                \
      passed++;                                                                \
    } else {                                                                   \
      failed++;                                                                \
      printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                   \
      printf(__VA_ARGS__);                                                     \
      printf("\n");                                                            \
    }                                                                          \
  } while (0)

#define KEY(s) (const uint8_t *)(s), strlen(s)

/* The message of this thread's last failure (a static buffer). */
static const char *last_error(void) {
  static char buf[1024];
  redislock_last_error(buf, sizeof buf);
  return buf;
}

#endif
