/*
 * redislock_doctor from C:
 *
 *   test_doctor SAFE_URL UNSAFE_URL DEAD_URL
 *
 * SAFE_URL is a server with nothing unsafe (the test servers run without
 * persistence: one warning), UNSAFE_URL one whose maxmemory-policy can
 * evict a lock, DEAD_URL one nobody listens on. Prints "N passed, N
 * failed"; exits 1 when a check failed.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* The finding of `check`, or NULL. */
static const redislock_finding *find(const redislock_report *r, const char *check) {
  for (size_t i = 0; i < redislock_report_count(r); i++) {
    const redislock_finding *f = redislock_report_finding(r, i);
    if (strcmp(f->check, check) == 0) {
      return f;
    }
  }
  return NULL;
}

static redislock_report *doctor(const char *url) {
  redislock_client *c = NULL;
  redislock_report *r = NULL;
  CHECK(redislock_client_open(url, &c) == REDISLOCK_OK, "open: %s", last_error());
  CHECK(redislock_doctor(c, &r) == REDISLOCK_OK, "doctor: %s", last_error());
  redislock_client_free(c);
  return r;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s SAFE_URL UNSAFE_URL DEAD_URL\n", argv[0]);
    return 2;
  }

  redislock_report *r = doctor(argv[1]);
  if (r != NULL) {
    CHECK(redislock_report_is_safe(r), "safe:\n%s", redislock_report_text(r));
    CHECK(redislock_report_count(r) >= 9, "%zu findings", redislock_report_count(r));
    const char *checks[] = {"server", "eviction", "scripting", "time", "pubsub",
                            "clients", "latency", "lock-cycle"};
    for (size_t i = 0; i < sizeof checks / sizeof *checks; i++) {
      const redislock_finding *f = find(r, checks[i]);
      CHECK(f != NULL && f->severity == REDISLOCK_SEVERITY_OK, "%s ok", checks[i]);
      CHECK(f != NULL && strcmp(f->fix, "") == 0, "%s has no fix", checks[i]);
    }
    const redislock_finding *p = find(r, "persistence");
    CHECK(p != NULL && p->severity == REDISLOCK_SEVERITY_WARNING, "persistence warns");
    CHECK(p != NULL && strstr(p->fix, "appendonly yes") != NULL, "with a fix");
    CHECK(p != NULL && strstr(p->server, "127.0.0.1:") == p->server, "server %s",
          p ? p->server : "");
    const char *text = redislock_report_text(r);
    CHECK(strstr(text, "verdict: safe for locks, 1 warning") != NULL, "text:\n%s", text);
    CHECK(redislock_report_finding(r, redislock_report_count(r)) == NULL, "out of range");
    redislock_report_free(r);
  }

  r = doctor(argv[2]);
  if (r != NULL) {
    CHECK(!redislock_report_is_safe(r), "unsafe:\n%s", redislock_report_text(r));
    const redislock_finding *e = find(r, "eviction");
    CHECK(e != NULL && e->severity == REDISLOCK_SEVERITY_UNSAFE, "eviction unsafe");
    CHECK(e != NULL && strstr(e->message, "allkeys-lru") != NULL, "names the policy");
    CHECK(strstr(redislock_report_text(r), "UNSAFE  eviction") != NULL, "in the text");
    redislock_report_free(r);
  }

  redislock_client *c = NULL;
  CHECK(redislock_client_open(argv[3], &c) == REDISLOCK_OK, "open: %s", last_error());
  redislock_report *none = NULL;
  CHECK(redislock_doctor(c, &none) == REDISLOCK_CONNECTION, "dead server: %s", last_error());
  CHECK(none == NULL, "nothing written on failure");
  CHECK(strstr(last_error(), "cannot reach Redis") != NULL, "%s", last_error());
  CHECK(redislock_doctor(c, NULL) == REDISLOCK_INVALID_ARGUMENT, "NULL out");
  CHECK(redislock_doctor(NULL, &none) == REDISLOCK_INVALID_ARGUMENT, "NULL client");
  redislock_client_free(c);

  CHECK(redislock_report_count(NULL) == 0, "NULL count");
  CHECK(redislock_report_finding(NULL, 0) == NULL, "NULL finding");
  CHECK(!redislock_report_is_safe(NULL), "NULL is not safe");
  CHECK(redislock_report_text(NULL) == NULL, "NULL text");
  redislock_report_free(NULL);

  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
