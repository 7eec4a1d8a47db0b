/*
 * The behaviour table's scenarios in C (tests/behaviour/run.py runs it and
 * says what each line means). A scenario whose call C does not have prints
 * no line: ttl-default and wait-default (redislock_acquire requires ttl_ms
 * and wait_ms), the reads after a release (redislock_release frees the
 * handle), name (no accessor), scoped-renews (no scoped helper),
 * timeout-option and timeout-both (no client options: the timeouts are the
 * URL's).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "redislock.h"

static const char *url(void) {
    return getenv("BEHAVIOUR_URL");
}

/* The enum's name of a status: what the C column shows. */
static const char *status_name(redislock_status s) {
    switch (s) {
    case REDISLOCK_OK: return "REDISLOCK_OK";
    case REDISLOCK_NOT_ACQUIRED: return "REDISLOCK_NOT_ACQUIRED";
    case REDISLOCK_NOT_OWNER: return "REDISLOCK_NOT_OWNER";
    case REDISLOCK_CONNECTION: return "REDISLOCK_CONNECTION";
    case REDISLOCK_INVALID_ARGUMENT: return "REDISLOCK_INVALID_ARGUMENT";
    case REDISLOCK_WRONG_TYPE: return "REDISLOCK_WRONG_TYPE";
    case REDISLOCK_NO_QUORUM: return "REDISLOCK_NO_QUORUM";
    case REDISLOCK_SERVER: return "REDISLOCK_SERVER";
    case REDISLOCK_INTERNAL: return "REDISLOCK_INTERNAL";
    case REDISLOCK_UNCONFIRMED: return "REDISLOCK_UNCONFIRMED";
    case REDISLOCK_CANCELLED: return "REDISLOCK_CANCELLED";
    }
    return "unknown status";
}

static void say(const char *id, const char *value) {
    printf("%s\t%s\n", id, value);
    fflush(stdout);
}

/* Ask the runner a question; its one-line answer goes into buf. */
static void ask(const char *question, char *buf, size_t cap) {
    printf("? %s\n", question);
    fflush(stdout);
    if (!fgets(buf, (int)cap, stdin)) {
        buf[0] = '\0';
        return;
    }
    buf[strcspn(buf, "\n")] = '\0';
}

static long long pttl(const char *key) {
    char question[256], answer[64];
    snprintf(question, sizeof question, "pttl %s", key);
    ask(question, answer, sizeof answer);
    return strtoll(answer, NULL, 10);
}

static double seconds(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static redislock_status acquire(redislock_client *client, const char *key, uint64_t ttl_ms, int64_t wait_ms,
                                const char *token, redislock_lock **out) {
    return redislock_acquire(client, (const uint8_t *)key, strlen(key), ttl_ms, wait_ms,
                             (const uint8_t *)token, token ? strlen(token) : 0, out);
}

/* The status of opening a client on url and trying `key` once. */
static redislock_status try_once_on(const char *where, const char *key) {
    redislock_client *client = NULL;
    redislock_status s = redislock_client_open(where, &client);
    if (s != REDISLOCK_OK)
        return s;
    redislock_lock *lock = NULL;
    s = acquire(client, key, 30000, 0, NULL, &lock);
    redislock_lock_free(lock);
    redislock_client_free(client);
    return s;
}

static void ttl_unit(redislock_client *client) {
    redislock_lock *lock = NULL;
    redislock_status s = acquire(client, "behaviour:ttl-unit", 2000, -1, NULL, &lock);
    if (s != REDISLOCK_OK) {
        say("ttl-unit", status_name(s));
        return;
    }
    long long left = pttl("behaviour:ttl-unit");
    redislock_release(lock);
    char value[64];
    if (left > 1000 && left <= 2000)
        snprintf(value, sizeof value, "ms");
    else
        snprintf(value, sizeof value, "PTTL %lld", left);
    say("ttl-unit", value);
}

static void try_held(redislock_client *client) {
    redislock_lock *holder = NULL, *lock = NULL;
    redislock_status s = acquire(client, "behaviour:try-held", 30000, -1, NULL, &holder);
    if (s == REDISLOCK_OK)
        s = acquire(client, "behaviour:try-held", 30000, 0, NULL, &lock);
    redislock_lock_free(lock);
    redislock_lock_free(holder);
    say("try-held", status_name(s));
}

static void wait_timeout(redislock_client *client) {
    redislock_lock *holder = NULL, *lock = NULL;
    redislock_status s = acquire(client, "behaviour:wait-timeout", 30000, -1, NULL, &holder);
    if (s == REDISLOCK_OK)
        s = acquire(client, "behaviour:wait-timeout", 30000, 200, NULL, &lock);
    redislock_lock_free(lock);
    redislock_lock_free(holder);
    say("wait-timeout", s == REDISLOCK_OK ? "acquired" : status_name(s));
}

static void release_expired(redislock_client *client) {
    const char *key = "behaviour:release-expired";
    redislock_lock *lock = NULL, *other = NULL;
    redislock_status s = acquire(client, key, 200, -1, NULL, &lock);
    if (s != REDISLOCK_OK) {
        say("release-expired", status_name(s));
        return;
    }
    double deadline = seconds(CLOCK_MONOTONIC) + 10;
    while (pttl(key) != -2) {
        if (seconds(CLOCK_MONOTONIC) > deadline) {
            redislock_lock_free(lock);
            say("release-expired", "still there after 10 s");
            return;
        }
        sleep_ms(50);
    }
    s = acquire(client, key, 30000, 0, NULL, &other);
    if (s == REDISLOCK_OK)
        s = redislock_release(lock);
    else
        redislock_lock_free(lock);
    redislock_lock_free(other);
    say("release-expired", s == REDISLOCK_OK ? "released" : status_name(s));
}

static void unconfirmed(redislock_client *unused) {
    (void)unused;
    redislock_client *client = NULL;
    redislock_status s = redislock_client_open(getenv("BEHAVIOUR_CUTTER"), &client);
    if (s != REDISLOCK_OK) {
        say("unconfirmed", status_name(s));
        return;
    }
    redislock_lock *lock = NULL;
    s = acquire(client, "behaviour:unconfirmed", 30000, -1, "behaviour-unconfirmed", &lock);
    if (s == REDISLOCK_OK) {
        char answer[64];
        ask("arm behaviour-unconfirmed", answer, sizeof answer);
        s = redislock_release(lock);
    }
    redislock_client_free(client);
    say("unconfirmed", s == REDISLOCK_OK ? "released" : status_name(s));
}

static void fence_first(redislock_client *client) {
    redislock_lock *lock = NULL;
    redislock_status s = acquire(client, "behaviour:fence-first", 30000, -1, NULL, &lock);
    if (s != REDISLOCK_OK) {
        say("fence-first", status_name(s));
        return;
    }
    uint64_t fence = redislock_lock_fence(lock);
    redislock_release(lock);
    double off = (double)fence - seconds(CLOCK_REALTIME) * 1e6;
    char value[64];
    if (fence != 0 && off < 60e6 && off > -60e6)
        snprintf(value, sizeof value, "server µs");
    else
        snprintf(value, sizeof value, "%llu", (unsigned long long)fence);
    say("fence-first", value);
}

static void timeout_url(redislock_client *unused) {
    (void)unused;
    char where[512];
    snprintf(where, sizeof where, "%s?connect_timeout=300ms&command_timeout=300ms", getenv("BEHAVIOUR_SILENT"));
    double started = seconds(CLOCK_MONOTONIC);
    redislock_status s = try_once_on(where, "behaviour:timeout");
    double took = seconds(CLOCK_MONOTONIC) - started;
    char value[128];
    if (s == REDISLOCK_OK)
        snprintf(value, sizeof value, "acquired");
    else if (took < 1.9)
        snprintf(value, sizeof value, "%s", status_name(s));
    else
        snprintf(value, sizeof value, "after %.1f s: %s", took, status_name(s));
    say("timeout-url", value);
}

static void bad_ttl(redislock_client *client) {
    redislock_lock *lock = NULL;
    redislock_status s = acquire(client, "behaviour:bad-ttl", 0, -1, NULL, &lock);
    redislock_lock_free(lock);
    say("bad-ttl", s == REDISLOCK_OK ? "acquired" : status_name(s));
}

static void wrong_type(redislock_client *client) {
    redislock_lock *lock = NULL;
    redislock_status s = acquire(client, "behaviour:wrong-type", 30000, 0, NULL, &lock);
    redislock_lock_free(lock);
    say("wrong-type", s == REDISLOCK_OK ? "acquired" : status_name(s));
}

static void no_server(redislock_client *unused) {
    (void)unused;
    redislock_status s = try_once_on(getenv("BEHAVIOUR_DEAD"), "behaviour:no-server");
    say("no-server", s == REDISLOCK_OK ? "acquired" : status_name(s));
}

int main(void) {
    /* In the order of driver.py; the scenarios C has no call for are left out. */
    void (*scenarios[])(redislock_client *) = {
        ttl_unit, try_held, wait_timeout, release_expired, unconfirmed, fence_first,
        timeout_url, bad_ttl, wrong_type, no_server,
    };
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        redislock_client *client = NULL;
        redislock_status s = redislock_client_open(url(), &client);
        if (s != REDISLOCK_OK) {
            fprintf(stderr, "cannot open a client on %s: %s\n", url(), status_name(s));
            continue;
        }
        scenarios[i](client);
        redislock_client_free(client);
    }
    return 0;
}
