/*
 * Server cost and client speed of one uncontended lock cycle: the library
 * through its C API against the hand-written helper over hiredis, in one
 * process, on one server, in small interleaved batches.
 *
 *   cost --port P [--host H] [--pairs N] [--batch B] [--calibrate K] [--out FILE]
 *
 * Kinds of batch, one of each per round, their order rotated every round:
 *   helper   SET key tok NX PX ttl, then EVALSHA compare-and-delete (hiredis)
 *   ours     redislock_acquire(wait_ms 0) + redislock_release
 *   fenced   redislock_acquire_fenced(wait_ms 0), redislock_lock_fence,
 *            redislock_release
 *   waiting  redislock_acquire(wait_ms 10000) + redislock_release (a free lock)
 *   empty    no cycle: what one INFO call costs the server
 *   native   SET key tok NX PX ttl, then DELIFEQ key tok (hiredis): the
 *            helper with the server's own compare-and-delete, on servers
 *            that have it (Valkey 9); left out elsewhere
 *
 * Around every batch the server is read with one INFO call (chained: the
 * INFO after a batch is the one before the next), so every batch, the
 * empty ones included, carries exactly one INFO. Per batch, with the
 * median empty batch subtracted and the server's idle CPU rate (measured
 * first, sleeping between INFO calls) times the batch's duration too:
 *   cpu_us     used_cpu_sys + used_cpu_user of the server process
 *   cmd_us     commandstats usec of the commands clients sent: every
 *              command's usec, less the share of calls that ran inside a
 *              script or a MULTI/EXEC (their time is already in EVALSHA's,
 *              FCALL's or EXEC's usec); that share per command name is
 *              read from MONITOR in a calibration run of K cycles
 *   commands   total_commands_processed (counts script-inner calls too)
 *   requests   commands clients sent (commandstats calls less the inner share)
 *   wall_us    the batch's wall time on this side (client speed)
 *   client_cpu_us  this process's CPU time over the batch, every thread
 * all per cycle, and per round the ratios of each kind to the helper.
 * Prints one JSON line per kind (median, min and max over rounds; the
 * ratios of CPU, command time and speed of every round) and appends it to
 * FILE.
 */
#include "bench.h"

enum kind { EMPTY, HELPER, OURS, FENCED, WAITING, NATIVE, NKINDS };
static const char *const KIND[NKINDS] = {"empty", "helper", "ours", "fenced", "waiting", "native"};
static const char *const KEY[NKINDS] = {"",           "bench:cost:h", "bench:cost:o",
                                        "bench:cost:f", "bench:cost:w", "bench:cost:n"};
#define CYCLE_LINES 32

/* What one kind's cycle sent, per command name, from MONITOR. */
typedef struct calibration {
    int n;
    struct {
        char name[130];
        double sent;   /* by a client (top level, queued ones included) */
        double inner;  /* by a script */
        double queued; /* by a client inside MULTI ... EXEC */
    } e[MAX_CMDS];
    int cycles;
    int lines;
    char cycle[CYCLE_LINES][400]; /* the last cycle as the server saw it */
    int cycle_lines;
} calibration;

typedef struct bench {
    const char *host;
    int port;
    redisContext *admin;
    redislock_client *client;
    helper h;
} bench;

static void run(bench *b, enum kind k, int n)
{
    const char *key = KEY[k];
    size_t len = strlen(key);
    for (int i = 0; i < n; i++) {
        switch (k) {
        case HELPER:
            helper_cycle(&b->h, key, len);
            break;
        case OURS:
            ours_cycle(b->client, key, len, 0, false);
            break;
        case FENCED:
            ours_cycle(b->client, key, len, 0, true);
            break;
        case WAITING:
            ours_cycle(b->client, key, len, 10000, false);
            break;
        case NATIVE:
            native_cycle(&b->h, key, len);
            break;
        default:
            break;
        }
    }
}

/* The quoted words of a MONITOR line after "] ", lower-cased name. */
static int monitor_words(const char *p, char words[2][64])
{
    int n = 0;
    while (n < 2 && (p = strchr(p, '"')) != NULL) {
        const char *end = ++p;
        while (*end && *end != '"') {
            end += (*end == '\\' && end[1]) ? 2 : 1;
        }
        size_t len = (size_t)(end - p) < 63 ? (size_t)(end - p) : 63;
        for (size_t i = 0; i < len; i++) {
            words[n][i] = (char)(p[i] >= 'A' && p[i] <= 'Z' ? p[i] + 32 : p[i]);
        }
        words[n][len] = 0;
        n++;
        p = *end ? end + 1 : end;
    }
    return n;
}

static int calib_entry(calibration *c, const char *name)
{
    for (int i = 0; i < c->n; i++) {
        if (strcmp(c->e[i].name, name) == 0) {
            return i;
        }
    }
    if (c->n == MAX_CMDS) {
        die("too many command names in a cycle");
    }
    memset(&c->e[c->n], 0, sizeof c->e[0]);
    snprintf(c->e[c->n].name, sizeof c->e[0].name, "%s", name);
    return c->n++;
}

/*
 * Run K cycles of one kind under MONITOR, between two ECHO markers sent
 * on the admin connection, and count per command name what clients sent
 * and what scripts ran. MONITOR costs the server: these cycles are never
 * timed.
 */
static void calibrate(bench *b, enum kind k, int cycles, calibration *c)
{
    memset(c, 0, sizeof *c);
    c->cycles = cycles;
    redisContext *mon = connect_or_die(b->host, b->port);
    freeReplyObject(command_or_die(mon, "MONITOR"));
    char start[64], end[64];
    snprintf(start, sizeof start, "redislock-bench-start-%s", KIND[k]);
    snprintf(end, sizeof end, "redislock-bench-end-%s", KIND[k]);
    freeReplyObject(command_or_die(b->admin, "ECHO %s", start));
    run(b, k, cycles);
    freeReplyObject(command_or_die(b->admin, "ECHO %s", end));

    char admin[80] = "", multi[16][80];
    int nmulti = 0;
    static char lines[1 << 14][400];
    int nlines = 0;
    bool started = false;
    for (;;) {
        redisReply *r = NULL;
        if (redisGetReply(mon, (void **)&r) != REDIS_OK || r == NULL) {
            die("MONITOR: %s", mon->errstr);
        }
        if (r->type != REDIS_REPLY_STATUS) {
            freeReplyObject(r);
            continue;
        }
        /* 1795486895.616049 [0 127.0.0.1:59794] "evalsha" "b998..." "1" "k" "tok" */
        const char *open = strchr(r->str, '[');
        const char *close = open ? strchr(open, ']') : NULL;
        const char *sp = open ? strchr(open, ' ') : NULL;
        if (!close || !sp || sp > close) {
            freeReplyObject(r);
            continue;
        }
        char addr[80];
        snprintf(addr, sizeof addr, "%.*s", (int)(close - sp - 1), sp + 1);
        if (!started) {
            if (strstr(close, start)) {
                started = true;
                snprintf(admin, sizeof admin, "%s", addr);
            }
            freeReplyObject(r);
            continue;
        }
        if (strcmp(addr, admin) == 0) {
            bool done = strstr(close, end) != NULL;
            freeReplyObject(r);
            if (done) {
                break;
            }
            continue;
        }
        char words[2][64] = {"", ""};
        int nw = monitor_words(close, words);
        if (nw == 0) {
            freeReplyObject(r);
            continue;
        }
        char name[130];
        snprintf(name, sizeof name, "%s|%s", words[0], words[1]);
        bool inner = strcmp(addr, "lua") == 0;
        int m = -1;
        for (int i = 0; i < nmulti; i++) {
            if (strcmp(multi[i], addr) == 0) {
                m = i;
            }
        }
        bool queued = !inner && m >= 0 && strcmp(words[0], "exec") != 0 && strcmp(words[0], "discard") != 0;
        if (!inner && strcmp(words[0], "multi") == 0 && m < 0 && nmulti < 16) {
            snprintf(multi[nmulti++], sizeof multi[0], "%s", addr);
        } else if (!inner && m >= 0 && (strcmp(words[0], "exec") == 0 || strcmp(words[0], "discard") == 0)) {
            memmove(&multi[m], &multi[m + 1], sizeof multi[0] * (size_t)(nmulti - m - 1));
            nmulti--;
        }
        /* "client|setname" where the server keeps subcommands apart; the
         * name is checked against commandstats afterwards. */
        int e = calib_entry(c, nw > 1 ? name : words[0]);
        if (inner) {
            c->e[e].inner++;
        } else {
            c->e[e].sent++;
            c->e[e].queued += queued;
        }
        snprintf(lines[nlines % (1 << 14)], sizeof lines[0], "%s%s", inner ? "  (in a script) " : queued ? "  (queued) " : "",
                 close + 2);
        nlines++;
        freeReplyObject(r);
    }
    redisFree(mon);

    /* A "name|word" that commandstats does not know is a plain name. */
    snapshot *s = malloc(sizeof *s);
    take_snapshot(b->admin, s);
    for (int i = 0; i < c->n; i++) {
        char *bar = strchr(c->e[i].name, '|');
        char stat[130];
        snprintf(stat, sizeof stat, "%s", c->e[i].name);
        if (bar && !find_cmd(s, stat)) {
            *bar = 0;
        }
    }
    free(s);
    for (int i = 0; i < c->n; i++) { /* merge entries that became equal */
        for (int j = i + 1; j < c->n; j++) {
            if (strcmp(c->e[i].name, c->e[j].name) == 0) {
                c->e[i].sent += c->e[j].sent;
                c->e[i].inner += c->e[j].inner;
                c->e[i].queued += c->e[j].queued;
                c->e[j] = c->e[--c->n];
                j--;
            }
        }
    }
    c->lines = nlines;
    int per = nlines / cycles > 0 ? nlines / cycles : 1;
    c->cycle_lines = per < CYCLE_LINES ? per : CYCLE_LINES;
    for (int i = 0; i < c->cycle_lines; i++) {
        snprintf(c->cycle[i], sizeof c->cycle[0], "%s", lines[(nlines - per + i) % (1 << 14)]);
    }
}

typedef struct metrics {
    double cpu_us, cmd_us, commands, requests, wall_us, client_us;
} metrics;

/* A batch's totals from the INFO before and after it. */
static metrics delta(const snapshot *a, const snapshot *b, const calibration *c, uint64_t wall_ns)
{
    metrics m = {b->cpu_us - a->cpu_us, 0, (double)(b->commands - a->commands), 0, (double)wall_ns / 1e3, 0};
    for (int i = 0; i < b->n; i++) {
        const cmdstat *x = &b->cmd[i];
        if (strcmp(x->name, "info") == 0) {
            continue;
        }
        const cmdstat *y = find_cmd(a, x->name);
        double calls = (double)(x->calls - (y ? y->calls : 0));
        double usec = (double)(x->usec - (y ? y->usec : 0));
        double in_time = 0, inner = 0; /* shares of the calls */
        for (int j = 0; c && j < c->n; j++) {
            if (strcmp(c->e[j].name, x->name) == 0) {
                double all = c->e[j].sent + c->e[j].inner;
                in_time = all > 0 ? (c->e[j].inner + c->e[j].queued) / all : 0;
                inner = all > 0 ? c->e[j].inner / all : 0;
            }
        }
        m.cmd_us += usec * (1 - in_time);
        m.requests += calls * (1 - inner);
    }
    return m;
}

int main(int argc, char **argv)
{
    const char *out_path = NULL;
    bench b = {.host = "127.0.0.1", .port = 0};
    int pairs = 60, batch = 400, calib_cycles = 100;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--host") == 0) {
            b.host = argv[i + 1];
        } else if (strcmp(argv[i], "--port") == 0) {
            b.port = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--pairs") == 0) {
            pairs = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--batch") == 0) {
            batch = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--calibrate") == 0) {
            calib_cycles = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--out") == 0) {
            out_path = argv[i + 1];
        } else {
            die("unknown option %s", argv[i]);
        }
    }
    if (b.port <= 0 || pairs < 1 || batch < 1 || calib_cycles < 1) {
        die("usage: cost --port P [--host H] [--pairs N] [--batch B] [--calibrate K] [--out FILE]");
    }
    char url[300];
    snprintf(url, sizeof url, "redis://%s:%d/0", b.host, b.port);
    b.admin = connect_or_die(b.host, b.port);
    ours_check(redislock_client_open(url, &b.client), "redislock_client_open");
    helper_open(&b.h, b.host, b.port, ours_token_len(b.client), (uint64_t)getpid());
    char server[64];
    server_name(b.admin, server, sizeof server);
    int nk = has_delifeq(&b.h) ? NKINDS : NATIVE; /* kinds this server runs */

    for (int k = HELPER; k < nk; k++) { /* connections, script caches */
        run(&b, (enum kind)k, 300);
    }
    static calibration cal[NKINDS];
    for (int k = HELPER; k < nk; k++) {
        calibrate(&b, (enum kind)k, calib_cycles, &cal[k]);
    }

    /* One INFO's cost (back-to-back snapshots), then the idle rate. */
    static snapshot snap[2];
    enum { PRE = 20, IDLE = 5, IDLE_MS = 100 };
    double *empty[5];
    for (int f = 0; f < 5; f++) {
        empty[f] = calloc((size_t)(PRE + pairs), sizeof(double));
    }
    int nempty = 0;
    take_snapshot(b.admin, &snap[0]);
    for (int i = 0; i < PRE; i++) {
        take_snapshot(b.admin, &snap[(i + 1) % 2]);
        metrics m = delta(&snap[i % 2], &snap[(i + 1) % 2], NULL, 0);
        empty[0][nempty] = m.cpu_us, empty[1][nempty] = m.cmd_us, empty[2][nempty] = m.commands;
        empty[3][nempty] = m.requests, nempty++;
    }
    double info_cpu = median(empty[0], nempty);
    double idle[IDLE];
    for (int i = 0; i < IDLE; i++) {
        take_snapshot(b.admin, &snap[0]);
        uint64_t t = now_ns();
        sleep_ms(IDLE_MS);
        take_snapshot(b.admin, &snap[1]);
        double secs = (double)(now_ns() - t) / 1e9;
        idle[i] = (snap[1].cpu_us - snap[0].cpu_us - info_cpu) / secs;
    }
    double idle_rate = median(idle, IDLE); /* µs of CPU per second, INFO excluded */
    if (idle_rate < 0) {
        idle_rate = 0;
    }

    /* The rounds. */
    static metrics per[NKINDS][10000];
    if (pairs > 10000) {
        die("at most 10000 pairs");
    }
    for (int k = HELPER; k < nk; k++) { /* after MONITOR and the sleeps, unrecorded */
        run(&b, (enum kind)k, batch);
    }
    int cur = 0;
    take_snapshot(b.admin, &snap[cur]);
    for (int r = 0; r < pairs; r++) {
        for (int j = 0; j < nk; j++) {
            enum kind k = (enum kind)((r + j) % nk);
            double cpu = process_cpu_us();
            uint64_t t = now_ns();
            run(&b, k, k == EMPTY ? 0 : batch);
            uint64_t wall = now_ns() - t;
            cpu = process_cpu_us() - cpu;
            take_snapshot(b.admin, &snap[1 - cur]);
            per[k][r] = delta(&snap[cur], &snap[1 - cur], k == EMPTY ? NULL : &cal[k], wall);
            per[k][r].client_us = cpu;
            cur = 1 - cur;
        }
        metrics e = per[EMPTY][r];
        empty[0][nempty] = e.cpu_us, empty[1][nempty] = e.cmd_us, empty[2][nempty] = e.commands;
        empty[3][nempty] = e.requests, nempty++;
    }
    metrics base = {median(empty[0], nempty), median(empty[1], nempty), median(empty[2], nempty),
                    median(empty[3], nempty), 0, 0};

    FILE *out = out_path ? fopen(out_path, "a") : NULL;
    if (out_path && !out) {
        die("cannot open %s", out_path);
    }
    static double v[6][10000], ratio[5][10000];
    for (int k = HELPER; k < nk; k++) {
        for (int r = 0; r < pairs; r++) {
            const metrics *m = &per[k][r], *h = &per[HELPER][r];
            double x[5], y[5];
            const metrics *mm[2] = {m, h};
            double *xy[2] = {x, y};
            for (int s = 0; s < 2; s++) {
                xy[s][0] = (mm[s]->cpu_us - base.cpu_us - idle_rate * mm[s]->wall_us / 1e6) / batch;
                xy[s][1] = (mm[s]->cmd_us - base.cmd_us) / batch;
                xy[s][2] = (mm[s]->commands - base.commands) / batch;
                xy[s][3] = (mm[s]->requests - base.requests) / batch;
                xy[s][4] = mm[s]->wall_us / batch;
            }
            v[5][r] = m->client_us / batch;
            for (int f = 0; f < 5; f++) {
                v[f][r] = x[f];
                /* client speed: the helper's time over ours */
                ratio[f][r] = f == 4 ? y[4] / x[4] : x[f] / y[f];
            }
        }
        for (FILE *f = stdout; f; f = (f == stdout ? out : NULL)) {
            fprintf(f, "{\"bench\": \"server_cost\", \"server\": ");
            json_string(f, server);
            fprintf(f, ", \"kind\": \"%s\", \"pairs\": %d, \"batch\": %d, \"library\": \"%s\"", KIND[k], pairs,
                    batch, redislock_version());
            fprintf(f, ", \"info_cpu_us\": %.2f, \"idle_cpu_us_per_s\": %.1f", base.cpu_us, idle_rate);
            static const char *const F[6] = {"cpu_us", "cmd_us", "commands", "requests", "wall_us",
                                             "client_cpu_us"};
            static const char *const R[5] = {"cpu_ratio", "cmd_ratio", "commands_ratio", "requests_ratio",
                                             "speed_ratio"};
            for (int i = 0; i < 6; i++) {
                json_summary(f, F[i], v[i], pairs);
            }
            if (k != HELPER) { /* every round's ratio where it varies */
                for (int i = 0; i < 5; i++) {
                    (i == 2 || i == 3 ? json_summary : json_list)(f, R[i], ratio[i], pairs);
                }
            }
            const calibration *c = &cal[k];
            fprintf(f, ", \"per_cycle\": {");
            for (int i = 0; i < c->n; i++) {
                fprintf(f, "%s\"%s\": {\"sent\": %.3g, \"in_script\": %.3g, \"queued\": %.3g}", i ? ", " : "",
                        c->e[i].name, c->e[i].sent / c->cycles, c->e[i].inner / c->cycles,
                        c->e[i].queued / c->cycles);
            }
            fprintf(f, "}, \"monitor_lines_per_cycle\": %.3g, \"cycle\": [", (double)c->lines / c->cycles);
            for (int i = 0; i < c->cycle_lines; i++) {
                if (i) {
                    fputs(", ", f);
                }
                json_string(f, c->cycle[i]);
            }
            fputs("]}\n", f);
        }
    }
    if (out) {
        fclose(out);
    }
    for (int f = 0; f < 5; f++) {
        free(empty[f]);
    }
    helper_close(&b.h);
    redislock_client_free(b.client);
    redisFree(b.admin);
    return 0;
}
