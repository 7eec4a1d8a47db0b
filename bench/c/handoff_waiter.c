/*
 * The C waiter of bench/node/bench.js's hand-off between processes
 * (measures nothing alone; bench/node/handoff_waiter.js is the same in
 * Node.js). Only the C API of include/redislock.h, no hiredis:
 *
 *   handoff_waiter PORT KEY TTL_MS WAIT_MS
 *
 * Opens a client of redis://127.0.0.1:PORT, warms up on a key of its own
 * (waiting acquires and releases), prints "ready", then for every line
 * "wait" read from stdin calls redislock_acquire(KEY, TTL_MS, WAIT_MS),
 * stamps clock_gettime(CLOCK_MONOTONIC) (ns) as soon as it returns,
 * releases the lock and prints the stamp (or "error MESSAGE"). "quit" or
 * the end of stdin ends it. `make bench-node` builds it.
 */
#define _POSIX_C_SOURCE 200809L

#include <redislock.h>

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The status and this thread's last error, on one line. */
static void describe(const char *what, redislock_status st, char *out, size_t cap)
{
    char msg[256];
    msg[0] = '\0';
    redislock_last_error(msg, sizeof msg);
    for (char *p = msg; *p; p++) {
        if (*p == '\n' || *p == '\r') *p = ' ';
    }
    snprintf(out, cap, "%s: %s: %s", what, redislock_status_str((int)st), msg);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: handoff_waiter PORT KEY TTL_MS WAIT_MS\n");
        return 2;
    }
    const char *key = argv[2];
    const size_t key_len = strlen(key);
    const uint64_t ttl = strtoull(argv[3], NULL, 10);
    const int64_t wait = strtoll(argv[4], NULL, 10);
    if (key_len == 0 || ttl == 0 || wait <= 0) {
        fprintf(stderr, "handoff_waiter: bad arguments\n");
        return 2;
    }
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%s", argv[1]);
    redislock_client *client = NULL;
    redislock_status st = redislock_client_open(url, &client);
    char err[512];
    if (st != REDISLOCK_OK) {
        describe("open", st, err, sizeof err);
        fprintf(stderr, "handoff_waiter: %s\n", err);
        return 1;
    }

    char warm[64];
    snprintf(warm, sizeof warm, "bench:node:xwarm:%ld", (long)getpid());
    for (int i = 0; i < 20; i++) {
        redislock_lock *lock = NULL;
        st = redislock_acquire(client, (const uint8_t *)warm, strlen(warm), ttl, wait, NULL, 0, &lock);
        if (st == REDISLOCK_OK) st = redislock_release(lock);
        if (st != REDISLOCK_OK) {
            describe("warm-up", st, err, sizeof err);
            fprintf(stderr, "handoff_waiter: %s\n", err);
            return 1;
        }
    }
    printf("ready\n");
    fflush(stdout);

    char line[256];
    while (fgets(line, sizeof line, stdin) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        if (strcmp(line, "quit") == 0) break;
        if (strcmp(line, "wait") != 0) continue;
        redislock_lock *lock = NULL;
        st = redislock_acquire(client, (const uint8_t *)key, key_len, ttl, wait, NULL, 0, &lock);
        const uint64_t got = now_ns();
        if (st != REDISLOCK_OK) {
            describe("acquire", st, err, sizeof err);
            printf("error %s\n", err);
        } else if ((st = redislock_release(lock)) != REDISLOCK_OK) {
            describe("release", st, err, sizeof err);
            printf("error %s\n", err);
        } else {
            printf("%" PRIu64 "\n", got);
        }
        fflush(stdout);
    }
    redislock_client_free(client);
    return 0;
}
