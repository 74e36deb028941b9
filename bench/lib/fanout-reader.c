// Scenario 7's client in C (bench/scenarios/fanout.ts compiles it with the machine's cc, and
// falls back to bench/lib/fanout-client.ts without one). Same measurement: `sockets` WebSocket
// connections of one tenant on /v1/stream, target swaps (PATCH /v1/sessions/:id/target) at a
// steady rate on kept-alive HTTP connections (one request in flight on each), latency = swap sent -> `session.target_swapped`
// read on each socket, one clock. Why C: one Node process spends ~10 us per socket read (libuv,
// a Buffer, a stream 'data' event), so reading 1,000 sockets took ~10 ms per swap and the figure
// measured the reader; 1,000 real subscribers are 1,000 processes on other machines. Here one
// epoll loop reads each socket in ~1-2 us.
//
//   fanout-reader <host> <port> <token> <sockets> <rate> <seconds>   (stdin: "<sessionId> <customerPhone>" lines)
// Prints `connected N`, then `FANJSON {...}` (the shape fanout-client.ts prints).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_SWAPS 4096
#define BUF 65536

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void die(const char *what) {
  fprintf(stderr, "fanout-reader: %s: %s\n", what, strerror(errno));
  exit(1);
}

static int dial(const char *host, int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) die("socket");
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  inet_pton(AF_INET, host, &a.sin_addr);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) die("connect");
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

static void write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      die("write");
    }
    p += w;
    n -= (size_t)w;
  }
}

typedef struct { int fd; char *buf; size_t len; int inflight; } Conn;

/** API connections: one request in flight on each (no pipelining), a new one when all are busy. */
#define MAX_API 32

static char ids[MAX_SWAPS][37];
static char phones[MAX_SWAPS][24];
static double sent_at[MAX_SWAPS], first_at[MAX_SWAPS], last_at[MAX_SWAPS];
static double *lat;
static size_t nlat;
static double answers[MAX_SWAPS];
static int nanswers, ok, failed;

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double q(double *s, size_t n, double p) {
  if (n == 0) return -1;
  size_t i = (size_t)(p * (double)n);
  return s[i < n ? i : n - 1];
}

static int swap_index(const char *id, int nswaps) {
  for (int k = 0; k < nswaps; k++) if (memcmp(ids[k], id, 36) == 0) return k;
  return -1;
}

/** One text frame: a target_swapped event of one of our swaps is a delivery. */
static void on_text(const char *p, size_t n, int nswaps, double t) {
  if (!memmem(p, n, "session.target_swapped", 22)) return;
  const char *s = memmem(p, n, "\"sessionId\":\"", 13);
  if (!s || (size_t)(s + 13 + 36 - p) > n) return;
  int k = swap_index(s + 13, nswaps);
  if (k < 0 || sent_at[k] == 0) return;
  double ms = t - sent_at[k];
  lat[nlat++] = ms;
  if (first_at[k] == 0) first_at[k] = ms;
  last_at[k] = ms;
}

/** Frames from the server (unmasked); answers a ping with a (masked) pong. */
static int on_ws_data(int fd, Conn *c, int nswaps, double t) {
  size_t off = 0;
  for (;;) {
    if (c->len - off < 2) break;
    unsigned char *b = (unsigned char *)c->buf + off;
    int op = b[0] & 0x0f;
    size_t len = b[1] & 0x7f, head = 2;
    if (len == 126) { if (c->len - off < 4) break; len = ((size_t)b[2] << 8) | b[3]; head = 4; }
    else if (len == 127) { if (c->len - off < 10) break; len = 0; for (int i = 2; i < 10; i++) len = (len << 8) | b[i]; head = 10; }
    if (c->len - off < head + len) break;
    if (op == 1) on_text((char *)b + head, len, nswaps, t);
    else if (op == 9 && len <= 125) {
      unsigned char pong[2 + 4 + 125];
      pong[0] = 0x8a; pong[1] = 0x80 | (unsigned char)len;
      memset(pong + 2, 0, 4); // zero mask key: the payload goes as is
      memcpy(pong + 6, b + head, len);
      write_all(fd, (char *)pong, 6 + len);
    } else if (op == 8) return -1;
    off += head + len;
  }
  memmove(c->buf, c->buf + off, c->len - off);
  c->len -= off;
  if (c->len == BUF) return -1; // a frame larger than we read: not ours
  return 0;
}

/** The answer to the one request in flight on an API connection: status line, Content-Length, body. */
static void on_http_data(Conn *c, double t) {
  char *end = memmem(c->buf, c->len, "\r\n\r\n", 4);
  if (!end || c->inflight < 0) return;
  size_t head = (size_t)(end - c->buf) + 4;
  char *cl = memmem(c->buf, head, "content-length:", 15);
  if (!cl) cl = memmem(c->buf, head, "Content-Length:", 15);
  size_t body = cl ? strtoul(cl + 15, NULL, 10) : 0;
  if (c->len < head + body) return;
  int status = atoi(c->buf + 9);
  if (status == 200) ok++;
  else { failed++; fprintf(stderr, "fanout-reader: swap %d answered %d\n", c->inflight, status); }
  answers[nanswers++] = t - sent_at[c->inflight];
  c->inflight = -1;
  memmove(c->buf, c->buf + head + body, c->len - head - body);
  c->len -= head + body;
}

int main(int argc, char **argv) {
  if (argc != 7) { fprintf(stderr, "usage: fanout-reader host port token sockets rate seconds < swaps\n"); return 2; }
  const char *host = argv[1], *token = argv[3];
  int port = atoi(argv[2]), sockets = atoi(argv[4]);
  double rate = atof(argv[5]), seconds = atof(argv[6]);
  int nswaps = 0;
  while (nswaps < MAX_SWAPS && scanf("%36s %23s", ids[nswaps], phones[nswaps]) == 2) nswaps++;
  lat = calloc((size_t)sockets * (size_t)nswaps + 1, sizeof *lat);

  int ep = epoll_create1(0);
  Conn *conns = calloc((size_t)sockets + MAX_API, sizeof *conns);
  char req[4096];
  int reqlen = snprintf(req, sizeof req,
    "GET /v1/stream HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer %s\r\n\r\n", host, port, token);
  for (int i = 0; i < sockets; i++) {
    int fd = dial(host, port);
    write_all(fd, req, (size_t)reqlen);
    conns[i].buf = malloc(BUF);
    // The 101 answer; whatever follows it is the first frames.
    for (;;) {
      ssize_t r = read(fd, conns[i].buf + conns[i].len, BUF - conns[i].len);
      if (r <= 0) die("handshake");
      conns[i].len += (size_t)r;
      char *end = memmem(conns[i].buf, conns[i].len, "\r\n\r\n", 4);
      if (!end) continue;
      if (strncmp(conns[i].buf, "HTTP/1.1 101", 12) != 0) { fprintf(stderr, "fanout-reader: upgrade refused: %.40s\n", conns[i].buf); return 1; }
      size_t head = (size_t)(end - conns[i].buf) + 4;
      memmove(conns[i].buf, conns[i].buf + head, conns[i].len - head);
      conns[i].len -= head;
      break;
    }
    conns[i].fd = fd;
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) die("epoll_ctl");
  }
  Conn *api = conns + sockets; // MAX_API slots after the sockets
  int napi = 0;
  printf("connected %d\n", sockets);
  fflush(stdout);

  double t0 = now_ms(), interval = 1000.0 / rate, stop_at = 0;
  int next = 0, lost = 0;
  struct epoll_event evs[256];
  for (;;) {
    double t = now_ms();
    if (next < nswaps && t - t0 < seconds * 1000 && t >= t0 + next * interval) {
      Conn *a = NULL;
      for (int j = 0; j < napi && !a; j++) if (api[j].fd >= 0 && api[j].inflight < 0) a = &api[j];
      if (!a) {
        if (napi == MAX_API) { fprintf(stderr, "fanout-reader: %d swaps in flight\n", MAX_API); return 1; }
        a = &api[napi];
        a->fd = dial(host, port);
        a->buf = malloc(BUF);
        a->len = 0;
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)(sockets + napi)};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, a->fd, &ev) < 0) die("epoll_ctl");
        napi++;
      }
      char body[128], msg[2048];
      int bl = snprintf(body, sizeof body, "{\"customerPhone\":\"%s\"}", phones[next]);
      int ml = snprintf(msg, sizeof msg,
        "PATCH /v1/sessions/%s/target HTTP/1.1\r\nHost: %s:%d\r\nAuthorization: Bearer %s\r\n"
        "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", ids[next], host, port, token, bl, body);
      if (ml >= (int)sizeof msg) { fprintf(stderr, "fanout-reader: request too long\n"); return 1; }
      a->inflight = next;
      sent_at[next] = now_ms();
      write_all(a->fd, msg, (size_t)ml);
      next++;
      continue;
    }
    int done_sending = next >= nswaps || t - t0 >= seconds * 1000;
    if (done_sending) {
      // Answers within 10 s, then 5 s for the last frames; whatever is missing by then is missing.
      if (stop_at == 0) stop_at = t + 10000;
      if (nanswers + lost >= next && stop_at > t + 5000) stop_at = t + 5000;
      if ((nanswers + lost >= next && nlat >= (size_t)ok * (size_t)sockets) || t >= stop_at) break;
    }
    int wait = done_sending ? 20 : (int)(t0 + next * interval - t);
    if (wait < 0) wait = 0;
    int n = epoll_wait(ep, evs, 256, wait);
    double at = now_ms();
    for (int e = 0; e < n; e++) {
      int i = (int)evs[e].data.u32;
      Conn *c = &conns[i];
      ssize_t r = read(c->fd, c->buf + c->len, BUF - c->len);
      if (r <= 0) {
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        fprintf(stderr, "fanout-reader: %s %d closed by the server\n", i >= sockets ? "API connection" : "socket", i);
        epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
        if (i >= sockets) { if (c->inflight >= 0) { lost++; failed++; } c->inflight = -1; close(c->fd); c->fd = -1; }
        continue;
      }
      c->len += (size_t)r;
      if (i >= sockets) on_http_data(c, at);
      else if (on_ws_data(c->fd, c, nswaps, at) < 0) epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    }
  }

  qsort(lat, nlat, sizeof *lat, cmp);
  qsort(answers, (size_t)nanswers, sizeof *answers, cmp);
  double firsts[MAX_SWAPS], spreads[MAX_SWAPS];
  int nf = 0;
  for (int k = 0; k < next; k++) if (first_at[k] > 0) { firsts[nf] = first_at[k]; spreads[nf] = last_at[k] - first_at[k]; nf++; }
  qsort(firsts, (size_t)nf, sizeof *firsts, cmp);
  qsort(spreads, (size_t)nf, sizeof *spreads, cmp);
  printf("FANJSON {\"sockets\":%d,\"swaps\":%d,\"swapsOk\":%d,\"expected\":%zu,\"delivered\":%zu,"
    "\"latencyMs\":{\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,\"p999\":%.3f},\"swapAnswerMs\":{\"p50\":%.3f,\"p99\":%.3f},"
    "\"firstFrameMs\":{\"p50\":%.3f,\"p99\":%.3f},\"spreadMs\":{\"p50\":%.3f,\"p99\":%.3f},\"clientLagMs\":{\"p99\":0,\"max\":0}}\n",
    sockets, ok + failed, ok, (size_t)ok * (size_t)sockets, nlat,
    q(lat, nlat, .5), q(lat, nlat, .9), q(lat, nlat, .99), q(lat, nlat, .999), q(answers, (size_t)nanswers, .5), q(answers, (size_t)nanswers, .99),
    q(firsts, (size_t)nf, .5), q(firsts, (size_t)nf, .99), q(spreads, (size_t)nf, .5), q(spreads, (size_t)nf, .99));
  return 0;
}
