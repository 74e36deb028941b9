// The floor under scenario 7 on this machine: one thread writing one 200-byte frame to each of
// 1,000 connected loopback TCP sockets (TCP_NODELAY), as the service's one uWS thread must for
// one event to 1,000 subscribers. On loopback the sender's write also runs the receiver's TCP
// processing, so this is what the 1,000th socket waits at least, before any service work.
// Built and run by bench/scenarios/fanout.ts (cc -O2), pinned like the service.
//
//   loopback-floor [sockets] [rounds]     prints `FLOORJSON {"sockets":…,"writeUs":[…],"readUs":[…]}`
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000, rounds = argc > 2 ? atoi(argv[2]) : 7;
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  socklen_t al = sizeof a;
  if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 4096) || getsockname(ls, (struct sockaddr *)&a, &al)) { perror("listen"); return 1; }
  int *c = calloc((size_t)n, sizeof *c), *s = calloc((size_t)n, sizeof *s);
  int ep = epoll_create1(0), one = 1;
  for (int i = 0; i < n; i++) {
    c[i] = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(c[i], (struct sockaddr *)&a, sizeof a)) { perror("connect"); return 1; }
    s[i] = accept(ls, NULL, NULL);
    setsockopt(s[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct epoll_event e = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
    epoll_ctl(ep, EPOLL_CTL_ADD, c[i], &e);
  }
  char frame[200] = {0}, buf[4096];
  struct epoll_event ev[256];
  printf("FLOORJSON {\"sockets\":%d,\"writeUs\":[", n);
  double reads[64];
  for (int r = 0; r < rounds && r < 64; r++) {
    double t0 = now_us();
    for (int i = 0; i < n; i++) if (write(s[i], frame, sizeof frame) != (ssize_t)sizeof frame) { perror("write"); return 1; }
    double t1 = now_us();
    int got = 0;
    while (got < n) {
      int k = epoll_wait(ep, ev, 256, 1000);
      for (int e = 0; e < k; e++) { if (read(c[ev[e].data.u32], buf, sizeof buf) > 0) got++; }
    }
    reads[r] = now_us() - t1;
    printf("%s%.0f", r ? "," : "", t1 - t0);
  }
  printf("],\"readUs\":[");
  for (int r = 0; r < rounds && r < 64; r++) printf("%s%.0f", r ? "," : "", reads[r]);
  printf("]}\n");
  return 0;
}
