/*
 * Fencing numbers from C, one phase per run (tests/c_api.rs checks the
 * server in between):
 *
 *   test_fence URL names N    lock and release order:1 .. order:N once each
 *   test_fence URL fence NAME lock and release NAME once, print "fence F"
 *
 * Prints "N passed, N failed"; exits 1 when a check failed.
 */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* Fences stay exact as doubles (Lua, PHP, JavaScript). */
#define MAX_FENCE ((uint64_t)1 << 53)

static uint64_t take(redislock_client *c, const char *name) {
  redislock_lock *l = NULL;
  redislock_status s = redislock_acquire(c, KEY(name), 10000, 0, NULL, 0, &l);
  CHECK(s == REDISLOCK_OK, "acquire %s: %s", name, last_error());
  if (s != REDISLOCK_OK) {
    return 0;
  }
  uint64_t f = redislock_lock_fence(l);
  CHECK(f > 0 && f < MAX_FENCE, "fence %" PRIu64 " of %s", f, name);
  CHECK(redislock_release(l) == REDISLOCK_OK, "release %s: %s", name, last_error());
  return f;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s URL names N | %s URL fence NAME\n", argv[0], argv[0]);
    return 2;
  }
  redislock_client *c = NULL;
  CHECK(redislock_client_open(argv[1], &c) == REDISLOCK_OK, "open: %s", last_error());
  if (c == NULL) {
    printf("%d passed, %d failed\n", passed, failed);
    return 1;
  }
  if (strcmp(argv[2], "names") == 0) {
    long n = strtol(argv[3], NULL, 10);
    char name[32];
    uint64_t last = 0;
    for (long i = 1; i <= n; i++) {
      snprintf(name, sizeof name, "order:%ld", i);
      uint64_t f = take(c, name);
      /* One name twice: its second fence is larger. */
      if (i == 1) {
        last = f;
        uint64_t again = take(c, name);
        CHECK(again > last, "fence %" PRIu64 " after %" PRIu64, again, last);
      }
    }
  } else if (strcmp(argv[2], "fence") == 0) {
    printf("fence %" PRIu64 "\n", take(c, argv[3]));
  } else {
    fprintf(stderr, "unknown phase %s\n", argv[2]);
    return 2;
  }
  redislock_client_free(c);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
