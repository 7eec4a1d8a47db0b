/*
 * One chaos worker in C (started by tests/chaos/chaos.py, not by hand).
 *
 *   worker URL DIR ID TTL_MS WAIT_MS      (URL: several separated by spaces: Redlock)
 *
 * Creates DIR/ready-ID once its client is open, waits for DIR/go, then
 * loops until DIR/stop exists: a fenced acquisition of the lock "chaos"
 * (TTL_MS, waiting at most WAIT_MS), a critical section on the file store
 * DIR/store ("counter fence", guarded by flock on DIR/store.lock, the
 * increment deliberately split over two flock sections 1 ms apart), then
 * the release. One JSON line per attempt goes to DIR/events-ID.jsonl, with
 * CLOCK_MONOTONIC nanoseconds: t0 acquire called, t1 acquire returned,
 * t2 release called, t3 release returned. The same protocol as worker.py
 * and worker.php.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include <redislock.h>

static const char NAME[] = "chaos";

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

static bool exists(const char *path)
{
    return access(path, F_OK) == 0;
}

/* The error class every worker reports for a status. */
static const char *err_class(redislock_status s)
{
    switch (s) {
    case REDISLOCK_NOT_ACQUIRED: return "timeout";
    case REDISLOCK_NOT_OWNER: return "not_owner";
    case REDISLOCK_CONNECTION: return "connection";
    case REDISLOCK_INVALID_ARGUMENT: return "invalid_argument";
    case REDISLOCK_WRONG_TYPE: return "wrong_type";
    case REDISLOCK_NO_QUORUM: return "no_quorum";
    case REDISLOCK_SERVER: return "server";
    case REDISLOCK_INTERNAL: return "internal";
    case REDISLOCK_UNCONFIRMED: return "unconfirmed";
    default: return "other";
    }
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void last_error(char *buf, size_t cap)
{
    if (redislock_last_error(buf, cap) == 0)
        snprintf(buf, cap, "(no message)");
}

/* The store: "counter fence\n", read and written under flock(lockfd). */
static bool store_read(const char *path, long long *counter, unsigned long long *fence)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    int n = fscanf(f, "%lld %llu", counter, fence);
    fclose(f);
    return n == 2;
}

static bool store_write(const char *path, long long counter, unsigned long long fence)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    bool ok = fprintf(f, "%lld %llu\n", counter, fence) > 0;
    return fclose(f) == 0 && ok;
}

struct cs_result {
    const char *outcome; /* "ok", "refused" or "store_error" */
    unsigned long long stored;
    bool interleaved;
};

static struct cs_result critical_section(int lockfd, const char *store, unsigned long long fence)
{
    struct cs_result r = {"store_error", 0, false};
    long long c1 = 0, c2 = 0;
    unsigned long long f1 = 0, f2 = 0;

    flock(lockfd, LOCK_EX);
    bool ok = store_read(store, &c1, &f1);
    flock(lockfd, LOCK_UN);
    if (!ok)
        return r;
    if (fence <= f1) {
        r.outcome = "refused";
        r.stored = f1;
        return r;
    }
    sleep_us(1000); /* the increment is not atomic: a second owner loses an update */
    flock(lockfd, LOCK_EX);
    if (!store_read(store, &c2, &f2)) {
        r.outcome = "store_error";
    } else if (fence <= f2) {
        r.outcome = "refused";
        r.stored = f2;
    } else if (store_write(store, c1 + 1, fence)) {
        r.outcome = "ok";
        r.stored = f2;
        r.interleaved = c2 != c1;
    }
    flock(lockfd, LOCK_UN);
    return r;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: %s URL DIR ID TTL_MS WAIT_MS\n", argv[0]);
        return 2;
    }
    const char *url = argv[1], *dir = argv[2], *id = argv[3];
    uint64_t ttl_ms = strtoull(argv[4], NULL, 10);
    int64_t wait_ms = strtoll(argv[5], NULL, 10);

    char events[4096], ready[4096], go[4096], stop[4096], store[4096], lockpath[4096];
    snprintf(events, sizeof events, "%s/events-%s.jsonl", dir, id);
    snprintf(ready, sizeof ready, "%s/ready-%s", dir, id);
    snprintf(go, sizeof go, "%s/go", dir);
    snprintf(stop, sizeof stop, "%s/stop", dir);
    snprintf(store, sizeof store, "%s/store", dir);
    snprintf(lockpath, sizeof lockpath, "%s/store.lock", dir);

    FILE *out = fopen(events, "w");
    int lockfd = open(lockpath, O_RDWR | O_CREAT, 0644);
    if (!out || lockfd < 0) {
        perror("worker: open");
        return 1;
    }
    setvbuf(out, NULL, _IOLBF, 0);

    /* Several URLs separated by spaces: Redlock. */
    char urlbuf[4096];
    const char *urls[16];
    size_t nurls = 0;
    snprintf(urlbuf, sizeof urlbuf, "%s", url);
    for (char *save = NULL, *u = strtok_r(urlbuf, " ", &save); u && nurls < 16; u = strtok_r(NULL, " ", &save)) {
        urls[nurls++] = u;
    }
    redislock_client *client = NULL;
    enum redislock_status opened = nurls > 1 ? redislock_client_open_redlock(urls, nurls, &client)
                                             : redislock_client_open(url, &client);
    if (opened != REDISLOCK_OK) {
        char msg[1024];
        last_error(msg, sizeof msg);
        fprintf(stderr, "worker %s: cannot open %s: %s\n", id, url, msg);
        return 1;
    }
    FILE *r = fopen(ready, "w");
    if (r)
        fclose(r);
    for (uint64_t deadline = now_ns() + 120000000000ull; !exists(go); sleep_us(1000)) {
        if (now_ns() > deadline)
            return 1;
    }

    char msg[1024];
    while (!exists(stop)) {
        redislock_lock *lock = NULL;
        uint64_t t0 = now_ns();
        redislock_status s = redislock_acquire_fenced(client, (const uint8_t *)NAME, sizeof NAME - 1,
                                                      ttl_ms, wait_ms, NULL, 0, &lock);
        uint64_t t1 = now_ns();
        if (s != REDISLOCK_OK) {
            last_error(msg, sizeof msg);
            fprintf(out, "{\"w\":\"%s\",\"lang\":\"c\",\"t0\":%llu,\"t1\":%llu,\"ok\":false,\"err\":\"%s\",\"msg\":",
                    id, (unsigned long long)t0, (unsigned long long)t1, err_class(s));
            json_str(out, msg);
            fputs("}\n", out);
            if (s != REDISLOCK_NOT_ACQUIRED)
                sleep_us(10000); /* an error that comes at once must not spin */
            continue;
        }
        unsigned long long fence = redislock_lock_fence(lock);
        struct cs_result cs = critical_section(lockfd, store, fence);
        uint64_t t2 = now_ns();
        redislock_status rs = redislock_release(lock);
        uint64_t t3 = now_ns();
        fprintf(out,
                "{\"w\":\"%s\",\"lang\":\"c\",\"t0\":%llu,\"t1\":%llu,\"ok\":true,\"fence\":%llu,"
                "\"cs\":\"%s\",\"stored\":%llu,\"interleaved\":%s,\"t2\":%llu,\"t3\":%llu,\"rel\":\"%s\"",
                id, (unsigned long long)t0, (unsigned long long)t1, fence, cs.outcome, cs.stored,
                cs.interleaved ? "true" : "false", (unsigned long long)t2, (unsigned long long)t3,
                rs == REDISLOCK_OK ? "ok" : err_class(rs));
        if (rs != REDISLOCK_OK) {
            last_error(msg, sizeof msg);
            fputs(",\"rel_msg\":", out);
            json_str(out, msg);
        }
        fputs("}\n", out);
    }
    redislock_client_free(client);
    fclose(out);
    close(lockfd);
    return 0;
}
