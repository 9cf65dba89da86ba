/* Minimal single-threaded io_uring HTTP/1.1 keep-alive reverse proxy: the io_uring floor for proxy CPU per
 * request, the counterpart of epoll_proxy.c with the same rules: a request is everything up to "\r\n\r\n"
 * (GET without a body, as wrk sends), forwarded verbatim on an idle connection from a pool of keep-alive
 * upstream connections; the response is framed by its Content-Length alone (none: both connections close)
 * and relayed as it is read, then the upstream connection goes back to the pool. Per request: recv from the
 * client, send and recv posted together on the upstream, send to the client; one io_uring_enter per batch
 * of completions (SINGLE_ISSUER + DEFER_TASKRUN, multishot accept, single-shot recv into each connection's
 * own buffer). An idle pooled connection has no recv posted, so one the upstream closed is found when it is
 * next used (both connections close then). Loopback only.
 * Usage: uring_proxy -addr 127.0.0.1:PORT -upstream 127.0.0.1:PORT     Build: gcc -O2 uring_proxy.c -luring */
#define _GNU_SOURCE
#include <signal.h>
#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAXFD 65536
#define BUFCAP 65536
#define OUTCAP 16384

enum { FREE, CLIENT, UPSTREAM };
enum { OP_ACCEPT = 1, OP_RECV, OP_SEND };
/* user_data: op in the top byte, the connection's generation in bits 32..47, fd in the low 32 bits; a
 * completion for an earlier connection on a reused fd number carries an old generation and is ignored */
#define UD(op, gen, fd) (((__u64)(op) << 56) | ((__u64)((gen) & 0xffff) << 32) | (__u32)(fd))

struct conn {
  int kind, peer;  /* peer: the client's upstream or the upstream's client while a request is in flight */
  unsigned gen;
  char *buf;       /* CLIENT: unread request bytes; UPSTREAM: response bytes read, not yet relayed */
  size_t len, off; /* bytes in buf; UPSTREAM: bytes of buf the client has taken */
  long long left;  /* UPSTREAM: response bytes still to read, -1 while the head is incomplete */
  char *out;       /* UPSTREAM: the request head being sent */
  int pooled;      /* UPSTREAM: index in pool[] while idle, -1 otherwise */
};

static struct conn c[MAXFD];
static int pool[MAXFD], npool;
static struct io_uring ring;
static struct sockaddr_in upaddr;

static struct io_uring_sqe *sqe_get(void) {
  struct io_uring_sqe *s = io_uring_get_sqe(&ring);
  if (!s) { io_uring_submit(&ring); s = io_uring_get_sqe(&ring); }
  return s;
}

static void post_recv(int fd) {
  struct io_uring_sqe *s = sqe_get();
  io_uring_prep_recv(s, fd, c[fd].buf + c[fd].len, BUFCAP - c[fd].len, 0);
  io_uring_sqe_set_data64(s, UD(OP_RECV, c[fd].gen, fd));
}

static void post_send(int fd, const char *p, size_t n) {
  struct io_uring_sqe *s = sqe_get();
  io_uring_prep_send(s, fd, p, n, MSG_WAITALL);
  io_uring_sqe_set_data64(s, UD(OP_SEND, c[fd].gen, fd));
}

static void conn_init(int fd, int kind) {
  if (!c[fd].buf) { c[fd].buf = malloc(BUFCAP); c[fd].out = malloc(OUTCAP); }
  c[fd].kind = kind;
  c[fd].peer = c[fd].pooled = -1;
  c[fd].len = c[fd].off = 0;
  c[fd].left = -1;
}

static void pool_remove(int u) {
  int i = c[u].pooled, last = pool[--npool];
  pool[i] = last;
  c[last].pooled = i;
  c[u].pooled = -1;
}

/* drop closes fd and its peer. shutdown first: a recv still in the ring holds the socket open. */
static void drop(int fd) {
  if (c[fd].kind == FREE) return;
  int peer = c[fd].peer;
  if (c[fd].kind == UPSTREAM && c[fd].pooled >= 0) pool_remove(fd);
  c[fd].kind = FREE;
  c[fd].peer = -1;
  c[fd].gen++;
  shutdown(fd, SHUT_RDWR);
  close(fd);
  if (peer >= 0) drop(peer);
}

static int upstream_get(void) {
  if (npool > 0) {
    int u = pool[npool - 1];
    pool_remove(u);
    return u;
  }
  int u = socket(AF_INET, SOCK_STREAM, 0), one = 1; /* blocking connect on loopback, while the pool grows */
  if (u < 0) return -1;
  if (u >= MAXFD || connect(u, (void *)&upaddr, sizeof upaddr)) { close(u); return -1; }
  setsockopt(u, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  conn_init(u, UPSTREAM);
  return u;
}

/* dispatch: forward the client's next complete request head, if it has one and none is in flight;
 * otherwise read more from the client. */
static void dispatch(int cl) {
  char *e = memmem(c[cl].buf, c[cl].len, "\r\n\r\n", 4);
  if (!e) {
    if (c[cl].len == BUFCAP) { drop(cl); return; } /* a head larger than the buffer */
    post_recv(cl);
    return;
  }
  size_t head = (size_t)(e + 4 - c[cl].buf);
  int u = head <= OUTCAP ? upstream_get() : -1;
  if (u < 0) { drop(cl); return; }
  memcpy(c[u].out, c[cl].buf, head); /* the client's buffer moves on at once */
  c[cl].len -= head;
  memmove(c[cl].buf, c[cl].buf + head, c[cl].len);
  c[cl].peer = u;
  c[u].peer = cl;
  post_send(u, c[u].out, head);
  post_recv(u); /* in the same io_uring_enter as the send */
}

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

static void upstream_read(int u, int n) {
  if (n <= 0 || c[u].peer < 0) { drop(u); return; }
  size_t start = c[u].len;
  c[u].len += (size_t)n;
  if (c[u].left < 0) {
    size_t from = start > 3 ? start - 3 : 0;
    char *e = memmem(c[u].buf + from, c[u].len - from, "\r\n\r\n", 4);
    if (!e) {
      if (c[u].len == BUFCAP) drop(u); else post_recv(u);
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
  post_send(c[u].peer, c[u].buf, c[u].len);
}

/* client_sent: the client took n bytes of its upstream's buffer. */
static void client_sent(int cl, int n) {
  int u = c[cl].peer;
  if (n <= 0 || u < 0) { drop(cl); return; }
  c[u].off += (size_t)n;
  if (c[u].off < c[u].len) { post_send(cl, c[u].buf + c[u].off, c[u].len - c[u].off); return; }
  c[u].len = c[u].off = 0;
  if (c[u].left > 0) { post_recv(u); return; }
  c[u].left = -1;
  c[u].peer = c[cl].peer = -1;
  c[u].pooled = npool;
  pool[npool++] = u;
  dispatch(cl);
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
  int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
  inet_pton(AF_INET, host, &sa.sin_addr);
  if (bind(ls, (void *)&sa, sizeof sa) || listen(ls, 4096)) { perror("listen"); return 1; }
  struct io_uring_params p = {.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
                                       IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL, .cq_entries = 16384};
  int r = io_uring_queue_init_params(4096, &ring, &p);
  if (r < 0) { fprintf(stderr, "io_uring: %s\n", strerror(-r)); return 1; }
  struct io_uring_sqe *s = sqe_get();
  io_uring_prep_multishot_accept(s, ls, NULL, NULL, 0);
  io_uring_sqe_set_data64(s, UD(OP_ACCEPT, 0, ls));
  for (;;) {
    io_uring_submit_and_wait(&ring, 1);
    struct io_uring_cqe *cqe;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&ring, head, cqe) {
      seen++;
      __u64 ud = cqe->user_data;
      int op = (int)(ud >> 56), fd = (int)(__u32)ud, res = cqe->res;
      if (op == OP_ACCEPT) {
        if (res >= 0 && res < MAXFD) {
          setsockopt(res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          conn_init(res, CLIENT);
          post_recv(res);
        } else if (res >= 0) {
          close(res);
        }
        if (!(cqe->flags & IORING_CQE_F_MORE)) {
          struct io_uring_sqe *a = sqe_get();
          io_uring_prep_multishot_accept(a, ls, NULL, NULL, 0);
          io_uring_sqe_set_data64(a, UD(OP_ACCEPT, 0, ls));
        }
        continue;
      }
      if (c[fd].kind == FREE || ((ud >> 32) & 0xffff) != (c[fd].gen & 0xffff)) continue; /* stale */
      if (op == OP_RECV && c[fd].kind == CLIENT) {
        if (res <= 0) { drop(fd); continue; }
        c[fd].len += (size_t)res;
        dispatch(fd);
      } else if (op == OP_RECV) {
        upstream_read(fd, res);
      } else if (c[fd].kind == CLIENT) {
        client_sent(fd, res);
      } else if (res < 0) { /* the request's send to the upstream */
        drop(fd);
      }
    }
    io_uring_cq_advance(&ring, seen);
  }
}
