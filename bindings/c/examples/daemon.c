/*
 * A small worker daemon: several copies may run on several machines; each
 * job is done by exactly one of them at a time.
 *
 *   daemon REDIS_URL [JOBS]
 *
 * Per job it takes the lock "daemon:job:N" with a 2 s deadline, renews it in
 * the background while working, stops work if the lock is lost, and
 * handles every status redislock can return.
 *
 * Build: cc daemon.c $(pkg-config --cflags --libs redislock) -o daemon
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <redislock.h>

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void report(const char *what, redislock_status s) {
  char msg[512];
  redislock_last_error(msg, sizeof msg);
  fprintf(stderr, "daemon: %s: %s\n  %s\n", what, redislock_status_str(s), msg);
}

/* Work on one job in steps, giving up as soon as the lock is lost. */
static int work(redislock_lock *lock, int job) {
  for (int step = 0; step < 5; step++) {
    if (redislock_lock_is_lost(lock)) {
      fprintf(stderr, "daemon: job %d: lock lost at step %d, abandoning it\n", job, step);
      return 0;
    }
    sleep_ms(20); /* the real work, fenced with redislock_lock_fence(lock) */
  }
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s REDIS_URL [JOBS]\n", argv[0]);
    return 2;
  }
  int jobs = argc > 2 ? atoi(argv[2]) : 10;
  redislock_client *client = NULL;
  redislock_status s = redislock_client_open(argv[1], &client);
  if (s != REDISLOCK_OK) {
    report("bad URL", s);
    return 2;
  }
  int done = 0, skipped = 0, retries = 0;
  for (int job = 0; job < jobs; job++) {
    char key[64];
    snprintf(key, sizeof key, "daemon:job:%d", job);
    redislock_lock *lock = NULL;
    s = redislock_acquire(client, (const uint8_t *)key, strlen(key), 3000, 2000, NULL, 0, &lock);
    switch (s) {
    case REDISLOCK_OK:
      break;
    case REDISLOCK_NOT_ACQUIRED: /* another instance has it: move on */
      skipped++;
      continue;
    case REDISLOCK_CONNECTION: /* Redis is away: back off, try the job again */
      if (++retries > 3) {
        report("giving up", s);
        redislock_client_free(client);
        return 1;
      }
      report("retrying", s);
      sleep_ms(200 * retries);
      job--;
      continue;
    case REDISLOCK_WRONG_TYPE:  /* the key is used for something else */
    case REDISLOCK_SERVER:      /* auth, ACL, read-only replica... */
    case REDISLOCK_NO_QUORUM:   /* Redlock: too few servers */
    case REDISLOCK_INVALID_ARGUMENT:
    case REDISLOCK_NOT_OWNER:   /* not returned by acquire */
    case REDISLOCK_INTERNAL:
    default:
      report(key, s);
      redislock_client_free(client);
      return 1;
    }
    retries = 0;
    s = redislock_lock_auto_renew(lock);
    if (s != REDISLOCK_OK)
      report("auto-renew", s);
    int ok = work(lock, job);
    unsigned long long fence = (unsigned long long)redislock_lock_fence(lock);
    s = redislock_release(lock); /* frees the handle whatever the outcome */
    if (s == REDISLOCK_NOT_OWNER)
      fprintf(stderr, "daemon: job %d: the lock expired before release\n", job);
    else if (s != REDISLOCK_OK)
      report("release", s);
    if (ok) {
      done++;
      printf("job %d done under fence %llu\n", job, fence);
    }
  }
  printf("daemon: %d done, %d skipped\n", done, skipped);
  redislock_client_free(client);
  return 0;
}
