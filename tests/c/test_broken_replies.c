/*
 * A server that lies never talks the library into a grant (issue 51).
 *
 *   test_broken_replies KIND=PORT...
 *   test_broken_replies --table
 *
 * Each argument is a kind of broken reply and the port where
 * tests/fake/fake_redis.py --all serves it (tests/c_api.rs starts it, and
 * runs this program once per kind so that a crash is the crash of one kind;
 * --table prints the kinds of the table below, which it compares with the
 * server's). For every kind given, in a thread of its own with a 1 MB stack
 * (what a Ruby thread or a JVM thread has; glibc's default is 8 MB) and
 * with a client of its own (command_timeout=1s, connect_timeout=1s): a
 * try-acquire (wait 0), then a waiting acquire (wait 300 ms). Each must
 *
 *   1. not crash the program;
 *   2. never return a held lock (REDISLOCK_OK);
 *   3. fail with the expected status: REDISLOCK_CONNECTION for every kind
 *      but error_reply (REDISLOCK_SERVER), REDISLOCK_NOT_ACQUIRED only where
 *      the server's reply did say "held" (the table below);
 *   4. end within command_timeout + connect_timeout + wait + 1.5 s.
 *
 * And the kinds together grow the program's RSS by less than 64 MB. A kind
 * the table does not know fails.
 *
 * Prints one line per failed check and "N passed, N failed"; exits 1 when a
 * check failed.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define COMMAND_TIMEOUT_MS 1000
#define CONNECT_TIMEOUT_MS 1000
#define WAIT_MS 300
#define SLACK_MS 1500
#define RSS_GROWTH_KB (64 * 1024)
#ifndef THREAD_STACK
#define THREAD_STACK (1024 * 1024)
#endif

/* What a call may end in. */
enum {
  CONNECTION = 1,   /* REDISLOCK_CONNECTION */
  SERVER = 2,       /* REDISLOCK_SERVER */
  NOT_ACQUIRED = 4, /* REDISLOCK_NOT_ACQUIRED: "held" (try) or the wait ran out */
};

static const struct expected {
  const char *kind;
  int try_acquire; /* wait 0 */
  int acquire;     /* wait WAIT_MS */
} EXPECTED[] = {
    {"negative_bulk", CONNECTION, CONNECTION},
    {"negative_array", CONNECTION, CONNECTION},
    /* The first reply on a connection is a true "held"; the nil sent 5 ms
     * after it must never be read as the next command's reply. Found at once
     * (when both were read together) it is a protocol error. */
    {"reply_twice", NOT_ACQUIRED | CONNECTION, NOT_ACQUIRED | CONNECTION},
    /* A frame before any command is a protocol error; the replies after it
     * say "held". */
    {"unsolicited", CONNECTION, NOT_ACQUIRED | CONNECTION},
    {"dribble", CONNECTION, CONNECTION},
    {"silent", CONNECTION, CONNECTION},
    {"random_bytes", CONNECTION, CONNECTION},
    {"truncated", CONNECTION, CONNECTION},
    {"huge_bulk", CONNECTION, CONNECTION},
    {"huge_array", CONNECTION, CONNECTION},
    {"deep_nesting", CONNECTION, CONNECTION},
    {"resp3", CONNECTION, CONNECTION},
    {"int_overflow", CONNECTION, CONNECTION},
    {"int_for_array", CONNECTION, CONNECTION},
    {"array_for_int", CONNECTION, CONNECTION},
    {"wrong_string", CONNECTION, CONNECTION},
    {"trailing_garbage", CONNECTION, CONNECTION},
    {"error_reply", SERVER, SERVER},
    {"bulk_too_long", CONNECTION, CONNECTION},
    {"close_at_once", CONNECTION, CONNECTION},
    {"empty_array", CONNECTION, CONNECTION},
};
#define NKINDS (sizeof EXPECTED / sizeof EXPECTED[0])

struct call {
  redislock_status status;
  double elapsed_ms;
  char message[512];
};

struct run {
  const char *kind;
  int port;
  redislock_status open;
  char open_message[512];
  struct call calls[2]; /* try-acquire, waiting acquire */
};

static long rss_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  if (!f)
    return -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
      break;
  fclose(f);
  return kb;
}

static void copy_error(char *dst, size_t cap) {
  redislock_last_error(dst, cap); /* this thread's last failure */
}

static void *run_kind(void *arg) {
  struct run *r = arg;
  char url[256];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d/0?command_timeout=%dms&connect_timeout=%dms",
           r->port, COMMAND_TIMEOUT_MS, CONNECT_TIMEOUT_MS);
  redislock_client *client = NULL;
  r->open = redislock_client_open(url, &client);
  if (r->open != REDISLOCK_OK) {
    copy_error(r->open_message, sizeof r->open_message);
    return NULL;
  }
  for (int n = 0; n < 2; n++) {
    char name[96];
    snprintf(name, sizeof name, "k:%s:%d", r->kind, n);
    redislock_lock *lock = NULL;
    double t = now_ms();
    redislock_status s = redislock_acquire(client, KEY(name), 10000, n == 0 ? 0 : WAIT_MS, NULL, 0, &lock);
    r->calls[n].elapsed_ms = now_ms() - t;
    r->calls[n].status = s;
    if (s == REDISLOCK_OK)
      redislock_lock_free(lock); /* a grant: the checks report it */
    else
      copy_error(r->calls[n].message, sizeof r->calls[n].message);
    sleep_ms(50); /* a leftover frame is there when the next call is sent */
  }
  redislock_client_free(client);
  return NULL;
}

static int outcome_of(redislock_status s) {
  switch (s) {
  case REDISLOCK_CONNECTION:
    return CONNECTION;
  case REDISLOCK_SERVER:
    return SERVER;
  case REDISLOCK_NOT_ACQUIRED:
    return NOT_ACQUIRED;
  default:
    return 0;
  }
}

static const struct expected *expected_of(const char *kind) {
  for (size_t i = 0; i < NKINDS; i++)
    if (strcmp(EXPECTED[i].kind, kind) == 0)
      return &EXPECTED[i];
  return NULL;
}

int main(int argc, char **argv) {
  (void)last_error; /* check.h's, not thread-safe: copy_error is used instead */
  if (argc == 2 && strcmp(argv[1], "--table") == 0) {
    for (size_t k = 0; k < NKINDS; k++)
      printf("%s\n", EXPECTED[k].kind);
    return 0;
  }
  alarm(90); /* a watchdog: SIGALRM ends the program hung anywhere */
  int n = argc - 1;
  struct run *runs = calloc((size_t)(n > 0 ? n : 1), sizeof *runs);
  pthread_t *threads = calloc((size_t)(n > 0 ? n : 1), sizeof *threads);
  if (!runs || !threads)
    return 2;
  for (int i = 0; i < n; i++) {
    char *eq = strchr(argv[i + 1], '=');
    if (!eq) {
      fprintf(stderr, "usage: %s KIND=PORT...\n", argv[0]);
      return 2;
    }
    *eq = '\0';
    runs[i].kind = argv[i + 1];
    runs[i].port = atoi(eq + 1);
  }
  for (int i = 0; i < n; i++)
    CHECK(expected_of(runs[i].kind) != NULL, "the fake server's kind %s has no expected outcome here: add it",
          runs[i].kind);

  pthread_attr_t attr;
  pthread_attr_init(&attr);
  CHECK(pthread_attr_setstacksize(&attr, THREAD_STACK) == 0, "pthread_attr_setstacksize");
  long before = rss_kb();
  int started = 0;
  for (; started < n; started++) {
    int ok = pthread_create(&threads[started], &attr, run_kind, &runs[started]) == 0;
    CHECK(ok, "pthread_create");
    if (!ok)
      break;
  }
  for (int i = 0; i < started; i++)
    pthread_join(threads[i], NULL);
  pthread_attr_destroy(&attr);
  long grown = rss_kb() - before;

  for (int i = 0; i < started; i++) {
    struct run *r = &runs[i];
    const struct expected *e = expected_of(r->kind);
    if (!e)
      continue;
    CHECK(r->open == REDISLOCK_OK, "%s: redislock_client_open: %s", r->kind, r->open_message);
    if (r->open != REDISLOCK_OK)
      continue;
    for (int c = 0; c < 2; c++) {
      const struct call *call = &r->calls[c];
      const char *what = c == 0 ? "try-acquire" : "acquire(wait 300 ms)";
      int allowed = c == 0 ? e->try_acquire : e->acquire;
      double bound = COMMAND_TIMEOUT_MS + CONNECT_TIMEOUT_MS + (c == 0 ? 0 : WAIT_MS) + SLACK_MS;
      CHECK(call->status != REDISLOCK_OK, "%s %s: GRANTED a lock the server never gave", r->kind, what);
      CHECK(call->status == REDISLOCK_OK || (outcome_of(call->status) & allowed) != 0,
            "%s %s: %s: %s", r->kind, what, redislock_status_str(call->status), call->message);
      CHECK(call->elapsed_ms <= bound, "%s %s: took %.0f ms (bound %.0f ms)", r->kind, what, call->elapsed_ms,
            bound);
    }
  }
  CHECK(before > 0 && grown < RSS_GROWTH_KB, "RSS grew by %ld kB over the kinds run (bound %d kB)", grown,
        RSS_GROWTH_KB);

  free(runs);
  free(threads);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
