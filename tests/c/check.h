/* A tiny check harness shared by the C test programs: CHECK counts and
 * reports, the program prints "N passed, N failed" at the end. */
#ifndef REDISLOCK_TEST_CHECK_H
#define REDISLOCK_TEST_CHECK_H

#include <stdio.h>
#include <string.h>
#include <time.h>

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

/* The monotonic clock in milliseconds. */
static inline double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

/* Sleep `ms` milliseconds (a signal may cut it short). */
static inline void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

#endif
