/*
 * Server throughput at scale: many clients (processes x threads) run
 * uncontended lock cycles on many names against one server, to keep it
 * busy; what counts is lock cycles per second of the server's CPU time.
 *
 *   throughput --port P [--host H] [--procs N] [--threads T] [--seconds S]
 *              [--pairs R] [--names K] [--out FILE]
 *
 * Each pair runs both sides one after the other, in alternating order:
 *   helper  every thread has its own hiredis connection: SET key tok NX PX
 *           ttl, then EVALSHA compare-and-delete
 *   ours    every process has one redislock_client shared by its threads:
 *           redislock_acquire(wait_ms 0) + redislock_release
 * Thread t of process p cycles over the names tp:p:t:0 .. tp:p:t:K-1, so no
 * two threads ever want the same lock. Every process connects and warms
 * up first; then the parent reads the server's INFO, lets all threads go
 * for S seconds, collects their counts and reads INFO again (one INFO per
 * side and pair, against seconds of CPU: not corrected for). Per side:
 * cycles / (used_cpu_sys + used_cpu_user delta), the server's CPU share of
 * one core over the window, commands per cycle; per pair the ratio ours /
 * helper of cycles per server CPU second. One JSON line.
 */
#include "bench.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>

enum impl { HELPER, OURS };
static const char *const IMPL[2] = {"helper", "ours"};

typedef struct config {
    const char *host;
    int port;
    int procs, threads, names;
    size_t token_len; /* the library's, for the helper's tokens */
    double seconds;
} config;

static atomic_int stop_flag;
static pthread_barrier_t ready, go;

typedef struct worker {
    const config *cfg;
    enum impl impl;
    const redislock_client *client;
    helper h;
    char (*names)[48];
    uint64_t count;
    pthread_t thread;
} worker;

static void cycle(worker *w, const char *key)
{
    size_t len = strlen(key);
    if (w->impl == OURS) {
        ours_cycle(w->client, key, len, 0, false);
    } else {
        helper_cycle(&w->h, key, len);
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    for (int i = 0; i < 20; i++) { /* the connection, the script cache */
        cycle(w, w->names[i % w->cfg->names]);
    }
    pthread_barrier_wait(&ready);
    pthread_barrier_wait(&go);
    uint64_t n = 0;
    int i = 0;
    while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
        cycle(w, w->names[i]);
        i = i + 1 == w->cfg->names ? 0 : i + 1;
        n++;
    }
    w->count = n;
    return NULL;
}

static void read_exact(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r <= 0) {
            die("a client process died (see above)");
        }
        p += r;
        n -= (size_t)r;
    }
}

static void write_exact(int fd, const void *buf, size_t n)
{
    if (write(fd, buf, n) != (ssize_t)n) {
        die("cannot write to a pipe");
    }
}

/* One client process: connect, warm up, say ready, run on "go", report. */
static void child(const config *cfg, enum impl impl, int proc, int up, int down)
{
    redislock_client *client = NULL;
    if (impl == OURS) {
        char url[300];
        snprintf(url, sizeof url, "redis://%s:%d/0", cfg->host, cfg->port);
        ours_check(redislock_client_open(url, &client), "redislock_client_open");
    }
    worker *w = calloc((size_t)cfg->threads, sizeof *w);
    pthread_barrier_init(&ready, NULL, (unsigned)cfg->threads + 1);
    pthread_barrier_init(&go, NULL, (unsigned)cfg->threads + 1);
    atomic_store(&stop_flag, 0);
    for (int t = 0; t < cfg->threads; t++) {
        w[t].cfg = cfg;
        w[t].impl = impl;
        w[t].client = client;
        w[t].names = calloc((size_t)cfg->names, sizeof w[t].names[0]);
        for (int i = 0; i < cfg->names; i++) {
            snprintf(w[t].names[i], sizeof w[t].names[0], "tp:%d:%d:%d", proc, t, i);
        }
        if (impl == HELPER) {
            helper_open(&w[t].h, cfg->host, cfg->port, cfg->token_len, ((uint64_t)proc << 32) ^ (uint64_t)t);
        }
        if (pthread_create(&w[t].thread, NULL, worker_main, &w[t]) != 0) {
            die("pthread_create");
        }
    }
    pthread_barrier_wait(&ready);
    char c = 'r';
    write_exact(up, &c, 1);
    read_exact(down, &c, 1);
    pthread_barrier_wait(&go);
    sleep_ms((unsigned)(cfg->seconds * 1000));
    atomic_store(&stop_flag, 1);
    uint64_t sum = 0;
    for (int t = 0; t < cfg->threads; t++) {
        pthread_join(w[t].thread, NULL);
        sum += w[t].count;
    }
    write_exact(up, &sum, sizeof sum);
    read_exact(down, &c, 1); /* disconnect only once the parent read INFO */
    for (int t = 0; t < cfg->threads; t++) {
        if (impl == HELPER) {
            helper_close(&w[t].h);
        }
        free(w[t].names);
    }
    free(w);
    redislock_client_free(client);
    _exit(0);
}

typedef struct result {
    double cycles, cpu_us, wall_s, commands;
} result;

static result phase(const config *cfg, redisContext *admin, enum impl impl)
{
    int up[64][2], down[64][2];
    pid_t pid[64];
    for (int p = 0; p < cfg->procs; p++) {
        if (pipe(up[p]) != 0 || pipe(down[p]) != 0) {
            die("pipe");
        }
        fflush(NULL);
        pid[p] = fork();
        if (pid[p] < 0) {
            die("fork");
        }
        if (pid[p] == 0) {
            child(cfg, impl, p, up[p][1], down[p][0]);
        }
    }
    char c;
    for (int p = 0; p < cfg->procs; p++) {
        read_exact(up[p][0], &c, 1);
    }
    static snapshot a, b;
    take_snapshot(admin, &a);
    uint64_t t0 = now_ns();
    for (int p = 0; p < cfg->procs; p++) {
        write_exact(down[p][1], "g", 1);
    }
    result r = {0, 0, 0, 0};
    for (int p = 0; p < cfg->procs; p++) {
        uint64_t n;
        read_exact(up[p][0], &n, sizeof n);
        r.cycles += (double)n;
    }
    r.wall_s = (double)(now_ns() - t0) / 1e9;
    take_snapshot(admin, &b);
    for (int p = 0; p < cfg->procs; p++) {
        write_exact(down[p][1], "x", 1);
        int status;
        waitpid(pid[p], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            die("a %s client process failed", IMPL[impl]);
        }
        close(up[p][0]), close(up[p][1]), close(down[p][0]), close(down[p][1]);
    }
    r.cpu_us = b.cpu_us - a.cpu_us;
    r.commands = (double)(b.commands - a.commands - 1); /* less the first INFO */
    return r;
}

int main(int argc, char **argv)
{
    config cfg = {"127.0.0.1", 0, 4, 8, 1000, 32, 3.0};
    int pairs = 4;
    const char *out_path = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--host") == 0) {
            cfg.host = argv[i + 1];
        } else if (strcmp(argv[i], "--port") == 0) {
            cfg.port = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--procs") == 0) {
            cfg.procs = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--threads") == 0) {
            cfg.threads = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--names") == 0) {
            cfg.names = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--seconds") == 0) {
            cfg.seconds = atof(argv[i + 1]);
        } else if (strcmp(argv[i], "--pairs") == 0) {
            pairs = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--out") == 0) {
            out_path = argv[i + 1];
        } else {
            die("unknown option %s", argv[i]);
        }
    }
    if (cfg.port <= 0 || cfg.procs < 1 || cfg.procs > 64 || cfg.threads < 1 || cfg.names < 20 || pairs < 1 ||
        pairs > 1000 || cfg.seconds <= 0) {
        die("usage: throughput --port P [--host H] [--procs N<=64] [--threads T] [--seconds S] [--pairs R] "
            "[--names K>=20] [--out FILE]");
    }
    redisContext *admin = connect_or_die(cfg.host, cfg.port);
    char server[64];
    server_name(admin, server, sizeof server);
    {
        char url[300];
        redislock_client *client = NULL;
        snprintf(url, sizeof url, "redis://%s:%d/0", cfg.host, cfg.port);
        ours_check(redislock_client_open(url, &client), "redislock_client_open");
        cfg.token_len = ours_token_len(client);
        redislock_client_free(client);
    }
    static result res[2][1000];
    for (int r = 0; r < pairs; r++) {
        for (int j = 0; j < 2; j++) {
            enum impl impl = (enum impl)((r + j) % 2);
            res[impl][r] = phase(&cfg, admin, impl);
            const result *x = &res[impl][r];
            fprintf(stderr, "pair %d %s: %.0f cycles/s, %.0f cycles per server CPU second, server CPU %.0f %%\n", r,
                    IMPL[impl], x->cycles / x->wall_s, x->cycles / (x->cpu_us / 1e6),
                    100 * x->cpu_us / 1e6 / x->wall_s);
        }
    }
    FILE *out = out_path ? fopen(out_path, "a") : NULL;
    if (out_path && !out) {
        die("cannot open %s", out_path);
    }
    static double v[9][1000];
    for (int r = 0; r < pairs; r++) {
        for (int i = 0; i < 2; i++) {
            const result *x = &res[i][r];
            v[i * 4 + 0][r] = x->cycles / (x->cpu_us / 1e6);
            v[i * 4 + 1][r] = x->cycles / x->wall_s;
            v[i * 4 + 2][r] = 100 * x->cpu_us / 1e6 / x->wall_s;
            v[i * 4 + 3][r] = x->commands / x->cycles;
        }
        v[8][r] = v[4][r] / v[0][r];
    }
    static const char *const F[9] = {"helper_cycles_per_cpu_s", "helper_cycles_per_s", "helper_server_cpu_pct",
                                     "helper_commands", "ours_cycles_per_cpu_s", "ours_cycles_per_s",
                                     "ours_server_cpu_pct", "ours_commands", "ratio"};
    for (FILE *f = stdout; f; f = (f == stdout ? out : NULL)) {
        fprintf(f, "{\"bench\": \"throughput\", \"server\": ");
        json_string(f, server);
        fprintf(f, ", \"procs\": %d, \"threads\": %d, \"names\": %d, \"seconds\": %.1f, \"pairs\": %d, \"library\": \"%s\"",
                cfg.procs, cfg.threads, cfg.names, cfg.seconds, pairs, redislock_version());
        for (int i = 0; i < 9; i++) {
            json_list(f, F[i], v[i], pairs);
        }
        fputs("}\n", f);
    }
    if (out) {
        fclose(out);
    }
    redisFree(admin);
    return 0;
}
