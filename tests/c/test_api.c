/*
 * The C API against a live redis-server, as a C program would use it.
 *
 *   test_api REDIS_URL DEAD_URL
 *
 * REDIS_URL points at a throwaway server (tests/c_api.rs starts one);
 * DEAD_URL at a port where nothing listens. Prints one line per failed
 * check and "N passed, N failed" at the end; exits 1 when a check failed.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static const char *url;
static const char *dead_url;

static int held(redislock_client *c, const char *key) {
  redislock_lock *probe = NULL;
  redislock_status s = redislock_acquire(c, KEY(key), 1000, 0, NULL, 0, &probe);
  if (s == REDISLOCK_OK) {
    redislock_release(probe);
    return 0;
  }
  return s == REDISLOCK_NOT_ACQUIRED;
}

static void test_null_everywhere(redislock_client *c) {
  redislock_client *cout = NULL;
  redislock_lock *lout = NULL;
  const uint8_t k[] = "k";
  CHECK(redislock_client_open(NULL, &cout) == REDISLOCK_INVALID_ARGUMENT, "open url NULL");
  CHECK(redislock_client_open(url, NULL) == REDISLOCK_INVALID_ARGUMENT, "open out NULL");
  CHECK(cout == NULL, "out written on failure");
  CHECK(redislock_client_open_redlock(NULL, 1, &cout) == REDISLOCK_INVALID_ARGUMENT, "redlock urls NULL");
  CHECK(redislock_client_open_redlock(&url, 1, NULL) == REDISLOCK_INVALID_ARGUMENT, "redlock out NULL");
  {
    const char *urls[1] = {NULL};
    CHECK(redislock_client_open_redlock(urls, 1, &cout) == REDISLOCK_INVALID_ARGUMENT, "redlock urls[0] NULL");
    CHECK(redislock_client_open_redlock(&url, 0, &cout) == REDISLOCK_INVALID_ARGUMENT, "redlock n 0");
  }
  CHECK(redislock_acquire(NULL, k, 1, 1000, 0, NULL, 0, &lout) == REDISLOCK_INVALID_ARGUMENT, "acquire client NULL");
  CHECK(redislock_acquire(c, NULL, 1, 1000, 0, NULL, 0, &lout) == REDISLOCK_INVALID_ARGUMENT, "acquire key NULL");
  CHECK(redislock_acquire(c, NULL, 0, 1000, 0, NULL, 0, &lout) == REDISLOCK_INVALID_ARGUMENT, "acquire key NULL, 0");
  CHECK(redislock_acquire(c, k, 1, 1000, 0, NULL, 0, NULL) == REDISLOCK_INVALID_ARGUMENT, "acquire out NULL");
  CHECK(lout == NULL, "out written on failure");
  CHECK(redislock_release(NULL) == REDISLOCK_INVALID_ARGUMENT, "release NULL");
  CHECK(redislock_extend(NULL, 1000) == REDISLOCK_INVALID_ARGUMENT, "extend NULL");
  CHECK(redislock_lock_auto_renew(NULL) == REDISLOCK_INVALID_ARGUMENT, "auto_renew NULL");
  CHECK(redislock_lock_is_lost(NULL) == false, "is_lost NULL");
  CHECK(redislock_lock_token(NULL, NULL, 0) == 0, "token NULL");
  CHECK(redislock_lock_fence(NULL) == 0, "fence NULL");
  CHECK(redislock_release_token(NULL, k, 1, k, 1) == REDISLOCK_INVALID_ARGUMENT, "release_token client NULL");
  CHECK(redislock_release_token(c, NULL, 1, k, 1) == REDISLOCK_INVALID_ARGUMENT, "release_token key NULL");
  CHECK(redislock_release_token(c, k, 1, NULL, 1) == REDISLOCK_INVALID_ARGUMENT, "release_token token NULL");
  CHECK(redislock_release_token(c, k, 1, NULL, 0) == REDISLOCK_INVALID_ARGUMENT, "release_token token NULL, 0");
  CHECK(redislock_extend_token(NULL, k, 1, k, 1, 1000) == REDISLOCK_INVALID_ARGUMENT, "extend_token client NULL");
  CHECK(redislock_extend_token(c, NULL, 1, k, 1, 1000) == REDISLOCK_INVALID_ARGUMENT, "extend_token key NULL");
  CHECK(redislock_extend_token(c, k, 1, NULL, 0, 1000) == REDISLOCK_INVALID_ARGUMENT, "extend_token token NULL");
  {
    bool owned = true;
    CHECK(redislock_is_owned_by(NULL, k, 1, k, 1, &owned) == REDISLOCK_INVALID_ARGUMENT, "is_owned_by client NULL");
    CHECK(redislock_is_owned_by(c, k, 1, k, 1, NULL) == REDISLOCK_INVALID_ARGUMENT, "is_owned_by out NULL");
    CHECK(redislock_is_owned_by(c, k, 1, NULL, 0, &owned) == REDISLOCK_INVALID_ARGUMENT, "is_owned_by token NULL");
    CHECK(owned == true, "out written on failure");
  }
  CHECK(redislock_client_open_shared(NULL, &cout) == REDISLOCK_INVALID_ARGUMENT, "open_shared url NULL");
  CHECK(redislock_client_open_shared(url, NULL) == REDISLOCK_INVALID_ARGUMENT, "open_shared out NULL");
  CHECK(redislock_client_open_redlock_shared(NULL, 1, &cout) == REDISLOCK_INVALID_ARGUMENT, "redlock_shared NULL");
  CHECK(redislock_client_open_redlock_shared(&url, 0, &cout) == REDISLOCK_INVALID_ARGUMENT, "redlock_shared n 0");
  CHECK(cout == NULL, "out written on failure");
  CHECK(redislock_first_time(NULL, 3) == false, "first_time NULL");
  CHECK(redislock_last_error(NULL, 0) > 0, "last_error NULL buffer gives the length");
  CHECK(redislock_last_error(NULL, 10) > 0, "last_error NULL buffer with a capacity");
  CHECK(redislock_status_str(REDISLOCK_OK) != NULL, "status_str");
  CHECK(redislock_status_str(-1) != NULL && strstr(redislock_status_str(-1), "unknown"), "status_str unknown");
  CHECK(redislock_status_str(1000) != NULL, "status_str unknown");
  CHECK(strstr(redislock_status_str(REDISLOCK_UNCONFIRMED), "UNCONFIRMED") != NULL, "status_str unconfirmed");
  CHECK(strlen(redislock_version()) > 0, "version");
  redislock_client_free(NULL);
  redislock_lock_free(NULL);
  redislock_lock_forget(NULL);
}

static void expect_invalid(redislock_status s, const char *what) {
  CHECK(s == REDISLOCK_INVALID_ARGUMENT, "%s: %s", what, redislock_status_str(s));
  CHECK(strlen(last_error()) > 0, "%s: empty last error", what);
}

static void test_bad_input(redislock_client *c) {
  redislock_client *cout = NULL;
  redislock_lock *lout = NULL;
  const uint8_t k[] = "k";
  /* Before any I/O: this client's server is dead. */
  redislock_client *dead = NULL;
  CHECK(redislock_client_open(dead_url, &dead) == REDISLOCK_OK, "open dead url");
  expect_invalid(redislock_acquire(dead, k, 0, 1000, 0, NULL, 0, &lout), "zero-length key");
  expect_invalid(redislock_acquire(dead, k, 1, 0, 0, NULL, 0, &lout), "ttl 0");
  expect_invalid(redislock_acquire(dead, k, 1, UINT64_MAX, 0, NULL, 0, &lout), "ttl UINT64_MAX");
  expect_invalid(redislock_acquire(dead, k, 1, 1000, 0, NULL, 5, &lout), "token NULL with a length");
  expect_invalid(redislock_acquire(dead, k, 1, 1000, 0, k, 0, &lout), "empty token");
  expect_invalid(redislock_acquire(dead, k, SIZE_MAX, 1000, 0, NULL, 0, &lout), "absurd key length");
  CHECK(lout == NULL, "out written on failure");
  expect_invalid(redislock_client_open("not a url", &cout), "malformed URL");
  expect_invalid(redislock_client_open("", &cout), "empty URL");
  expect_invalid(redislock_client_open("http://127.0.0.1:1", &cout), "wrong scheme");
  expect_invalid(redislock_client_open("redis://127.0.0.1:1\xff\xfe", &cout), "non-UTF-8 URL");
  CHECK(cout == NULL, "out written on failure");
  {
    const char *two[2] = {url, "redis://bad host"};
    expect_invalid(redislock_client_open_redlock(two, 2, &cout), "redlock with one bad URL");
    CHECK(strstr(last_error(), "urls[1]") != NULL || strstr(last_error(), "URL") != NULL, "%s", last_error());
  }
  redislock_client_free(dead);
  (void)c;
}

static void test_cycle(redislock_client *c) {
  redislock_lock *a = NULL, *b = NULL;
  CHECK(redislock_acquire(c, KEY("c:cycle"), 10000, 0, NULL, 0, &a) == REDISLOCK_OK, "acquire: %s", last_error());
  if (!a)
    return;
  uint8_t tok[64];
  size_t n = redislock_lock_token(a, tok, sizeof tok);
  CHECK(n == 32, "random token length %zu", n);
  CHECK(redislock_lock_token(a, NULL, 0) == 32, "token length query");
  uint64_t f1 = redislock_lock_fence(a);
  CHECK(f1 >= 1, "fence %llu", (unsigned long long)f1);
  CHECK(redislock_extend(a, 20000) == REDISLOCK_OK, "extend: %s", last_error());
  CHECK(held(c, "c:cycle"), "held after extend");
  CHECK(redislock_release(a) == REDISLOCK_OK, "release: %s", last_error());
  CHECK(!held(c, "c:cycle"), "free after release");
  CHECK(redislock_acquire(c, KEY("c:cycle"), 10000, 0, NULL, 0, &b) == REDISLOCK_OK, "re-acquire");
  CHECK(redislock_lock_fence(b) > f1, "fence increases");
  redislock_lock_free(b); /* releases */
  CHECK(!held(c, "c:cycle"), "free after lock_free");
}

static void test_tokens(redislock_client *c) {
  const uint8_t token[] = {'r', 'e', 'q', 0, 0xff, '5', '9'};
  const uint8_t key[] = {'c', ':', 0, 0xfe, 'k'};
  redislock_lock *l = NULL;
  CHECK(redislock_acquire(c, key, sizeof key, 10000, 0, token, sizeof token, &l) == REDISLOCK_OK, "acquire: %s",
        last_error());
  if (!l)
    return;
  uint8_t out[16] = {0};
  size_t n = redislock_lock_token(l, out, sizeof out);
  CHECK(n == sizeof token && memcmp(out, token, n) == 0, "token with NUL bytes round-trips");
  uint8_t small[3];
  CHECK(redislock_lock_token(l, small, sizeof small) == sizeof token && memcmp(small, token, 3) == 0,
        "truncated token copy");
  const uint8_t other[] = {'r', 'e', 'q', 0, 0xff, '5', '8'};
  CHECK(redislock_release_token(c, key, sizeof key, other, sizeof other) == REDISLOCK_NOT_OWNER,
        "release by another token");
  CHECK(redislock_release_token(c, key, sizeof key, token, sizeof token) == REDISLOCK_OK, "release by token: %s",
        last_error());
  CHECK(redislock_release_token(c, key, sizeof key, token, sizeof token) == REDISLOCK_NOT_OWNER,
        "second release by token");
  CHECK(redislock_release(l) == REDISLOCK_NOT_OWNER, "handle release after release by token");

  /* Forget: the handle goes, the lock stays until released by token. */
  CHECK(redislock_acquire(c, KEY("c:forget"), 10000, 0, (const uint8_t *)"id-7", 4, &l) == REDISLOCK_OK, "acquire");
  redislock_lock_forget(l);
  CHECK(held(c, "c:forget"), "a forgotten lock stays held");
  CHECK(redislock_release_token(c, KEY("c:forget"), (const uint8_t *)"id-7", 4) == REDISLOCK_OK, "release by token");
  CHECK(!held(c, "c:forget"), "released by token");

  /* No handle at all: out NULL with a token (the request-id pattern). */
  CHECK(redislock_acquire(c, KEY("c:nohandle"), 10000, 0, (const uint8_t *)"id-8", 4, NULL) == REDISLOCK_OK,
        "acquire without a handle: %s", last_error());
  CHECK(held(c, "c:nohandle"), "held without a handle");
  CHECK(redislock_acquire(c, KEY("c:nohandle"), 10000, 0, (const uint8_t *)"id-9", 4, NULL) == REDISLOCK_NOT_ACQUIRED,
        "a second owner without a handle is refused");
  CHECK(redislock_release_token(c, KEY("c:nohandle"), (const uint8_t *)"id-9", 4) == REDISLOCK_NOT_OWNER,
        "the refused token owns nothing");
  CHECK(redislock_release_token(c, KEY("c:nohandle"), (const uint8_t *)"id-8", 4) == REDISLOCK_OK,
        "release without a handle: %s", last_error());
  CHECK(!held(c, "c:nohandle"), "released without a handle");
  CHECK(redislock_acquire(c, KEY("c:nohandle"), 10000, 0, NULL, 0, NULL) == REDISLOCK_INVALID_ARGUMENT,
        "out NULL needs a token");
  CHECK(strstr(last_error(), "token") != NULL, "says why: %s", last_error());
  CHECK(!held(c, "c:nohandle"), "nothing taken when refused");
}

/* Extend and ownership by token, without a handle. */
static void test_by_token(redislock_client *c) {
  redislock_lock *l = NULL;
  bool owned = false;
  const uint8_t tok[] = {'j', 'o', 'b', 0, 0xfe};
  const uint8_t other[] = "other";
  /* 2 s: the calls before the extend must not outlast it, also under
     valgrind on a busy machine. */
  CHECK(redislock_acquire(c, KEY("c:bytoken"), 2000, 0, tok, sizeof tok, &l) == REDISLOCK_OK, "acquire");
  redislock_lock_forget(l);
  CHECK(redislock_is_owned_by(c, KEY("c:bytoken"), tok, sizeof tok, &owned) == REDISLOCK_OK && owned, "owned");
  CHECK(redislock_is_owned_by(c, KEY("c:bytoken"), other, 5, &owned) == REDISLOCK_OK && !owned, "not by another");
  CHECK(redislock_extend_token(c, KEY("c:bytoken"), other, 5, 10000) == REDISLOCK_NOT_OWNER, "extend by another");
  CHECK(redislock_extend_token(c, KEY("c:bytoken"), tok, sizeof tok, 10000) == REDISLOCK_OK, "extend: %s",
        last_error());
  sleep_ms(2200);
  CHECK(held(c, "c:bytoken"), "extended past its first TTL of 2 s");
  CHECK(redislock_release_token(c, KEY("c:bytoken"), tok, sizeof tok) == REDISLOCK_OK, "release by token");
  CHECK(redislock_extend_token(c, KEY("c:bytoken"), tok, sizeof tok, 10000) == REDISLOCK_NOT_OWNER,
        "extend after release");
  CHECK(!held(c, "c:bytoken"), "an extend after release does not re-create the lock");
  CHECK(redislock_is_owned_by(c, KEY("c:bytoken"), tok, sizeof tok, &owned) == REDISLOCK_OK && !owned,
        "not owned after release");
}

/* The operator's unlock: whoever holds it, the lock goes; NULLs refused. */
static void test_force_release(redislock_client *c) {
  redislock_lock *l = NULL;
  bool removed = true;
  CHECK(redislock_force_release(NULL, KEY("c:force"), &removed) == REDISLOCK_INVALID_ARGUMENT, "force client NULL");
  CHECK(redislock_force_release(c, NULL, 1, &removed) == REDISLOCK_INVALID_ARGUMENT, "force key NULL");
  CHECK(redislock_force_release(c, KEY(""), &removed) == REDISLOCK_INVALID_ARGUMENT, "force empty key");
  CHECK(redislock_force_release(c, KEY("c:force"), &removed) == REDISLOCK_OK && !removed, "nothing held: %s",
        last_error());
  CHECK(redislock_acquire(c, KEY("c:force"), 60000, 0, NULL, 0, &l) == REDISLOCK_OK, "acquire");
  CHECK(redislock_force_release(c, KEY("c:force"), &removed) == REDISLOCK_OK && removed, "removed: %s",
        last_error());
  CHECK(!held(c, "c:force"), "the lock is gone");
  CHECK(redislock_release(l) == REDISLOCK_NOT_OWNER, "the broken holder's release");
  CHECK(redislock_acquire(c, KEY("c:force"), 60000, 0, NULL, 0, &l) == REDISLOCK_OK, "acquire again");
  CHECK(redislock_force_release(c, KEY("c:force"), NULL) == REDISLOCK_OK, "removed, not asked");
  redislock_lock_free(l);
  char addr[256];
  size_t n = redislock_client_addr(c, addr, sizeof addr - 1);
  CHECK(n > 0 && n < sizeof addr, "client_addr length %zu", n);
  addr[n < sizeof addr ? n : 0] = 0;
  CHECK(strstr(url, addr) != NULL, "client_addr %s is in %s", addr, url);
  CHECK(redislock_client_addr(NULL, addr, sizeof addr) == 0, "client_addr NULL");
  CHECK(redislock_client_addr(c, NULL, 0) == n, "client_addr size query");
}

/* Shared clients: one per URL in a process, surviving the free of a handle. */
static void test_shared(void) {
  redislock_client *a = NULL, *b = NULL;
  redislock_lock *l = NULL;
  CHECK(redislock_client_open_shared(url, &a) == REDISLOCK_OK, "open_shared");
  CHECK(redislock_client_open_shared(url, &b) == REDISLOCK_OK, "open_shared again");
  CHECK(a != NULL && b != NULL && a != b, "two handles");
  CHECK(redislock_acquire(a, KEY("c:shared"), 10000, 0, NULL, 0, &l) == REDISLOCK_OK, "acquire through a");
  redislock_client_free(a);
  CHECK(held(b, "c:shared"), "b sees the lock taken through a");
  CHECK(redislock_release(l) == REDISLOCK_OK, "a lock outlives the free of its shared handle");
  CHECK(redislock_client_open_shared("redis://", &a) == REDISLOCK_INVALID_ARGUMENT, "bad URL");
  redislock_client_free(b);
  CHECK(redislock_client_open_shared(url, &b) == REDISLOCK_OK, "open_shared after every handle was freed");
  CHECK(!held(b, "c:shared"), "and it works");
  redislock_client_free(b);
  {
    const char *urls[1] = {url};
    CHECK(redislock_client_open_redlock_shared(urls, 1, &a) == REDISLOCK_OK, "redlock_shared");
    CHECK(!held(a, "c:shared"), "works");
    redislock_client_free(a);
  }
  CHECK(redislock_first_time((const uint8_t *)"c-tag", 5), "first time");
  CHECK(!redislock_first_time((const uint8_t *)"c-tag", 5), "second time");
  CHECK(redislock_first_time((const uint8_t *)"c-tag2", 6), "another tag");
}

static void test_expiry_and_waits(redislock_client *c) {
  redislock_lock *old = NULL, *cur = NULL, *l = NULL;
  CHECK(redislock_acquire(c, KEY("c:exp"), 100, 0, NULL, 0, &old) == REDISLOCK_OK, "acquire");
  sleep_ms(200);
  CHECK(redislock_acquire(c, KEY("c:exp"), 10000, 0, NULL, 0, &cur) == REDISLOCK_OK, "acquire after expiry");
  CHECK(redislock_extend(old, 10000) == REDISLOCK_NOT_OWNER, "extend after expiry");
  CHECK(redislock_lock_is_lost(old), "lost after a failed extend");
  CHECK(redislock_release(old) == REDISLOCK_NOT_OWNER, "release after expiry");
  CHECK(strstr(last_error(), "c:exp") != NULL, "the message names the lock: %s", last_error());
  CHECK(held(c, "c:exp"), "the new holder is spared");

  /* The holder has 10 s: bounds far below that tell "at once" and "at the
   * deadline" from "when the holder's TTL ran out", whatever pauses the
   * machine takes meanwhile. */
  double t = now_ms();
  CHECK(redislock_acquire(c, KEY("c:exp"), 1000, 0, NULL, 0, &l) == REDISLOCK_NOT_ACQUIRED, "try once");
  double took = now_ms() - t;
  CHECK(took < 5000, "try once took %.0f ms", took);
  t = now_ms();
  CHECK(redislock_acquire(c, KEY("c:exp"), 1000, 400, NULL, 0, &l) == REDISLOCK_NOT_ACQUIRED, "400 ms deadline");
  took = now_ms() - t;
  CHECK(took >= 399 && took < 5000, "400 ms deadline took %.0f ms", took);
  CHECK(l == NULL, "out written on failure");
  CHECK(redislock_release(cur) == REDISLOCK_OK, "release");
}

/* Fences: drawn in the acquire (fenced), or once on the first request; by
 * token too; a holder that lost its lock before asking gets none. */
static void test_fences(redislock_client *c) {
  redislock_lock *f = NULL, *p = NULL;
  CHECK(redislock_acquire_fenced(c, KEY("c:fence"), 10000, 0, NULL, 0, &f) == REDISLOCK_OK, "fenced: %s",
        last_error());
  if (!f)
    return;
  uint64_t f1 = redislock_lock_fence(f), again = 0;
  CHECK(f1 >= 1, "fenced fence %llu", (unsigned long long)f1);
  CHECK(redislock_lock_draw_fence(f, &again) == REDISLOCK_OK && again == f1, "the same number");
  uint8_t tok[64];
  size_t n = redislock_lock_token(f, tok, sizeof tok);
  uint64_t by_token = 0;
  CHECK(redislock_release(f) == REDISLOCK_OK, "release");
  CHECK(redislock_fence_token(c, KEY("c:fence"), tok, n, &by_token) == REDISLOCK_NOT_OWNER && by_token == 0,
        "no fence by token once released");
  CHECK(redislock_acquire(c, KEY("c:fence"), 10000, 0, NULL, 0, &p) == REDISLOCK_OK, "plain");
  uint64_t f2 = 0;
  CHECK(redislock_lock_draw_fence(p, &f2) == REDISLOCK_OK && f2 > f1, "drawn when asked: %llu after %llu",
        (unsigned long long)f2, (unsigned long long)f1);
  n = redislock_lock_token(p, tok, sizeof tok);
  CHECK(redislock_fence_token(c, KEY("c:fence"), tok, n, &by_token) == REDISLOCK_OK && by_token == f2,
        "by token: the holder's number");
  CHECK(redislock_lock_draw_fence(p, NULL) == REDISLOCK_INVALID_ARGUMENT, "out NULL");
  redislock_lock_free(p);
  /* Lost before asking: expired, then taken by another owner. */
  redislock_lock *gone = NULL, *next = NULL;
  CHECK(redislock_acquire(c, KEY("c:fence2"), 100, 0, NULL, 0, &gone) == REDISLOCK_OK, "short lock");
  sleep_ms(300);
  CHECK(redislock_acquire(c, KEY("c:fence2"), 10000, 0, NULL, 0, &next) == REDISLOCK_OK, "next holder");
  uint64_t none = 7;
  CHECK(redislock_lock_draw_fence(gone, &none) == REDISLOCK_NOT_OWNER && none == 7, "no number for a lost lock");
  CHECK(redislock_lock_fence(gone) == 0, "0 from redislock_lock_fence");
  CHECK(redislock_lock_is_lost(gone), "marked lost");
  redislock_lock_free(gone);
  CHECK(redislock_release(next) == REDISLOCK_OK, "the next holder is spared");
}

#define THREADS 8
#define ROUNDS 150
static long counter; /* plain, non-atomic */

static void *worker(void *arg) {
  redislock_client *c = arg;
  for (int i = 0; i < ROUNDS; i++) {
    redislock_lock *l = NULL;
    if (redislock_acquire(c, KEY("c:threads"), 5000, 30000, NULL, 0, &l) != REDISLOCK_OK)
      return (void *)1;
    long v = counter;
    sched_yield();
    counter = v + 1;
    if (redislock_release(l) != REDISLOCK_OK)
      return (void *)1;
  }
  return NULL;
}

static void test_threads(redislock_client *c) {
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++)
    pthread_create(&th[i], NULL, worker, c);
  int errors = 0;
  for (int i = 0; i < THREADS; i++) {
    void *r;
    pthread_join(th[i], &r);
    errors += r != NULL;
  }
  CHECK(errors == 0, "%d threads failed", errors);
  CHECK(counter == THREADS * ROUNDS, "counter %ld, expected %d", counter, THREADS * ROUNDS);
}

static void test_fork(redislock_client *c) {
  redislock_lock *l = NULL;
  CHECK(redislock_acquire(c, KEY("c:fork"), 30000, 0, NULL, 0, &l) == REDISLOCK_OK, "acquire");
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    /* The child uses the client (fresh connections)... */
    redislock_lock *mine = NULL;
    int ok = redislock_acquire(c, KEY("c:fork-child"), 5000, 0, NULL, 0, &mine) == REDISLOCK_OK;
    ok = ok && redislock_release(mine) == REDISLOCK_OK;
    ok = ok && held(c, "c:fork");
    /* ...and frees the parent's handle: inert here. */
    redislock_lock_free(l);
    ok = ok && held(c, "c:fork");
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed (status %d)", status);
  CHECK(held(c, "c:fork"), "the parent's lock survived the child");
  CHECK(redislock_release(l) == REDISLOCK_OK, "the parent still owns it: %s", last_error());
}

static void test_dead_server(void) {
  redislock_client *dead = NULL;
  redislock_lock *l = NULL;
  CHECK(redislock_client_open(dead_url, &dead) == REDISLOCK_OK, "open");
  double t = now_ms();
  redislock_status s = redislock_acquire(dead, KEY("c:dead"), 1000, 2000, NULL, 0, &l);
  double took = now_ms() - t;
  CHECK(s == REDISLOCK_CONNECTION, "dead server: %s", redislock_status_str(s));
  CHECK(took < 5000, "took %.0f ms", took);
  CHECK(strstr(last_error(), "cannot reach Redis at 127.0.0.1:") != NULL, "useful message: %s", last_error());
  char tiny[8];
  size_t need = redislock_last_error(tiny, sizeof tiny);
  CHECK(need > sizeof tiny && strlen(tiny) == sizeof tiny - 1, "truncated copy, full length %zu", need);
  redislock_client_free(dead);
}

static void test_auto_renew(redislock_client *c) {
  redislock_lock *l = NULL, *thief = NULL;
  /* 1.5 s, renewed every 0.5 s: a second to spare for a pause of the
   * renewal thread. */
  CHECK(redislock_acquire(c, KEY("c:renew"), 1500, 0, NULL, 0, &l) == REDISLOCK_OK, "acquire");
  CHECK(redislock_lock_auto_renew(l) == REDISLOCK_OK, "auto_renew");
  sleep_ms(2500);
  CHECK(!redislock_lock_is_lost(l), "lost while renewed");
  CHECK(held(c, "c:renew"), "a 1.5 s lock still held after 2.5 s");
  /* Steal it: delete by token, then another owner takes it. */
  uint8_t tok[64];
  size_t n = redislock_lock_token(l, tok, sizeof tok);
  CHECK(redislock_release_token(c, KEY("c:renew"), tok, n) == REDISLOCK_OK, "release by token");
  CHECK(redislock_acquire(c, KEY("c:renew"), 30000, 0, NULL, 0, &thief) == REDISLOCK_OK, "thief");
  double t = now_ms();
  while (!redislock_lock_is_lost(l) && now_ms() - t < 10000)
    sleep_ms(10);
  CHECK(redislock_lock_is_lost(l), "a stolen lock is reported lost");
  CHECK(redislock_release(l) == REDISLOCK_NOT_OWNER, "release of a lost lock");
  CHECK(held(c, "c:renew"), "the thief keeps it");
  CHECK(redislock_release(thief) == REDISLOCK_OK, "thief release");
}

/* redislock_set_interrupt: a wait ends soon after the check says so, the
 * waiter leaves the queue (a newcomer takes the lock at once after the
 * release), and a thread without a check is not affected. */
static volatile int interrupt_flag;
static int interrupt_check(void *userdata) { return *(volatile int *)userdata; }

static void *interrupted_waiter(void *arg) {
  redislock_client *c = arg;
  redislock_lock *l = NULL;
  redislock_set_interrupt(interrupt_check, (void *)&interrupt_flag);
  /* 60 s: far beyond the bound checked below, so a check that is never
   * asked shows as a wait that took too long, not as a hang. */
  redislock_status *s = malloc(sizeof *s);
  *s = redislock_acquire(c, KEY("c:interrupt"), 10000, 60000, NULL, 0, &l);
  redislock_set_interrupt(NULL, NULL);
  if (l) redislock_release(l);
  return s;
}

static void test_interrupt(redislock_client *c) {
  redislock_lock *holder = NULL, *next = NULL;
  CHECK(redislock_acquire(c, KEY("c:interrupt"), 30000, 0, NULL, 0, &holder) == REDISLOCK_OK, "acquire");
  interrupt_flag = 0;
  pthread_t th;
  pthread_create(&th, NULL, interrupted_waiter, c);
  sleep_ms(300);
  double t = now_ms();
  interrupt_flag = 1;
  void *r = NULL;
  pthread_join(th, &r);
  double took = now_ms() - t;
  CHECK(*(redislock_status *)r == REDISLOCK_NOT_ACQUIRED, "an interrupted wait: %d", *(redislock_status *)r);
  free(r);
  CHECK(took < 30000, "the interrupted wait ended %.0f ms after the check said so", took);
  CHECK(redislock_release(holder) == REDISLOCK_OK, "release");
  CHECK(redislock_acquire(c, KEY("c:interrupt"), 1000, 0, NULL, 0, &next) == REDISLOCK_OK,
        "the interrupted waiter left the queue: a newcomer takes the lock at once");
  if (next) redislock_release(next);
  /* The check belongs to the thread that installed it: this one has none. */
  CHECK(redislock_acquire(c, KEY("c:interrupt"), 1000, 300, NULL, 0, &next) == REDISLOCK_OK, "no check here");
  if (next) redislock_release(next);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s REDIS_URL DEAD_URL\n", argv[0]);
    return 2;
  }
  url = argv[1];
  dead_url = argv[2];
  redislock_client *c = NULL;
  if (redislock_client_open(url, &c) != REDISLOCK_OK) {
    fprintf(stderr, "cannot open %s: %s\n", url, last_error());
    return 2;
  }
  test_null_everywhere(c);
  test_bad_input(c);
  test_cycle(c);
  test_tokens(c);
  test_by_token(c);
  test_force_release(c);
  test_fences(c);
  test_shared();
  test_expiry_and_waits(c);
  test_threads(c);
  test_fork(c);
  test_dead_server();
  test_auto_renew(c);
  test_interrupt(c);
  redislock_client_free(c);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
