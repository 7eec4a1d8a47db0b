/*
 * The C side of bench/java/Bench.java (measures nothing alone): the C API's
 * uncontended cycle, in batches the bench asks for, so that its batches
 * interleave with the Java ones on the same server. Only the C API of
 * include/redislock.h, no hiredis:
 *
 *   cycles PORT KEY
 *
 * Opens a client of redis://127.0.0.1:PORT, warms up on KEY, prints
 * "ready", then for every line "N" read from stdin runs N cycles of
 * redislock_acquire(KEY, ttl 30 s, wait_ms 0) + redislock_release (the
 * Java binding's tryAcquire with the default options, through the C API)
 * and prints "MEAN_NS P50_NS CPU_NS" of the batch (each cycle timed with
 * CLOCK_MONOTONIC; the process's CPU per cycle, CLOCK_PROCESS_CPUTIME_ID:
 * every thread), or "error MESSAGE". "quit" or the end of stdin ends it.
 * `make bench-java` builds it.
 */
#define _POSIX_C_SOURCE 200809L

#include <redislock.h>

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TTL_MS 30000
#define MAX_BATCH 100000

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* One cycle; 0, or the status of the call that failed (message in err). */
static int cycle(const redislock_client *client, const char *key, size_t len, char *err, size_t cap)
{
    redislock_lock *lock = NULL;
    redislock_status st = redislock_acquire(client, (const uint8_t *)key, len, TTL_MS, 0, NULL, 0, &lock);
    const char *what = "redislock_acquire";
    if (st == REDISLOCK_OK) {
        st = redislock_release(lock);
        what = "redislock_release";
    }
    if (st != REDISLOCK_OK) {
        char msg[256];
        msg[0] = '\0';
        redislock_last_error(msg, sizeof msg);
        for (char *p = msg; *p; p++) {
            if (*p == '\n' || *p == '\r') *p = ' ';
        }
        snprintf(err, cap, "%s: %s: %s", what, redislock_status_str((int)st), msg);
        return (int)st;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: cycles PORT KEY\n");
        return 2;
    }
    const char *key = argv[2];
    const size_t len = strlen(key);
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%s", argv[1]);
    redislock_client *client = NULL;
    char err[512];
    if (redislock_client_open(url, &client) != REDISLOCK_OK) {
        redislock_last_error(err, sizeof err);
        fprintf(stderr, "cycles: open %s: %s\n", url, err);
        return 1;
    }
    for (int i = 0; i < 200; i++) {
        if (cycle(client, key, len, err, sizeof err)) {
            fprintf(stderr, "cycles: warm-up: %s\n", err);
            return 1;
        }
    }
    static uint64_t lat[MAX_BATCH];
    printf("ready\n");
    fflush(stdout);
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "quit", 4) == 0) break;
        long n = strtol(line, NULL, 10);
        if (n <= 0 || n > MAX_BATCH) {
            printf("error bad batch size %s", line);
            fflush(stdout);
            continue;
        }
        int failed = 0;
        uint64_t c0 = cpu_ns();
        uint64_t t0 = now_ns();
        for (long i = 0; i < n && !failed; i++) {
            uint64_t t = now_ns();
            failed = cycle(client, key, len, err, sizeof err);
            lat[i] = now_ns() - t;
        }
        uint64_t wall = now_ns() - t0;
        uint64_t cpu = cpu_ns() - c0;
        if (failed) {
            printf("error %s\n", err);
        } else {
            qsort(lat, (size_t)n, sizeof lat[0], cmp_u64);
            printf("%" PRIu64 " %" PRIu64 " %" PRIu64 "\n", wall / (uint64_t)n, lat[n / 2], cpu / (uint64_t)n);
        }
        fflush(stdout);
    }
    redislock_client_free(client);
    return 0;
}
