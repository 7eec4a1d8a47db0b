/*
 * Signals from C: a waiting redislock_acquire gets SIGUSR1 many times (a
 * handler installed with and without SA_RESTART) and still acquires.
 *
 *   test_signals URL
 *
 * With "release" (handler without SA_RESTART) or "release-restart" (with
 * it), a release held up by the server gets the signals instead: the
 * program takes the lock, prints "held", and when a line arrives on stdin
 * (the test has paused the server's writes) releases it while SIGUSR1
 * arrives every 20 ms.
 *
 *   test_signals URL release|release-restart
 *
 * With "wait", it waits up to 30 s for the lock "stopped" (held by the
 * test, which stops and continues this process meanwhile) and releases it.
 *
 *   test_signals URL wait
 *
 * Prints "N passed, N failed"; exits 1 when a check failed.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check.h"

static volatile sig_atomic_t signals_seen;

static void on_signal(int sig) {
  (void)sig;
  signals_seen++;
}

struct waiter {
  redislock_client *client;
  redislock_status status;
  char error[512];
};

static void *wait_for_lock(void *arg) {
  struct waiter *w = arg;
  redislock_lock *l = NULL;
  w->status = redislock_acquire(w->client, KEY("sig"), 10000, 20000, NULL, 0, &l);
  redislock_last_error(w->error, sizeof w->error);
  if (w->status == REDISLOCK_OK) {
    redislock_release(l);
  }
  return NULL;
}

struct releaser {
  redislock_lock *lock;
  redislock_status status;
  char error[512];
  volatile int done;
};

static void *release_lock(void *arg) {
  struct releaser *r = arg;
  r->status = redislock_release(r->lock);
  redislock_last_error(r->error, sizeof r->error);
  r->done = 1;
  return NULL;
}

static void handle(int restart) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = restart ? SA_RESTART : 0;
  sigemptyset(&sa.sa_mask);
  CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
  signals_seen = 0;
}

/* See the comment at the top. */
static int release_under_signals(redislock_client *c, int restart) {
  handle(restart);
  redislock_lock *l = NULL;
  CHECK(redislock_acquire(c, KEY("sig-release"), 10000, 0, NULL, 0, &l) == REDISLOCK_OK, "acquire: %s",
        last_error());
  printf("held\n");
  fflush(stdout);
  char line[16];
  CHECK(fgets(line, sizeof line, stdin) != NULL, "no go-ahead on stdin");
  struct releaser r = {l, REDISLOCK_INTERNAL, "", 0};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, release_lock, &r) == 0, "pthread_create");
  for (int i = 0; i < 500 && !r.done; i++) {
    pthread_kill(t, SIGUSR1);
    sleep_ms(20);
  }
  pthread_join(t, NULL);
  CHECK(r.status == REDISLOCK_OK, "the release got %s: %s", redislock_status_str(r.status), r.error);
  CHECK(signals_seen > 5, "only %d signals arrived", (int)signals_seen);
  redislock_client_free(c);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc != 2 && argc != 3) {
    fprintf(stderr, "usage: %s URL\n", argv[0]);
    return 2;
  }
  redislock_client *c = NULL;
  CHECK(redislock_client_open(argv[1], &c) == REDISLOCK_OK, "open: %s", last_error());
  if (argc == 3 && strcmp(argv[2], "wait") == 0) {
    redislock_lock *l = NULL;
    redislock_status st = redislock_acquire(c, KEY("stopped"), 10000, 30000, NULL, 0, &l);
    CHECK(st == REDISLOCK_OK, "the stopped waiter: %s", last_error());
    if (st == REDISLOCK_OK) {
      CHECK(redislock_release(l) == REDISLOCK_OK, "release: %s", last_error());
    }
    redislock_client_free(c);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
  }
  if (argc == 3) {
    return release_under_signals(c, strcmp(argv[2], "release-restart") == 0);
  }
  for (int restart = 0; restart <= 1; restart++) {
    handle(restart);

    redislock_lock *holder = NULL;
    CHECK(redislock_acquire(c, KEY("sig"), 10000, 0, NULL, 0, &holder) == REDISLOCK_OK, "holder: %s",
          last_error());
    struct waiter w = {c, REDISLOCK_INTERNAL, ""};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, wait_for_lock, &w) == 0, "pthread_create");
    for (int i = 0; i < 25; i++) {
      pthread_kill(t, SIGUSR1);
      sleep_ms(20);
    }
    CHECK(redislock_release(holder) == REDISLOCK_OK, "release: %s", last_error());
    pthread_join(t, NULL);
    CHECK(w.status == REDISLOCK_OK, "SA_RESTART %d: the waiter got %s: %s", restart,
          redislock_status_str(w.status), w.error);
    CHECK(signals_seen > 5, "only %d signals arrived", (int)signals_seen);
  }
  redislock_client_free(c);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
