/*
 * Shared by bench/c/cost.c and bench/c/throughput.c: the hand-written
 * helper over hiredis, the library's default cycle through the C API, and
 * snapshots of the server's INFO (CPU, commands, commandstats).
 *
 * The helper is what users write by hand and replace with redislock:
 *   acquire: SET key token NX PX ttl
 *   release: EVALSHA of "if get(key) == token then del(key)" (loaded once)
 * with a fresh random token per cycle, as long as the library's own.
 *
 * Nothing here names a command the library sends: what the library does is
 * whatever the linked libredislock does, read back from the server.
 */
#ifndef REDISLOCK_BENCH_H
#define REDISLOCK_BENCH_H

#define _POSIX_C_SOURCE 200809L

#include <hiredis.h>
#include <redislock.h>

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RELEASE_LUA \
    "if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end"
#define TTL_MS 10000
#define MAX_TOKEN 256
#define MAX_CMDS 256

static inline void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CPU time of this process, every thread (the library's own included). */
static inline double process_cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static inline void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static inline redisContext *connect_or_die(const char *host, int port)
{
    redisContext *c = redisConnect(host, port);
    if (c == NULL || c->err) {
        die("cannot connect to %s:%d: %s", host, port, c ? c->errstr : "out of memory");
    }
    return c;
}

static inline redisReply *command_or_die(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    if (r == NULL) {
        die("%s: %s", fmt, c->errstr);
    }
    if (r->type == REDIS_REPLY_ERROR) {
        die("%s: %s", fmt, r->str);
    }
    return r;
}

/* ---- the library, through its C API -------------------------------- */

static inline void ours_check(redislock_status s, const char *what)
{
    if (s != REDISLOCK_OK) {
        char msg[512];
        redislock_last_error(msg, sizeof msg);
        die("%s: %s: %s", what, redislock_status_str((int)s), msg);
    }
}

/*
 * One cycle as the README's C example does it: acquire (wait_ms 0 tries
 * once; > 0 waits as the README's examples allow), optionally read the
 * fencing number, release.
 */
static inline void ours_cycle(const redislock_client *client, const char *key, size_t key_len, int64_t wait_ms,
                       bool fenced)
{
    redislock_lock *lock = NULL;
    /* A fenced lock draws its fence in the acquire: reading it is free. */
    ours_check((fenced ? redislock_acquire_fenced : redislock_acquire)(client, (const uint8_t *)key, key_len,
                                                                      TTL_MS, wait_ms, NULL, 0, &lock),
               "redislock_acquire");
    if (fenced && redislock_lock_fence(lock) == 0) {
        die("redislock_lock_fence gave 0");
    }
    ours_check(redislock_release(lock), "redislock_release");
}

/* The length of the library's own random token, for the helper's. */
static inline size_t ours_token_len(const redislock_client *client)
{
    redislock_lock *lock = NULL;
    ours_check(redislock_acquire(client, (const uint8_t *)"bench:token", 11, TTL_MS, 0, NULL, 0, &lock),
               "redislock_acquire");
    size_t n = redislock_lock_token(lock, NULL, 0);
    ours_check(redislock_release(lock), "redislock_release");
    return n > 0 && n < MAX_TOKEN ? n : 32;
}

/* ---- the hand-written helper over hiredis -------------------------- */

typedef struct helper {
    redisContext *c;
    char sha[41];
    uint64_t rng[2];
    size_t token_len;
} helper;

static inline uint64_t xorshift128p(uint64_t s[2])
{
    uint64_t a = s[0];
    const uint64_t b = s[1];
    s[0] = b;
    a ^= a << 23;
    s[1] = a ^ b ^ (a >> 17) ^ (b >> 26);
    return s[1] + b;
}

static inline void helper_open(helper *h, const char *host, int port, size_t token_len, uint64_t seed)
{
    h->c = connect_or_die(host, port);
    redisReply *r = command_or_die(h->c, "SCRIPT LOAD %s", RELEASE_LUA);
    snprintf(h->sha, sizeof h->sha, "%s", r->str);
    freeReplyObject(r);
    h->rng[0] = seed ^ 0x9e3779b97f4a7c15u;
    h->rng[1] = (uint64_t)now_ns() ^ (seed << 1) ^ 1u;
    h->token_len = token_len;
}

static inline void helper_close(helper *h)
{
    redisFree(h->c);
}

/* A fresh random token: hex digits of a fast generator. */
static inline void helper_token(helper *h, char *tok)
{
    static const char hex[] = "0123456789abcdef";
    uint64_t x = 0;
    for (size_t i = 0; i < h->token_len; i++) {
        if (i % 16 == 0) {
            x = xorshift128p(h->rng);
        }
        tok[i] = hex[x & 15];
        x >>= 4;
    }
}

static inline void helper_cycle(helper *h, const char *key, size_t key_len)
{
    char tok[MAX_TOKEN];
    helper_token(h, tok);
    redisReply *r = redisCommand(h->c, "SET %b %b NX PX %d", key, key_len, tok, h->token_len, TTL_MS);
    if (r == NULL || r->type != REDIS_REPLY_STATUS || strcmp(r->str, "OK") != 0) {
        die("helper SET NX: %s", r ? (r->str ? r->str : "not acquired") : h->c->errstr);
    }
    freeReplyObject(r);
    r = redisCommand(h->c, "EVALSHA %s 1 %b %b", h->sha, key, key_len, tok, h->token_len);
    if (r == NULL || r->type != REDIS_REPLY_INTEGER || r->integer != 1) {
        die("helper EVALSHA: %s", r ? (r->str ? r->str : "not released") : h->c->errstr);
    }
    freeReplyObject(r);
}

/* The helper with the server's own compare-and-delete (DELIFEQ, Valkey
 * 9): what a hand-written helper costs where no script is needed. */
static inline void native_cycle(helper *h, const char *key, size_t key_len)
{
    char tok[MAX_TOKEN];
    helper_token(h, tok);
    redisReply *r = redisCommand(h->c, "SET %b %b NX PX %d", key, key_len, tok, h->token_len, TTL_MS);
    if (r == NULL || r->type != REDIS_REPLY_STATUS || strcmp(r->str, "OK") != 0) {
        die("native SET NX: %s", r ? (r->str ? r->str : "not acquired") : h->c->errstr);
    }
    freeReplyObject(r);
    r = redisCommand(h->c, "DELIFEQ %b %b", key, key_len, tok, h->token_len);
    if (r == NULL || r->type != REDIS_REPLY_INTEGER || r->integer != 1) {
        die("native DELIFEQ: %s", r ? (r->str ? r->str : "not released") : h->c->errstr);
    }
    freeReplyObject(r);
}

/* Whether the server has DELIFEQ (Valkey 9): an unknown command is an error. */
static inline bool has_delifeq(helper *h)
{
    redisReply *r = redisCommand(h->c, "DELIFEQ bench:probe:delifeq x");
    if (r == NULL) {
        die("DELIFEQ probe: %s", h->c->errstr);
    }
    bool yes = r->type == REDIS_REPLY_INTEGER;
    freeReplyObject(r);
    return yes;
}

/* ---- INFO snapshots ------------------------------------------------- */

typedef struct cmdstat {
    char name[64];
    uint64_t calls;
    uint64_t usec;
} cmdstat;

typedef struct snapshot {
    double cpu_us;       /* used_cpu_sys + used_cpu_user, the whole process */
    uint64_t commands;   /* total_commands_processed */
    int n;
    cmdstat cmd[MAX_CMDS];
} snapshot;

static inline const char *info_field(const char *text, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = text; (p = strstr(p, name)) != NULL; p += len) {
        if ((p == text || p[-1] == '\n') && p[len] == ':') {
            return p + len + 1;
        }
    }
    return NULL;
}

/* One INFO call: the same single command before and after every batch. */
static inline void take_snapshot(redisContext *admin, snapshot *s)
{
    redisReply *r = command_or_die(admin, "INFO cpu stats commandstats");
    const char *sys = info_field(r->str, "used_cpu_sys");
    const char *user = info_field(r->str, "used_cpu_user");
    const char *cmds = info_field(r->str, "total_commands_processed");
    if (!sys || !user || !cmds) {
        die("INFO lacks used_cpu_sys, used_cpu_user or total_commands_processed");
    }
    s->cpu_us = 1e6 * (strtod(sys, NULL) + strtod(user, NULL));
    s->commands = strtoull(cmds, NULL, 10);
    s->n = 0;
    for (const char *p = r->str; (p = strstr(p, "\ncmdstat_")) != NULL && s->n < MAX_CMDS;) {
        p += 9;
        const char *colon = strchr(p, ':');
        const char *calls = colon ? strstr(colon, "calls=") : NULL;
        const char *usec = colon ? strstr(colon, "usec=") : NULL;
        if (!colon || !calls || !usec || (size_t)(colon - p) >= sizeof s->cmd[0].name) {
            continue;
        }
        cmdstat *c = &s->cmd[s->n++];
        memcpy(c->name, p, (size_t)(colon - p));
        c->name[colon - p] = 0;
        c->calls = strtoull(calls + 6, NULL, 10);
        c->usec = strtoull(usec + 5, NULL, 10);
    }
    freeReplyObject(r);
}

static inline const cmdstat *find_cmd(const snapshot *s, const char *name)
{
    for (int i = 0; i < s->n; i++) {
        if (strcmp(s->cmd[i].name, name) == 0) {
            return &s->cmd[i];
        }
    }
    return NULL;
}

/* "redis 7.0.15" or "valkey 8.1.8", from INFO server. */
static inline void server_name(redisContext *admin, char *out, size_t cap)
{
    redisReply *r = command_or_die(admin, "INFO server");
    const char *vk = info_field(r->str, "valkey_version");
    const char *rd = info_field(r->str, "redis_version");
    const char *v = vk ? vk : rd;
    size_t n = v ? strcspn(v, "\r\n") : 0;
    snprintf(out, cap, "%s %.*s", vk ? "valkey" : "redis", (int)n, v ? v : "");
    freeReplyObject(r);
}

/* ---- JSON output ---------------------------------------------------- */

static inline void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            fprintf(f, "\\%c", ch);
        } else if (ch < 0x20 || ch >= 0x7f) {
            fprintf(f, "\\u%04x", ch);
        } else {
            fputc(ch, f);
        }
    }
    fputc('"', f);
}

static inline void json_list(FILE *f, const char *name, const double *v, int n)
{
    fprintf(f, ", \"%s\": [", name);
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s%.4g", i ? ", " : "", v[i]);
    }
    fputc(']', f);
}

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v. */
static inline double median_sorted(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static inline double median(const double *v, int n)
{
    double *s = malloc(sizeof *s * (size_t)(n ? n : 1));
    memcpy(s, v, sizeof *s * (size_t)n);
    double m = median_sorted(s, n);
    free(s);
    return m;
}

/* "name": {"median": m, "min": a, "max": b} */
static inline void json_summary(FILE *f, const char *name, const double *v, int n)
{
    double *s = malloc(sizeof *s * (size_t)(n ? n : 1));
    memcpy(s, v, sizeof *s * (size_t)n);
    double m = median_sorted(s, n);
    fprintf(f, ", \"%s\": {\"median\": %.4g, \"min\": %.4g, \"max\": %.4g}", name, m, n ? s[0] : 0,
            n ? s[n - 1] : 0);
    free(s);
}

#endif /* REDISLOCK_BENCH_H */
