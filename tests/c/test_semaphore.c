/*
 * Semaphores and read-write locks from C:
 *
 *   test_semaphore URL
 *
 * Permits up to the limit and no more, bad arguments refused, readers
 * together and a writer alone, threads of one client never holding more
 * than the limit at once, and a holder killed with SIGKILL giving its
 * permits back when its lease ends. Prints "N passed, N failed"; exits 1
 * when a check failed.
 */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static redislock_client *client;
static atomic_int inside, most;

static void *worker(void *arg) {
  (void)arg;
  for (int i = 0; i < 30; i++) {
    redislock_lock *l = NULL;
    redislock_status s =
        redislock_acquire_semaphore(client, KEY("c:threads"), 2, 1, 30000, 60000, &l);
    CHECK(s == REDISLOCK_OK, "acquire in a thread: %s", last_error());
    if (s != REDISLOCK_OK) {
      return NULL;
    }
    int n = atomic_fetch_add(&inside, 1) + 1;
    int m = atomic_load(&most);
    while (n > m && !atomic_compare_exchange_weak(&most, &m, n)) {
    }
    sleep_ms(1);
    atomic_fetch_sub(&inside, 1);
    CHECK(redislock_release(l) == REDISLOCK_OK, "release in a thread: %s", last_error());
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s URL\n", argv[0]);
    return 2;
  }
  CHECK(redislock_client_open(argv[1], &client) == REDISLOCK_OK, "open: %s", last_error());
  if (client == NULL) {
    printf("%d passed, %d failed\n", passed, failed);
    return 1;
  }

  /* Two permits of two, then none. */
  redislock_lock *a = NULL, *b = NULL, *c = NULL;
  CHECK(redislock_acquire_semaphore(client, KEY("c:sem"), 2, 1, 10000, 0, &a) == REDISLOCK_OK,
        "first permit: %s", last_error());
  CHECK(redislock_acquire_semaphore(client, KEY("c:sem"), 2, 1, 10000, 0, &b) == REDISLOCK_OK,
        "second permit: %s", last_error());
  CHECK(redislock_acquire_semaphore(client, KEY("c:sem"), 2, 1, 10000, 0, &c) ==
            REDISLOCK_NOT_ACQUIRED,
        "a third permit of two");
  CHECK(c == NULL, "no handle when not acquired");
  uint64_t fa = redislock_lock_fence(a), fb = redislock_lock_fence(b);
  CHECK(fa > 0 && fb > fa, "fences %" PRIu64 " then %" PRIu64, fa, fb);
  bool owns = false;
  CHECK(redislock_lock_owned(a, &owns) == REDISLOCK_OK && owns, "a permit held: %s", last_error());
  CHECK(redislock_lock_owned(NULL, &owns) == REDISLOCK_INVALID_ARGUMENT, "owned of NULL");
  /* The statistics count them by kind, and the permits held. */
  struct redislock_stats st;
  memset(&st, 0, sizeof st);
  st.size = sizeof st;
  CHECK(redislock_client_stats(client, &st) == REDISLOCK_OK, "stats: %s", last_error());
  CHECK(st.size == sizeof st, "stats filled %u bytes", (unsigned)st.size);
  CHECK(st.acquired_semaphores == 2 && st.acquired_locks == 0 && st.permits_held_now == 2 &&
            st.held_now == 2,
        "by kind: %" PRIu64 " semaphores, %" PRIu64 " locks, %" PRIu64 " permits held",
        st.acquired_semaphores, st.acquired_locks, st.permits_held_now);
  /* The plain lock of the same name is another thing. */
  redislock_lock *plain = NULL;
  CHECK(redislock_acquire(client, KEY("c:sem"), 10000, 0, NULL, 0, &plain) == REDISLOCK_OK,
        "the lock of the same name: %s", last_error());
  CHECK(redislock_release(plain) == REDISLOCK_OK, "release the lock: %s", last_error());
  CHECK(redislock_release(a) == REDISLOCK_OK, "release a permit: %s", last_error());
  CHECK(redislock_acquire_semaphore(client, KEY("c:sem"), 2, 1, 10000, 0, &c) == REDISLOCK_OK,
        "a freed permit: %s", last_error());
  CHECK(redislock_release(b) == REDISLOCK_OK, "release: %s", last_error());
  CHECK(redislock_release(c) == REDISLOCK_OK, "release: %s", last_error());

  /* Bad arguments, before any I/O. */
  redislock_lock *none = NULL;
  CHECK(redislock_acquire_semaphore(client, KEY("c:bad"), 0, 1, 10000, 0, &none) ==
            REDISLOCK_INVALID_ARGUMENT,
        "limit 0");
  CHECK(redislock_acquire_semaphore(client, KEY("c:bad"), 2, 3, 10000, 0, &none) ==
            REDISLOCK_INVALID_ARGUMENT,
        "more permits than the limit");
  CHECK(redislock_acquire_semaphore(client, KEY("c:bad"), 2, 1, 10000, 0, NULL) ==
            REDISLOCK_INVALID_ARGUMENT,
        "out NULL");
  CHECK(redislock_acquire_read(client, NULL, 0, 10000, 0, &none) == REDISLOCK_INVALID_ARGUMENT,
        "key NULL");
  CHECK(redislock_acquire_write(client, KEY("c:bad"), 0, 0, &none) == REDISLOCK_INVALID_ARGUMENT,
        "TTL 0");
  CHECK(none == NULL, "no handle after bad arguments");

  /* Readers together, a writer alone. */
  redislock_lock *r1 = NULL, *r2 = NULL, *w = NULL;
  CHECK(redislock_acquire_read(client, KEY("c:rw"), 10000, 0, &r1) == REDISLOCK_OK,
        "reader: %s", last_error());
  CHECK(redislock_acquire_read(client, KEY("c:rw"), 10000, 0, &r2) == REDISLOCK_OK,
        "second reader: %s", last_error());
  CHECK(redislock_acquire_write(client, KEY("c:rw"), 10000, 0, &w) == REDISLOCK_NOT_ACQUIRED,
        "a writer beside readers");
  CHECK(redislock_release(r1) == REDISLOCK_OK, "release reader: %s", last_error());
  CHECK(redislock_release(r2) == REDISLOCK_OK, "release reader: %s", last_error());
  CHECK(redislock_acquire_write(client, KEY("c:rw"), 10000, 0, &w) == REDISLOCK_OK,
        "writer: %s", last_error());
  CHECK(redislock_acquire_read(client, KEY("c:rw"), 10000, 0, &r1) == REDISLOCK_NOT_ACQUIRED,
        "a reader beside the writer");
  CHECK(redislock_extend(w, 20000) == REDISLOCK_OK, "extend the writer: %s", last_error());
  CHECK(redislock_release(w) == REDISLOCK_OK, "release writer: %s", last_error());

  /* Threads of one client: never more than the limit at once. */
  pthread_t t[6];
  for (int i = 0; i < 6; i++) {
    pthread_create(&t[i], NULL, worker, NULL);
  }
  for (int i = 0; i < 6; i++) {
    pthread_join(t[i], NULL);
  }
  CHECK(atomic_load(&most) <= 2, "%d permits of 2 held at once", atomic_load(&most));
  CHECK(atomic_load(&most) == 2, "the permits were never shared (%d)", atomic_load(&most));
  memset(&st, 0, sizeof st);
  st.size = sizeof st;
  CHECK(redislock_client_stats(client, &st) == REDISLOCK_OK, "stats: %s", last_error());
  CHECK(st.permits_held_now == 0 && st.held_now == 0, "%" PRIu64 " permits still counted",
        st.permits_held_now);
  CHECK(st.acquired_reads == 2 && st.acquired_writes == 1 && st.acquired_locks == 1,
        "reads %" PRIu64 ", writes %" PRIu64 ", locks %" PRIu64, st.acquired_reads,
        st.acquired_writes, st.acquired_locks);

  /* A holder killed with SIGKILL: its 2 permits of 3 come back when its
   * 2 s lease ends, and a waiter for 2 takes them by its own retry (nobody
   * released them, so no hand-off). */
  int ready[2];
  CHECK(pipe(ready) == 0, "pipe");
  pid_t child = fork();
  if (child == 0) {
    redislock_client *own = NULL;
    redislock_lock *held = NULL;
    if (redislock_client_open(argv[1], &own) != REDISLOCK_OK ||
        redislock_acquire_semaphore(own, KEY("c:killed"), 3, 2, 2000, 0, &held) != REDISLOCK_OK) {
      _exit(3);
    }
    if (write(ready[1], "h", 1) != 1) {
      _exit(4);
    }
    for (;;) {
      pause();
    }
  }
  CHECK(child > 0, "fork");
  char byte = 0;
  CHECK(read(ready[0], &byte, 1) == 1 && byte == 'h', "the child never held its permits");
  CHECK(kill(child, SIGKILL) == 0, "kill");
  int wstatus = 0;
  CHECK(waitpid(child, &wstatus, 0) == child && WIFSIGNALED(wstatus), "the child died of SIGKILL");
  memset(&st, 0, sizeof st);
  st.size = sizeof st;
  CHECK(redislock_client_stats(client, &st) == REDISLOCK_OK, "stats: %s", last_error());
  uint64_t after_wait = st.acquired_after_wait, handed = st.acquired_handed_over;
  redislock_lock *back = NULL;
  CHECK(redislock_acquire_semaphore(client, KEY("c:killed"), 3, 2, 5000, 30000, &back) ==
            REDISLOCK_OK,
        "the dead holder's permits never came back: %s", last_error());
  memset(&st, 0, sizeof st);
  st.size = sizeof st;
  CHECK(redislock_client_stats(client, &st) == REDISLOCK_OK, "stats: %s", last_error());
  CHECK(st.acquired_after_wait == after_wait + 1 && st.acquired_handed_over == handed,
        "taken by a retry, not handed over (%" PRIu64 " after a wait, %" PRIu64 " handed)",
        st.acquired_after_wait - after_wait, st.acquired_handed_over - handed);
  owns = true;
  CHECK(redislock_lock_owned(back, &owns) == REDISLOCK_OK && owns, "owned: %s", last_error());
  CHECK(back != NULL && redislock_release(back) == REDISLOCK_OK, "release: %s", last_error());
  close(ready[0]);
  close(ready[1]);

  redislock_client_free(client);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
