/* Minimal single-threaded epoll TCP relay (an L4 proxy): the floor for L4 proxy CPU per request.
 * Each accepted client gets its own upstream connection (non-blocking connect); bytes read from one
 * side are written to the other at once. A side whose bytes the other could not take whole stops
 * being read until they are written (the rest is kept and sent on EPOLLOUT), so at most one 64 KiB
 * buffer per direction is held. It parses nothing and copies through user space (no splice), as
 * bench/proxy.sh's veloq-copy, haproxy and nginx do: per message two reads and two writes plus
 * epoll_wait. A read of 0 or an error on either side closes both. Loopback only.
 * Usage: epoll_relay -addr 127.0.0.1:PORT -upstream 127.0.0.1:PORT
 * Build: gcc -O2 -o epoll_relay epoll_relay.c */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAXFD 65536
#define BUFCAP 65536

/* side: one socket of a pair; buf holds bytes read from it that its peer has not taken yet. */
struct side {
	int peer; /* -1: free */
	char *buf;
	size_t off, len;
	unsigned armed; /* the epoll events registered */
};

static struct side sides[MAXFD];
static int ep;

static void die(const char *what) {
	perror(what);
	exit(1);
}

static int parse_addr(const char *s, struct sockaddr_in *sa) {
	char host[64];
	const char *colon = strrchr(s, ':');
	if (!colon || (size_t)(colon - s) >= sizeof host) return -1;
	memcpy(host, s, colon - s);
	host[colon - s] = 0;
	memset(sa, 0, sizeof *sa);
	sa->sin_family = AF_INET;
	sa->sin_port = htons(atoi(colon + 1));
	return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

/* arm registers what fd waits for: input while its own bytes are all delivered, output while its
 * peer's bytes wait for it. */
static void arm(int fd) {
	struct side *s = &sides[fd];
	unsigned want = 0;
	if (s->len == 0) want |= EPOLLIN;
	if (sides[s->peer].len != 0) want |= EPOLLOUT;
	if (want == s->armed) return;
	struct epoll_event ev = {.events = want, .data.fd = fd};
	if (epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) < 0) die("epoll_ctl mod");
	s->armed = want;
}

static void close_pair(int fd) {
	int peer = sides[fd].peer;
	int fds[2] = {fd, peer};
	for (int i = 0; i < 2; i++) {
		sides[fds[i]].peer = -1;
		sides[fds[i]].off = sides[fds[i]].len = 0;
		close(fds[i]); /* also leaves the epoll set */
	}
}

/* flush writes what from holds to its peer; -1 means the pair is gone. */
static int flush(int from) {
	struct side *s = &sides[from];
	while (s->len > 0) {
		ssize_t n = write(s->peer, s->buf + s->off, s->len);
		if (n < 0) {
			if (errno == EAGAIN || errno == ENOTCONN) return 0;
			return -1;
		}
		s->off += n;
		s->len -= n;
	}
	s->off = 0;
	return 0;
}

static void add(int fd, int peer) {
	struct side *s = &sides[fd];
	s->peer = peer;
	s->off = s->len = 0;
	if (!s->buf && !(s->buf = malloc(BUFCAP))) die("malloc");
	s->armed = EPOLLIN;
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) die("epoll_ctl add");
}

static void accept_all(int lfd, const struct sockaddr_in *up) {
	for (;;) {
		int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (c < 0) return;
		int u = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (u < 0 || c >= MAXFD || u >= MAXFD) {
			close(c);
			if (u >= 0) close(u);
			continue;
		}
		int one = 1;
		setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		setsockopt(u, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		if (connect(u, (const struct sockaddr *)up, sizeof *up) < 0 && errno != EINPROGRESS) {
			close(c);
			close(u);
			continue;
		}
		add(c, u);
		add(u, c);
	}
}

/* readable reads from fd and passes the bytes on; what the peer does not take stays in fd's buffer. */
static void readable(int fd) {
	struct side *s = &sides[fd];
	ssize_t n = read(fd, s->buf, BUFCAP);
	if (n == 0 || (n < 0 && errno != EAGAIN)) {
		close_pair(fd);
		return;
	}
	if (n < 0) return;
	s->off = 0;
	s->len = n;
	if (flush(fd) < 0) {
		close_pair(fd);
		return;
	}
	arm(fd);
	arm(s->peer);
}

/* writable sends the peer's held bytes to fd. */
static void writable(int fd) {
	int peer = sides[fd].peer;
	if (flush(peer) < 0) {
		close_pair(fd);
		return;
	}
	arm(fd);
	arm(peer);
}

int main(int argc, char **argv) {
	struct sockaddr_in addr, up;
	const char *a = NULL, *u = NULL;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-addr")) a = argv[i + 1];
		if (!strcmp(argv[i], "-upstream")) u = argv[i + 1];
	}
	if (!a || !u || parse_addr(a, &addr) < 0 || parse_addr(u, &up) < 0) {
		fprintf(stderr, "usage: epoll_relay -addr 127.0.0.1:PORT -upstream 127.0.0.1:PORT\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	for (int i = 0; i < MAXFD; i++) sides[i].peer = -1;
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) < 0) die("bind");
	if (listen(lfd, 4096) < 0) die("listen");
	if ((ep = epoll_create1(EPOLL_CLOEXEC)) < 0) die("epoll_create1");
	struct epoll_event lev = {.events = EPOLLIN, .data.fd = lfd};
	if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev) < 0) die("epoll_ctl listener");
	struct epoll_event evs[256];
	for (;;) {
		int n = epoll_wait(ep, evs, 256, -1);
		if (n < 0) {
			if (errno == EINTR) continue;
			die("epoll_wait");
		}
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			if (fd == lfd) {
				accept_all(lfd, &up);
				continue;
			}
			/* an earlier event in this batch may have closed the pair */
			if (sides[fd].peer < 0) continue;
			if (evs[i].events & (EPOLLOUT | EPOLLERR)) writable(fd);
			if (sides[fd].peer >= 0 && evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) readable(fd);
		}
	}
}
