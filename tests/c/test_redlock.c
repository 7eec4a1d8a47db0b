/*
 * Redlock from C: redislock_client_open_redlock over three servers.
 *
 *   test_redlock URL1 URL2 URL3 DEAD_URL
 *
 * Prints "N passed, N failed"; exits 1 when a check failed.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <string.h>

#include "check.h"

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s URL1 URL2 URL3 DEAD_URL\n", argv[0]);
    return 2;
  }
  const char *all[3] = {argv[1], argv[2], argv[3]};
  const char *one_dead[3] = {argv[1], argv[2], argv[4]};
  const char *two_dead[3] = {argv[1], argv[4], argv[4]};
  redislock_client *c = NULL, *c1 = NULL, *c2 = NULL;
  CHECK(redislock_client_open_redlock(all, 3, &c) == REDISLOCK_OK, "open: %s", last_error());
  CHECK(redislock_client_open_redlock(one_dead, 3, &c1) == REDISLOCK_OK, "open: %s", last_error());
  CHECK(redislock_client_open_redlock(two_dead, 3, &c2) == REDISLOCK_OK, "open: %s", last_error());

  redislock_lock *a = NULL, *b = NULL;
  CHECK(redislock_acquire(c, KEY("rl"), 10000, 0, NULL, 0, &a) == REDISLOCK_OK, "acquire: %s", last_error());
  CHECK(redislock_lock_fence(a) >= 1, "an (advisory) fence");
  CHECK(redislock_acquire(c, KEY("rl"), 10000, 0, NULL, 0, &b) == REDISLOCK_NOT_ACQUIRED, "held");
  CHECK(redislock_extend(a, 20000) == REDISLOCK_OK, "extend: %s", last_error());
  CHECK(redislock_release(a) == REDISLOCK_OK, "release: %s", last_error());
  /* A Redlock release returns once a majority answered: a node still
   * releasing (a stalled machine) may refuse a try-once, so this waits. */
  CHECK(redislock_acquire(c, KEY("rl"), 10000, 10000, NULL, 0, &b) == REDISLOCK_OK, "free again: %s",
        last_error());
  redislock_lock_free(b);

  /* One of three down: a majority remains. */
  CHECK(redislock_acquire(c1, KEY("rl1"), 10000, 0, NULL, 0, &a) == REDISLOCK_OK, "2 of 3: %s", last_error());
  CHECK(redislock_release(a) == REDISLOCK_OK, "release 2 of 3: %s", last_error());
  /* Two of three down: no quorum. */
  a = NULL;
  CHECK(redislock_acquire(c2, KEY("rl2"), 10000, 2000, NULL, 0, &a) == REDISLOCK_NO_QUORUM, "1 of 3");
  CHECK(a == NULL, "out written on failure");
  CHECK(strstr(last_error(), "majority") != NULL, "message: %s", last_error());

  redislock_client_free(c);
  redislock_client_free(c1);
  redislock_client_free(c2);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
