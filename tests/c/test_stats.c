/*
 * Statistics and lost callbacks from C.
 *
 *   test_stats REDIS_URL
 *
 * REDIS_URL is redis://127.0.0.1:PORT of a fresh server (tests/c_api.rs
 * starts one). A scripted run through one client (acquisitions at once,
 * try-once failures, hand-offs to a waiting thread, a release and an extend
 * of a lock taken over, a lock that background renewal finds taken over)
 * must add up exactly in redislock_client_stats; the lost callbacks must
 * run once each, on the thread the header says. Then callers compiled
 * against a shorter or a longer struct redislock_stats. Keys are taken over
 * with a raw SET on a connection of this program's own.
 *
 * Prints one line per failed check and "N passed, N failed"; exits 1 when a
 * check failed.
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static const char *url;
static pthread_t main_thread;

/* The first version of struct redislock_stats: up to waiters_now. */
#define STATS_V1_SIZE (offsetof(struct redislock_stats, waiters_now) + sizeof(uint64_t))

static struct redislock_stats stats_of(redislock_client *c) {
  struct redislock_stats s;
  memset(&s, 0, sizeof s);
  s.size = sizeof s;
  redislock_status st = redislock_client_stats(c, &s);
  CHECK(st == REDISLOCK_OK, "redislock_client_stats: %s", last_error());
  CHECK(s.size == sizeof s, "size %u", (unsigned)s.size);
  return s;
}

/* Send one command to the server on a connection of our own and read the
 * first line of the reply into `reply`; 0 when it was sent and answered. */
static int raw_command(int argc, const char *const *argv, char *reply, size_t cap) {
  char host[64];
  int port = 0;
  if (sscanf(url, "redis://%63[^:]:%d", host, &port) != 2)
    return -1;
  struct sockaddr_in addr;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, host, &addr.sin_addr) != 1)
    return -1;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return -1;
  if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  char buf[1024];
  int n = snprintf(buf, sizeof buf, "*%d\r\n", argc);
  for (int i = 0; i < argc; i++)
    n += snprintf(buf + n, sizeof buf - (size_t)n, "$%zu\r\n%s\r\n", strlen(argv[i]), argv[i]);
  int ok = write(fd, buf, (size_t)n) == n;
  size_t got = 0;
  while (ok && got + 1 < cap) {
    ssize_t r = read(fd, reply + got, 1);
    if (r != 1)
      break;
    got++;
    if (got >= 2 && reply[got - 2] == '\r' && reply[got - 1] == '\n')
      break;
  }
  reply[got] = 0;
  close(fd);
  return ok && got > 0 ? 0 : -1;
}

/* Another owner's value over the key, as a foreign process could write it. */
static void take_over(const char *key) {
  const char *argv[] = {"SET", key, "intruder"};
  char reply[64];
  CHECK(raw_command(3, argv, reply, sizeof reply) == 0 && strcmp(reply, "+OK\r\n") == 0,
        "SET %s: %s", key, reply);
}

static void delete_key(const char *key) {
  const char *argv[] = {"DEL", key};
  char reply[64];
  CHECK(raw_command(2, argv, reply, sizeof reply) == 0 && strcmp(reply, ":1\r\n") == 0,
        "DEL %s: %s", key, reply);
}

/* What a lost callback saw. */
struct lost_seen {
  atomic_int calls;
  pthread_t thread;
  double at_ms;
  /* When set: the callback tries the calls the header refuses inside it. */
  redislock_lock *lock;
  redislock_status release_inside, on_lost_inside;
  bool lost_inside;
};

static void on_lost(void *userdata) {
  struct lost_seen *s = userdata;
  s->thread = pthread_self();
  s->at_ms = now_ms();
  if (s->lock != NULL) {
    s->lost_inside = redislock_lock_is_lost(s->lock);
    s->release_inside = redislock_release(s->lock);
    s->on_lost_inside = redislock_lock_on_lost(s->lock, on_lost, s);
    redislock_lock_free(s->lock); /* refused too: the handle stays */
  }
  atomic_fetch_add(&s->calls, 1);
}

static void lost_init(struct lost_seen *s) {
  memset(s, 0, sizeof *s);
  atomic_init(&s->calls, 0);
}

struct waiter {
  redislock_client *client;
  const char *key;
  redislock_status acquired, released;
};

static void *wait_for_lock(void *arg) {
  struct waiter *w = arg;
  redislock_lock *l = NULL;
  w->acquired = redislock_acquire(w->client, KEY(w->key), 30000, 10000, NULL, 0, &l);
  w->released = w->acquired == REDISLOCK_OK ? redislock_release(l) : w->acquired;
  return NULL;
}

/* Poll until `pred` holds for the client's stats; false after `limit_ms`. */
static int stats_until(redislock_client *c, int (*pred)(const struct redislock_stats *, uint64_t),
                       uint64_t arg, double limit_ms) {
  double t = now_ms();
  while (now_ms() - t < limit_ms) {
    struct redislock_stats s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    if (redislock_client_stats(c, &s) == REDISLOCK_OK && pred(&s, arg))
      return 1;
    sleep_ms(2);
  }
  return 0;
}

static int waiters_are(const struct redislock_stats *s, uint64_t n) { return s->waiters_now == n; }
static int renewed(const struct redislock_stats *s, uint64_t n) { return s->renewals_ok >= n; }

static void check_histogram(const char *what, const struct redislock_histogram *h, uint64_t count) {
  CHECK(h->count == count, "%s count %llu, expected %llu", what, (unsigned long long)h->count,
        (unsigned long long)count);
  uint64_t in_buckets = 0;
  for (size_t i = 0; i < REDISLOCK_STATS_BUCKETS; i++)
    in_buckets += h->buckets[i];
  CHECK(in_buckets == h->count, "%s buckets hold %llu", what, (unsigned long long)in_buckets);
  CHECK(h->p50_us <= h->p90_us && h->p90_us <= h->p99_us && h->p99_us <= h->max_us,
        "%s p50 %llu p90 %llu p99 %llu max %llu", what, (unsigned long long)h->p50_us,
        (unsigned long long)h->p90_us, (unsigned long long)h->p99_us, (unsigned long long)h->max_us);
  CHECK(h->max_us <= h->sum_us && h->sum_us <= h->count * h->max_us, "%s sum %llu max %llu", what,
        (unsigned long long)h->sum_us, (unsigned long long)h->max_us);
  CHECK(count == 0 || h->p50_us > 0, "%s p50 is 0", what);
}

#define EXPECT(field, n)                                                                           \
  CHECK(s.field == (uint64_t)(n), #field " is %llu, expected %llu", (unsigned long long)s.field,    \
        (unsigned long long)(n))

enum { AT_ONCE = 5, TRY_ONCE = 3, HANDOFFS = 3 };
/* Renewed every third of it: a pause of the renewal thread up to two thirds
 * of it costs no lock. */
#define RENEW_TTL_MS 2000

static void test_scripted_run(void) {
  redislock_client *c = NULL, *other = NULL;
  CHECK(redislock_client_open(url, &c) == REDISLOCK_OK, "open: %s", last_error());
  CHECK(redislock_client_open(url, &other) == REDISLOCK_OK, "open: %s", last_error());
  struct redislock_stats s = stats_of(c);
  EXPECT(acquired_at_once, 0);
  check_histogram("fresh wait", &s.wait, 0);

  /* Acquisitions at once, all held together, one extended. */
  redislock_lock *held[AT_ONCE];
  char key[32];
  for (int i = 0; i < AT_ONCE; i++) {
    snprintf(key, sizeof key, "s:once:%d", i);
    CHECK(redislock_acquire(c, KEY(key), 30000, 0, NULL, 0, &held[i]) == REDISLOCK_OK, "%s", last_error());
  }
  s = stats_of(c);
  EXPECT(held_now, AT_ONCE);
  CHECK(redislock_extend(held[0], 20000) == REDISLOCK_OK, "extend: %s", last_error());
  for (int i = 0; i < AT_ONCE; i++)
    CHECK(redislock_release(held[i]) == REDISLOCK_OK, "release: %s", last_error());

  /* Try-once failures on a lock another client holds. */
  redislock_lock *busy = NULL, *l = NULL;
  CHECK(redislock_acquire(other, KEY("s:busy"), 30000, 0, NULL, 0, &busy) == REDISLOCK_OK, "%s", last_error());
  for (int i = 0; i < TRY_ONCE; i++)
    CHECK(redislock_acquire(c, KEY("s:busy"), 30000, 0, NULL, 0, &l) == REDISLOCK_NOT_ACQUIRED, "try once");
  CHECK(l == NULL, "out written on failure");
  CHECK(redislock_release(busy) == REDISLOCK_OK, "release busy: %s", last_error());

  /* Hand-offs: a thread of the same client waits, the release hands it over. */
  for (int i = 0; i < HANDOFFS; i++) {
    redislock_lock *h = NULL;
    CHECK(redislock_acquire(c, KEY("s:handoff"), 30000, 0, NULL, 0, &h) == REDISLOCK_OK, "%s", last_error());
    struct waiter w = {c, "s:handoff", REDISLOCK_INTERNAL, REDISLOCK_INTERNAL};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, wait_for_lock, &w) == 0, "pthread_create");
    CHECK(stats_until(c, waiters_are, 1, 10000), "the waiter never showed in waiters_now");
    s = stats_of(c);
    EXPECT(held_now, 1);
    CHECK(redislock_release(h) == REDISLOCK_OK, "release to the waiter: %s", last_error());
    pthread_join(t, NULL);
    CHECK(w.acquired == REDISLOCK_OK && w.released == REDISLOCK_OK, "waiter %d %d", w.acquired, w.released);
  }

  /* A release that finds the lock taken over: the callback runs inside it. */
  struct lost_seen by_release;
  lost_init(&by_release);
  CHECK(redislock_acquire(c, KEY("s:notowner"), 30000, 0, NULL, 0, &l) == REDISLOCK_OK, "%s", last_error());
  CHECK(redislock_lock_on_lost(l, on_lost, &by_release) == REDISLOCK_OK, "on_lost: %s", last_error());
  take_over("s:notowner");
  CHECK(atomic_load(&by_release.calls) == 0, "called before anyone found the loss");
  CHECK(redislock_release(l) == REDISLOCK_NOT_OWNER, "release of a lock taken over");
  CHECK(atomic_load(&by_release.calls) == 1, "release: %d calls", atomic_load(&by_release.calls));
  CHECK(pthread_equal(by_release.thread, main_thread), "release: not on the calling thread");
  delete_key("s:notowner");

  /* An extend that finds the lock taken over: the callback runs inside it,
   * where it may read the handle and may not release or free it. */
  struct lost_seen by_extend, later;
  lost_init(&by_extend);
  lost_init(&later);
  CHECK(redislock_acquire(c, KEY("s:extend"), 30000, 0, NULL, 0, &l) == REDISLOCK_OK, "%s", last_error());
  by_extend.lock = l;
  CHECK(redislock_lock_on_lost(l, on_lost, &by_extend) == REDISLOCK_OK, "on_lost: %s", last_error());
  take_over("s:extend");
  CHECK(redislock_extend(l, 30000) == REDISLOCK_NOT_OWNER, "extend of a lock taken over");
  CHECK(atomic_load(&by_extend.calls) == 1, "extend: %d calls", atomic_load(&by_extend.calls));
  CHECK(pthread_equal(by_extend.thread, main_thread), "extend: not on the calling thread");
  CHECK(by_extend.lost_inside, "is_lost false inside the callback");
  CHECK(by_extend.release_inside == REDISLOCK_INVALID_ARGUMENT, "release inside: %d", by_extend.release_inside);
  CHECK(by_extend.on_lost_inside == REDISLOCK_INVALID_ARGUMENT, "on_lost inside: %d", by_extend.on_lost_inside);
  CHECK(redislock_lock_is_lost(l), "the handle survived the refused calls");
  /* Already lost: a new callback runs at once, on this thread. */
  CHECK(redislock_lock_on_lost(l, on_lost, &later) == REDISLOCK_OK, "on_lost: %s", last_error());
  CHECK(atomic_load(&later.calls) == 1 && pthread_equal(later.thread, main_thread), "not run at once");
  CHECK(redislock_release(l) == REDISLOCK_NOT_OWNER, "release after a lost extend");
  CHECK(atomic_load(&by_extend.calls) == 1 && atomic_load(&later.calls) == 1, "called again by the release");
  delete_key("s:extend");

  /* Background renewal finds the lock taken over: the callback runs on the
   * renewal thread, within one TTL of the theft. */
  struct lost_seen by_renewal;
  lost_init(&by_renewal);
  CHECK(redislock_acquire(c, KEY("s:renew"), RENEW_TTL_MS, 0, NULL, 0, &l) == REDISLOCK_OK, "%s", last_error());
  CHECK(redislock_lock_on_lost(l, on_lost, &by_renewal) == REDISLOCK_OK, "on_lost: %s", last_error());
  CHECK(redislock_lock_auto_renew(l) == REDISLOCK_OK, "auto_renew: %s", last_error());
  CHECK(stats_until(c, renewed, 2, 20000), "no two renewals within 20 s");
  double stolen_at = now_ms();
  take_over("s:renew");
  while (atomic_load(&by_renewal.calls) == 0 && now_ms() - stolen_at < 20000)
    sleep_ms(1);
  CHECK(atomic_load(&by_renewal.calls) == 1, "renewal: %d calls", atomic_load(&by_renewal.calls));
  CHECK(!pthread_equal(by_renewal.thread, main_thread), "renewal: called on the main thread");
  CHECK(by_renewal.at_ms - stolen_at <= RENEW_TTL_MS, "called %.0f ms after the theft (TTL %d ms)",
        by_renewal.at_ms - stolen_at, RENEW_TTL_MS);
  CHECK(redislock_lock_is_lost(l), "not marked lost");
  CHECK(redislock_release(l) == REDISLOCK_NOT_OWNER, "release of a lock renewal found lost");
  CHECK(atomic_load(&by_renewal.calls) == 1, "renewal: %d calls", atomic_load(&by_renewal.calls));
  delete_key("s:renew");

  /* Everything adds up. */
  s = stats_of(c);
  enum {
    NOT_OWNER_RELEASES = 3, /* the release, and those after the lost extend and renewal */
    OK_RELEASES = AT_ONCE + 2 * HANDOFFS,
    TAKEN = AT_ONCE + HANDOFFS + 3, /* + the locks of the three losses */
  };
  EXPECT(acquired_at_once, TAKEN);
  EXPECT(acquired_after_wait, 0);
  EXPECT(acquired_handed_over, HANDOFFS);
  EXPECT(acquire_timed_out, TRY_ONCE);
  EXPECT(acquire_errors, 0);
  EXPECT(releases_ok, OK_RELEASES);
  EXPECT(releases_not_owner, NOT_OWNER_RELEASES);
  EXPECT(extends_ok, 1);
  EXPECT(extends_lost, 1);
  /* Two or more: one more may come between the check above and the theft. */
  CHECK(s.renewals_ok >= 2, "renewals_ok is %llu, expected 2 or more", (unsigned long long)s.renewals_ok);
  EXPECT(renewals_lost, 1);
  EXPECT(locks_lost, 3);
  EXPECT(handoffs_given, HANDOFFS);
  EXPECT(handoffs_received, HANDOFFS);
  EXPECT(connection_errors, 0);
  EXPECT(reconnects, 0);
  EXPECT(held_now, 0);
  EXPECT(waiters_now, 0);
  CHECK(s.reserved == 0, "reserved %u", (unsigned)s.reserved);
  check_histogram("wait", &s.wait, TAKEN + HANDOFFS + TRY_ONCE);
  check_histogram("held", &s.held, TAKEN + HANDOFFS);
  /* The waiters waited for their hand-off: the longest wait is theirs. */
  CHECK(s.wait.max_us >= 1000, "wait max %llu us", (unsigned long long)s.wait.max_us);

  /* The other client's figures are its own. */
  struct redislock_stats o = stats_of(other);
  CHECK(o.acquired_at_once == 1 && o.releases_ok == 1 && o.acquire_timed_out == 0, "other client");

  redislock_client_free(other);
  redislock_client_free(c);
}

static void test_callback_cleared_and_freed(void) {
  redislock_client *c = NULL;
  CHECK(redislock_client_open(url, &c) == REDISLOCK_OK, "open: %s", last_error());
  struct lost_seen seen;
  lost_init(&seen);
  redislock_lock *l = NULL;

  /* NULL removes the callback. */
  CHECK(redislock_acquire(c, KEY("s:cleared"), 30000, 0, NULL, 0, &l) == REDISLOCK_OK, "%s", last_error());
  CHECK(redislock_lock_on_lost(l, on_lost, &seen) == REDISLOCK_OK, "on_lost");
  CHECK(redislock_lock_on_lost(l, NULL, NULL) == REDISLOCK_OK, "on_lost NULL");
  take_over("s:cleared");
  CHECK(redislock_extend(l, 1000) == REDISLOCK_NOT_OWNER, "extend");
  CHECK(redislock_release(l) == REDISLOCK_NOT_OWNER, "release");
  CHECK(atomic_load(&seen.calls) == 0, "a removed callback ran");
  delete_key("s:cleared");

  /* Never after a free: renewal finds the lock gone after the handle went. */
  CHECK(redislock_acquire(c, KEY("s:freed"), 300, 0, NULL, 0, &l) == REDISLOCK_OK, "%s", last_error());
  CHECK(redislock_lock_on_lost(l, on_lost, &seen) == REDISLOCK_OK, "on_lost");
  CHECK(redislock_lock_auto_renew(l) == REDISLOCK_OK, "auto_renew");
  take_over("s:freed");
  redislock_lock_free(l);
  int at_free = atomic_load(&seen.calls);
  sleep_ms(400);
  CHECK(atomic_load(&seen.calls) == at_free, "a callback ran after its handle was freed");
  delete_key("s:freed");

  /* Bad arguments. */
  CHECK(redislock_lock_on_lost(NULL, on_lost, &seen) == REDISLOCK_INVALID_ARGUMENT, "NULL lock");
  CHECK(strstr(last_error(), "lock is NULL") != NULL, "%s", last_error());
  redislock_client_free(c);
}

static void test_struct_sizes(void) {
  redislock_client *c = NULL;
  CHECK(redislock_client_open(url, &c) == REDISLOCK_OK, "open: %s", last_error());
  redislock_lock *l = NULL;
  CHECK(redislock_acquire(c, KEY("s:sizes"), 30000, 0, NULL, 0, &l) == REDISLOCK_OK, "%s", last_error());
  struct redislock_stats full = stats_of(c);
  CHECK(full.acquired_at_once == 1 && full.held_now == 1, "at once %llu", (unsigned long long)full.acquired_at_once);

  /* An old caller: only the first version's fields, the rest untouched. */
  enum { CANARY = 0xA5 };
  _Alignas(struct redislock_stats) unsigned char buf[sizeof(struct redislock_stats) + 64];
  struct redislock_stats *out = (struct redislock_stats *)(void *)buf;
  memset(buf, CANARY, sizeof buf);
  out->size = STATS_V1_SIZE;
  CHECK(redislock_client_stats(c, out) == REDISLOCK_OK, "v1: %s", last_error());
  CHECK(out->size == STATS_V1_SIZE, "v1 filled %u", (unsigned)out->size);
  CHECK(out->acquired_at_once == 1 && out->held_now == 1 && out->waiters_now == 0, "v1 fields");
  CHECK(memcmp((unsigned char *)out + sizeof(uint32_t), (unsigned char *)&full + sizeof(uint32_t),
               STATS_V1_SIZE - sizeof(uint32_t)) == 0,
        "v1 fields differ from a full read");
  size_t untouched = STATS_V1_SIZE;
  while (untouched < sizeof buf && buf[untouched] == CANARY)
    untouched++;
  CHECK(untouched == sizeof buf, "byte %zu after the caller's %zu was written", untouched, (size_t)STATS_V1_SIZE);

  /* A size inside a field: whole fields only. */
  memset(buf, CANARY, sizeof buf);
  out->size = STATS_V1_SIZE + 12;
  CHECK(redislock_client_stats(c, out) == REDISLOCK_OK, "v1+12: %s", last_error());
  CHECK(out->size == STATS_V1_SIZE + 8, "v1+12 filled %u", (unsigned)out->size);
  CHECK(out->wait.count == full.wait.count, "wait.count %llu", (unsigned long long)out->wait.count);
  for (untouched = STATS_V1_SIZE + 8; untouched < sizeof buf && buf[untouched] == CANARY;)
    untouched++;
  CHECK(untouched == sizeof buf, "byte %zu written", untouched);

  /* A newer caller's longer struct: this library fills what it knows. */
  memset(buf, CANARY, sizeof buf);
  out->size = sizeof buf;
  CHECK(redislock_client_stats(c, out) == REDISLOCK_OK, "longer: %s", last_error());
  CHECK(out->size == sizeof(struct redislock_stats), "longer filled %u", (unsigned)out->size);
  for (untouched = sizeof(struct redislock_stats); untouched < sizeof buf && buf[untouched] == CANARY;)
    untouched++;
  CHECK(untouched == sizeof buf, "byte %zu beyond the struct written", untouched);

  /* Too small, or NULL: refused, nothing written. */
  unsigned char before[sizeof buf];
  memset(buf, CANARY, sizeof buf);
  out->size = STATS_V1_SIZE - 8;
  memcpy(before, buf, sizeof buf);
  CHECK(redislock_client_stats(c, out) == REDISLOCK_INVALID_ARGUMENT, "too small accepted");
  CHECK(strstr(last_error(), "sizeof(struct redislock_stats)") != NULL, "message: %s", last_error());
  CHECK(memcmp(before, buf, sizeof buf) == 0, "written on failure");
  out->size = 0;
  CHECK(redislock_client_stats(c, out) == REDISLOCK_INVALID_ARGUMENT, "size 0 accepted");
  CHECK(redislock_client_stats(c, NULL) == REDISLOCK_INVALID_ARGUMENT, "NULL out");
  CHECK(strstr(last_error(), "out is NULL") != NULL, "%s", last_error());
  out->size = sizeof(struct redislock_stats);
  CHECK(redislock_client_stats(NULL, out) == REDISLOCK_INVALID_ARGUMENT, "NULL client");
  CHECK(strstr(last_error(), "client is NULL") != NULL, "%s", last_error());

  /* The buckets' bounds. */
  CHECK(redislock_stats_bucket_bound_us(0) == 50, "bound 0");
  CHECK(redislock_stats_bucket_bound_us(REDISLOCK_STATS_BUCKETS - 2) == 3600000000ULL, "bound 21");
  CHECK(redislock_stats_bucket_bound_us(REDISLOCK_STATS_BUCKETS - 1) == UINT64_MAX, "last bound");
  CHECK(redislock_stats_bucket_bound_us((size_t)-1) == UINT64_MAX, "beyond");
  for (size_t i = 1; i + 1 < REDISLOCK_STATS_BUCKETS; i++)
    CHECK(redislock_stats_bucket_bound_us(i) > redislock_stats_bucket_bound_us(i - 1), "bound %zu", i);

  CHECK(redislock_release(l) == REDISLOCK_OK, "release: %s", last_error());
  redislock_client_free(c);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s REDIS_URL\n", argv[0]);
    return 2;
  }
  url = argv[1];
  main_thread = pthread_self();
  test_scripted_run();
  test_callback_cleared_and_freed();
  test_struct_sizes();
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
