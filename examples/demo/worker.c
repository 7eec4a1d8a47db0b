/*
 * make demo: a C worker. Once, then until the deadline: take the lock,
 * increment the counter non-atomically (GET, then SET, over a plain
 * socket), release. Prints "fence value acquired_ns release_ns" per
 * acquisition: the counter as read, CLOCK_MONOTONIC after the acquisition
 * and before the release. With LIMIT, a permit of the semaphore
 * `demo:pool` of LIMIT instead, counted with INCR `demo:pool:done`, held
 * 1 ms, the value reported as 0.
 *
 *   worker REDIS_PORT SECONDS [LIMIT]
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <redislock.h>

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* One RESP request, one reply line (enough for GET of a number and SET). */
static long long rpc(int fd, const char *req, size_t len) {
  char buf[256];
  if (write(fd, req, len) != (ssize_t)len)
    exit(2);
  ssize_t n = read(fd, buf, sizeof buf - 1);
  if (n <= 0)
    exit(2);
  buf[n] = 0;
  if (buf[0] == '$') {                 /* bulk string: "$len\r\nvalue\r\n" or "$-1\r\n" */
    if (buf[1] == '-')
      return 0;
    char *v = strstr(buf, "\r\n");
    return v ? atoll(v + 2) : 0;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: %s REDIS_PORT SECONDS [LIMIT]\n", argv[0]);
    return 2;
  }
  unsigned limit = argc == 4 ? (unsigned)atoi(argv[3]) : 0;
  int port = atoi(argv[1]);
  long long end = now_ns() + (long long)(atof(argv[2]) * 1e9);
  char url[64];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
  redislock_client *client = NULL;
  if (redislock_client_open(url, &client) != REDISLOCK_OK)
    return 1;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
    return 1;
  static const char get[] = "*2\r\n$3\r\nGET\r\n$12\r\ndemo:counter\r\n";
  do {
    /* A TTL and a wait no pause of a busy machine comes near. */
    redislock_lock *lock = NULL;
    redislock_status s =
        limit ? redislock_acquire_semaphore(client, (const uint8_t *)"demo:pool", 9, limit, 1, 30000, 30000, &lock)
              : redislock_acquire(client, (const uint8_t *)"demo:lock", 9, 30000, 30000, NULL, 0, &lock);
    if (s != REDISLOCK_OK) {
      fprintf(stderr, "c worker: %s\n", redislock_status_str(s));
      return 1;
    }
    long long acquired = now_ns();
    long long v = 0;
    if (limit) {
      static const char incr[] = "*2\r\n$4\r\nINCR\r\n$14\r\ndemo:pool:done\r\n";
      rpc(fd, incr, sizeof incr - 1);
      struct timespec ms = {0, 1000000L};
      nanosleep(&ms, NULL);
    } else {
      v = rpc(fd, get, sizeof get - 1);
      char num[32], set[128];
      int n = snprintf(num, sizeof num, "%lld", v + 1);
      int len = snprintf(set, sizeof set, "*3\r\n$3\r\nSET\r\n$12\r\ndemo:counter\r\n$%d\r\n%s\r\n", n, num);
      rpc(fd, set, (size_t)len);
    }
    unsigned long long fence = (unsigned long long)redislock_lock_fence(lock);
    long long release = now_ns();
    if (redislock_release(lock) != REDISLOCK_OK)
      return 1;
    printf("%llu %lld %lld %lld\n", fence, v, acquired, release);
  } while (now_ns() < end);
  close(fd);
  redislock_client_free(client);
  return 0;
}
