/* Minimal single-threaded epoll HTTP/1.1 keep-alive reverse proxy: the floor for proxy CPU per request.
 * It validates nothing and rewrites nothing: a request is everything up to "\r\n\r\n" (GET without a body,
 * as wrk sends), forwarded verbatim on an idle connection from a pool of keep-alive upstream connections;
 * the response is framed by its Content-Length alone (a response without one closes both connections) and
 * relayed as it is read, then the upstream connection goes back to the pool. Per request that is the four
 * socket operations (client read, upstream write, upstream read, client write) plus epoll_wait, and a
 * memmem and a Content-Length scan of user work. Pipelined requests wait in the client's buffer until the
 * response before them is done. A client that will not take the response stops reads from its upstream.
 * Loopback only.   Usage: epoll_proxy -addr 127.0.0.1:PORT -upstream 127.0.0.1:PORT
 * Build: gcc -O2 -o epoll_proxy epoll_proxy.c */
#define _GNU_SOURCE
#include <signal.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAXFD 65536
#define BUFCAP 65536

enum { FREE, LISTENER, CLIENT, UPSTREAM };

struct conn {
  int kind;
  int peer;         /* the client's upstream or the upstream's client while a request is in flight; -1 */
  char *buf;        /* CLIENT: unread request bytes; UPSTREAM: response bytes not yet written to the client */
  size_t len, off;  /* bytes in buf; UPSTREAM: bytes of buf already written */
  long long left;   /* UPSTREAM: response bytes still to read, -1 while the head is incomplete */
  int pooled;       /* UPSTREAM: index in pool[] while idle, -1 otherwise */
};

static struct conn c[MAXFD];
static int pool[MAXFD], npool;
static int ep;
static struct sockaddr_in upaddr;

static void watch(int op, int fd, unsigned events) {
  struct epoll_event ev = {.events = events, .data.fd = fd};
  epoll_ctl(ep, op, fd, &ev);
}

static void pool_put(int u) {
  c[u].pooled = npool;
  pool[npool++] = u;
}

static void pool_remove(int u) {
  int i = c[u].pooled, last = pool[--npool];
  pool[i] = last;
  c[last].pooled = i;
  c[u].pooled = -1;
}

static void conn_init(int fd, int kind) {
  if (!c[fd].buf) c[fd].buf = malloc(BUFCAP);
  c[fd].kind = kind;
  c[fd].peer = -1;
  c[fd].len = c[fd].off = 0;
  c[fd].left = -1;
  c[fd].pooled = -1;
}

static void drop(int fd) {
  if (c[fd].kind == FREE) return;
  int peer = c[fd].peer;
  if (c[fd].kind == UPSTREAM && c[fd].pooled >= 0) pool_remove(fd);
  c[fd].kind = FREE;
  c[fd].peer = -1;
  epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
  close(fd);
  if (peer >= 0) drop(peer); /* a half-relayed response cannot be finished or reused */
}

/* upstream_get: an idle pooled connection, or a new one (a blocking connect on loopback, then
 * non-blocking; it happens only while the pool grows to the number of concurrent requests). */
static int upstream_get(void) {
  if (npool > 0) {
    int u = pool[npool - 1];
    pool_remove(u);
    return u;
  }
  int u = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  if (u < 0) return -1;
  if (u >= MAXFD || connect(u, (void *)&upaddr, sizeof upaddr)) { close(u); return -1; }
  setsockopt(u, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (ioctl(u, FIONBIO, &one)) { close(u); return -1; }
  conn_init(u, UPSTREAM);
  watch(EPOLL_CTL_ADD, u, EPOLLIN);
  return u;
}

/* write_all: 0 when all of p went out, 1 when the socket is full (*done says how much went), -1 on error. */
static int write_all(int fd, const char *p, size_t n, size_t *done) {
  *done = 0;
  while (*done < n) {
    ssize_t w = write(fd, p + *done, n - *done);
    if (w < 0) return errno == EAGAIN ? 1 : -1;
    *done += (size_t)w;
  }
  return 0;
}

static void dispatch(int cl);

/* relay: write the upstream's buffered response bytes to its client. When the client's socket is full,
 * the upstream stops being read and the client is watched for EPOLLOUT. When the response is complete,
 * the upstream connection goes back to the pool and the client's next buffered request, if any, goes out. */
static void relay(int u) {
  int cl = c[u].peer;
  size_t done;
  int r = write_all(cl, c[u].buf + c[u].off, c[u].len - c[u].off, &done);
  if (r < 0) { drop(cl); return; }
  c[u].off += done;
  if (r == 1) {
    watch(EPOLL_CTL_MOD, u, 0);
    watch(EPOLL_CTL_MOD, cl, EPOLLIN | EPOLLOUT);
    return;
  }
  c[u].len = c[u].off = 0;
  if (c[u].left > 0) return;
  c[u].peer = c[cl].peer = -1;
  c[u].left = -1;
  pool_put(u);
  dispatch(cl);
}

/* content_length: the value of Content-Length in the head [p, p+n), or -1. */
static long long content_length(const char *p, size_t n) {
  static const char name[] = "\r\ncontent-length:";
  const size_t nl = sizeof name - 1;
  for (size_t i = 0; i + nl <= n; i++) {
    if (p[i] != '\r' || strncasecmp(p + i, name, nl)) continue;
    const char *v = p + i + nl, *end = p + n;
    while (v < end && (*v == ' ' || *v == '\t')) v++;
    if (v == end || *v < '0' || *v > '9') return -1;
    long long x = 0;
    while (v < end && *v >= '0' && *v <= '9') x = x * 10 + (*v++ - '0');
    return x;
  }
  return -1;
}

static void upstream_readable(int u) {
  if (c[u].peer < 0) { drop(u); return; } /* an idle pooled connection: only EOF or stray bytes come */
  ssize_t n = read(u, c[u].buf + c[u].len, BUFCAP - c[u].len);
  if (n <= 0) {
    if (n < 0 && errno == EAGAIN) return;
    drop(u);
    return;
  }
  size_t start = c[u].len;
  c[u].len += (size_t)n;
  if (c[u].left < 0) {
    /* the head may arrive in pieces; look for its end from a little before the new bytes */
    size_t from = start > 3 ? start - 3 : 0;
    char *e = memmem(c[u].buf + from, c[u].len - from, "\r\n\r\n", 4);
    if (!e) {
      if (c[u].len == BUFCAP) drop(u);
      return;
    }
    size_t head = (size_t)(e + 4 - c[u].buf);
    long long cl = content_length(c[u].buf, head);
    if (cl < 0) { drop(u); return; }
    c[u].left = (long long)head + cl - (long long)c[u].len;
  } else {
    c[u].left -= n;
  }
  if (c[u].left < 0) { drop(u); return; } /* bytes beyond the framed end: do not reuse */
  relay(u);
}

/* dispatch: send the client's next complete request head, if it has one and none is in flight. */
static void dispatch(int cl) {
  if (c[cl].peer >= 0) return;
  char *e = memmem(c[cl].buf, c[cl].len, "\r\n\r\n", 4);
  if (!e) return;
  size_t head = (size_t)(e + 4 - c[cl].buf);
  int u = upstream_get();
  if (u < 0) { drop(cl); return; }
  size_t done;
  if (write_all(u, c[cl].buf, head, &done)) { drop(u); drop(cl); return; } /* a fresh head fits a socket */
  c[cl].len -= head;
  memmove(c[cl].buf, c[cl].buf + head, c[cl].len);
  c[cl].peer = u;
  c[u].peer = cl;
}

static void client_readable(int cl) {
  if (c[cl].len == BUFCAP) { drop(cl); return; } /* a head larger than the buffer, or too much pipelined */
  ssize_t n = read(cl, c[cl].buf + c[cl].len, BUFCAP - c[cl].len);
  if (n <= 0) {
    if (n < 0 && errno == EAGAIN) return;
    drop(cl);
    return;
  }
  c[cl].len += (size_t)n;
  dispatch(cl);
}

static void client_writable(int cl) {
  int u = c[cl].peer;
  if (u < 0) return;
  watch(EPOLL_CTL_MOD, cl, EPOLLIN);
  watch(EPOLL_CTL_MOD, u, EPOLLIN);
  relay(u);
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN); /* a client that leaves mid-answer is an EPIPE, not the end of the proxy */
  const char *addr = "127.0.0.1:8080", *up = NULL;
  for (int i = 1; i + 1 < argc; i++) {
    if (!strcmp(argv[i], "-addr")) addr = argv[i + 1];
    if (!strcmp(argv[i], "-upstream")) up = argv[i + 1];
  }
  char host[64];
  int port;
  if (!up || sscanf(up, "%63[^:]:%d", host, &port) != 2) { fprintf(stderr, "need -upstream HOST:PORT\n"); return 2; }
  upaddr = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(port)};
  inet_pton(AF_INET, host, &upaddr.sin_addr);
  if (sscanf(addr, "%63[^:]:%d", host, &port) != 2) { fprintf(stderr, "bad -addr\n"); return 2; }
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
  inet_pton(AF_INET, host, &sa.sin_addr);
  if (bind(ls, (void *)&sa, sizeof sa) || listen(ls, 4096)) { perror("listen"); return 1; }
  ep = epoll_create1(0);
  c[ls].kind = LISTENER;
  watch(EPOLL_CTL_ADD, ls, EPOLLIN);
  struct epoll_event evs[256];
  for (;;) {
    int n = epoll_wait(ep, evs, 256, -1);
    for (int i = 0; i < n; i++) {
      int fd = evs[i].data.fd;
      switch (c[fd].kind) {
      case LISTENER:
        for (int cfd; (cfd = accept4(ls, NULL, NULL, SOCK_NONBLOCK)) >= 0;) {
          if (cfd >= MAXFD) { close(cfd); continue; }
          setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          conn_init(cfd, CLIENT);
          watch(EPOLL_CTL_ADD, cfd, EPOLLIN);
        }
        break;
      case CLIENT:
        if (evs[i].events & EPOLLOUT) client_writable(fd);
        else if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) client_readable(fd);
        break;
      case UPSTREAM:
        upstream_readable(fd);
        break;
      }
    }
  }
}
