/* Minimal single-threaded io_uring TCP relay (an L4 proxy): the io_uring floor for L4 proxy CPU per
 * request, with epoll_relay.c's rules: each accepted client gets its own upstream connection, bytes
 * received from one side are sent to the other at once, copied through user space (no splice), at
 * most one send in flight per direction (so bytes stay in order), a bounded amount held per direction,
 * and a receive of 0 or an error on either side closes both (after a 0, once the bytes received
 * before it are sent on, as epoll_relay.c reads no further while bytes wait). One io_uring_enter
 * per batch submits what the last batch of completions asked for and waits for the next
 * (SINGLE_ISSUER + DEFER_TASKRUN, registered ring fd, multishot accept). Two ways to receive, chosen by -recv:
 *   multishot (default): one multishot recv per socket into a provided buffer ring; each chunk is
 *     sent from the buffer it arrived in, which goes back to the ring when that send completes.
 *     Per message: a recv completion, a send SQE and its completion; no recv SQE. A direction
 *     holding HOLD bytes its peer has not taken cancels its recv until the peer catches up.
 *   single: a single-shot recv into the side's own 64 KiB buffer, posted again once its bytes are
 *     sent (IORING_RECVSEND_POLL_FIRST: it waits for data instead of first trying an empty socket).
 *     Per message: a recv SQE and completion, a send SQE and completion.
 * -batch-wait USEC (default 0: off) waits as veloq's loops do by default (Config.BatchWait, 20 µs):
 * while many connections are busy, one io_uring_enter asks for a batch of completions (one per 4
 * connections that received in the last millisecond) and waits at most USEC for it once one is
 * there (the kernel's min-wait, Linux 6.12+), so the floor is not charged for wake-ups veloq saves.
 * Loopback only.
 * Usage: uring_relay -addr 127.0.0.1:PORT -upstream 127.0.0.1:PORT [-recv multishot|single]
 *        [-batch-wait USEC]
 * Build: gcc -O2 -o uring_relay uring_relay.c -luring */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAXFD 65536
#define NBUF 1024     /* multishot: buffers in the ring, shared by every socket */
#define BUFSZ 16384   /* multishot: bytes per ring buffer (veloq's default too) */
#define HOLD 65536    /* multishot: unsent bytes that stop a direction's recv */
#define BUFCAP 65536  /* single: each side's own buffer */
#define BGID 1
#define IOVMAX 8      /* multishot: ring buffers one send takes at most */

enum { OP_ACCEPT = 1, OP_RECV, OP_SEND, OP_CANCEL };
enum { RX_OFF, RX_ARMED, RX_CANCELLING, RX_STARVED };
/* user_data: op in the top byte, the side's generation in bits 32..55, fd in bits 16..31, a ring
 * buffer id in the low 16 bits. A completion for an earlier connection on a reused fd number carries
 * an old generation: it only gives its buffer back. */
#define UD(op, gen, fd, bid) (((__u64)(op) << 56) | ((__u64)((gen) & 0xffffff) << 32) | ((__u64)(fd) << 16) | (bid))

/* side: one socket of a pair; what it received and its peer has not taken yet is queued on it. */
struct side {
	int peer; /* -1: free */
	unsigned gen;
	int rx;      /* RX_*: the state of its recv */
	int sending; /* a send of its bytes to the peer is in flight */
	int eof;     /* multishot: it closed with bytes still queued; the pair closes once they are sent */
	/* multishot: the ring buffers received, oldest first, linked through next[] */
	int qhead, qtail;
	size_t qbytes, off; /* bytes queued; bytes of the head buffer already sent */
	int niov;           /* buffers the send in flight reads, from the head */
	struct iovec *iov;  /* and their bytes, for a send of more than one (sendmsg) */
	struct msghdr mh;
	/* single: the side's own buffer and the bytes in it */
	char *buf;
	size_t blen;
};

static struct side sides[MAXFD];
static struct io_uring ring;
static struct io_uring_buf_ring *br;
static char *bufs;
static int bmask, multishot = 1;
static int next[NBUF];        /* the queue link of each ring buffer */
static unsigned blen[NBUF];   /* the bytes received into each ring buffer */
static int starved[MAXFD], nstarved; /* sides whose multishot recv ended for want of buffers */
static struct sockaddr_in upaddr;
/* -batch-wait: receives since the last wait, and the sides that received per epoch (>= 1 ms) */
static unsigned batch_us, inputs, marked, active;
static unsigned char epoch = 1, sepoch[MAXFD];
static long long epoch_end;
static int reg_ring;

static struct io_uring_sqe *sqe_get(void) {
	struct io_uring_sqe *s = io_uring_get_sqe(&ring);
	if (!s) {
		io_uring_submit(&ring);
		s = io_uring_get_sqe(&ring);
	}
	return s;
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

static void arm_recv(int fd) {
	struct side *s = &sides[fd];
	struct io_uring_sqe *q = sqe_get();
	if (multishot) {
		io_uring_prep_recv_multishot(q, fd, NULL, 0, 0);
		q->flags |= IOSQE_BUFFER_SELECT;
		q->buf_group = BGID;
	} else {
		io_uring_prep_recv(q, fd, s->buf, BUFCAP, 0);
		q->ioprio |= IORING_RECVSEND_POLL_FIRST; /* its bytes were just sent on: the socket is empty */
	}
	io_uring_sqe_set_data64(q, UD(OP_RECV, s->gen, fd, 0));
	s->rx = RX_ARMED;
}

/* recycle gives ring buffer bid back to the kernel and re-arms the sides that ran out. */
static void recycle(int bid) {
	io_uring_buf_ring_add(br, bufs + (size_t)bid * BUFSZ, BUFSZ, bid, bmask, 0);
	io_uring_buf_ring_advance(br, 1);
	while (nstarved > 0) {
		int fd = starved[--nstarved];
		if (sides[fd].peer >= 0 && sides[fd].rx == RX_STARVED) arm_recv(fd);
	}
}

/* send_head sends from's queued bytes to its peer, the buffers queued behind the oldest in the
 * same sendmsg (a 64 KiB message arrives as 4 ring buffers); MSG_WAITALL: the kernel retries a
 * short send itself. */
static void send_head(int from) {
	struct side *s = &sides[from];
	struct io_uring_sqe *q = sqe_get();
	int bid = 0;
	if (multishot) {
		bid = s->qhead;
		char *p = bufs + (size_t)bid * BUFSZ + s->off;
		s->niov = 1;
		if (next[bid] < 0) {
			io_uring_prep_send(q, s->peer, p, blen[bid] - s->off, MSG_WAITALL);
		} else {
			s->iov[0] = (struct iovec){p, blen[bid] - s->off};
			for (int b = next[bid]; b >= 0 && s->niov < IOVMAX; b = next[b])
				s->iov[s->niov++] = (struct iovec){bufs + (size_t)b * BUFSZ, blen[b]};
			s->mh = (struct msghdr){.msg_iov = s->iov, .msg_iovlen = s->niov};
			io_uring_prep_sendmsg(q, s->peer, &s->mh, MSG_WAITALL);
		}
	} else {
		io_uring_prep_send(q, s->peer, s->buf + s->off, s->blen - s->off, MSG_WAITALL);
	}
	io_uring_sqe_set_data64(q, UD(OP_SEND, s->gen, from, bid));
	s->sending = 1;
}

/* close_pair closes fd and its peer. shutdown first: a recv still in the ring holds the socket
 * open, and shutdown ends it; its completion, like a send's, then comes with an old generation. */
static void close_pair(int fd) {
	int fds[2] = {fd, sides[fd].peer};
	for (int i = 0; i < 2; i++) {
		struct side *s = &sides[fds[i]];
		/* queued buffers go back now, except those a send in flight still reads: they stay
		 * linked from the head, which its completion names, and go back then */
		int b = s->qhead;
		if (s->sending) {
			for (int k = 1; k < s->niov; k++) b = next[b];
			int nb = next[b];
			next[b] = -1;
			b = nb;
		}
		while (b >= 0) {
			int nb = next[b];
			recycle(b);
			b = nb;
		}
		s->peer = -1;
		s->gen++;
		s->rx = RX_OFF;
		s->sending = s->eof = 0;
		s->qhead = s->qtail = -1;
		s->qbytes = s->off = s->blen = 0;
		shutdown(fds[i], SHUT_RDWR);
		close(fds[i]);
	}
}

static void side_init(int fd, int peer) {
	struct side *s = &sides[fd];
	s->peer = peer;
	s->rx = RX_OFF;
	s->sending = s->eof = 0;
	s->qhead = s->qtail = -1;
	s->qbytes = s->off = s->blen = 0;
	if (multishot && !s->iov && !(s->iov = malloc(IOVMAX * sizeof *s->iov))) {
		perror("malloc");
		exit(1);
	}
	if (!multishot && !s->buf && !(s->buf = malloc(BUFCAP))) {
		perror("malloc");
		exit(1);
	}
	arm_recv(fd);
}

/* accepted pairs client c with a new upstream connection: a blocking connect on loopback, which
 * happens once per connection, outside the measured window. */
static void accepted(int c) {
	int one = 1, u = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c >= MAXFD || u < 0 || u >= MAXFD || connect(u, (struct sockaddr *)&upaddr, sizeof upaddr) < 0) {
		close(c);
		if (u >= 0) close(u);
		return;
	}
	setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	setsockopt(u, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	side_init(c, u);
	side_init(u, c);
}

/* received_ms queues ring buffer bid (n bytes from fd) and sends it on unless a send is in flight;
 * a direction holding HOLD bytes stops receiving. */
static void received_ms(int fd, int bid, int n, int more) {
	struct side *s = &sides[fd];
	blen[bid] = (unsigned)n;
	next[bid] = -1;
	if (s->qtail >= 0) next[s->qtail] = bid; else s->qhead = bid;
	s->qtail = bid;
	s->qbytes += (size_t)n;
	if (!more) s->rx = RX_OFF;
	if (!s->sending) send_head(fd);
	if (s->qbytes >= HOLD && s->rx == RX_ARMED) {
		struct io_uring_sqe *q = sqe_get();
		io_uring_prep_cancel64(q, UD(OP_RECV, s->gen, fd, 0), 0);
		io_uring_sqe_set_data64(q, UD(OP_CANCEL, 0, 0, 0));
		s->rx = RX_CANCELLING;
	} else if (s->rx == RX_OFF && s->qbytes < HOLD) {
		arm_recv(fd);
	}
}

/* sent: n of from's oldest bytes reached its peer. */
static void sent(int from, int n) {
	struct side *s = &sides[from];
	s->sending = 0;
	if (!multishot) {
		s->off += (size_t)n;
		if (s->off < s->blen) { send_head(from); return; }
		s->off = s->blen = 0;
		arm_recv(from);
		return;
	}
	s->qbytes -= (size_t)n;
	while (n > 0) { /* the buffers sent whole go back to the ring */
		int bid = s->qhead;
		size_t left = blen[bid] - s->off;
		if ((size_t)n < left) {
			s->off += (size_t)n;
			break;
		}
		n -= (int)left;
		s->off = 0;
		s->qhead = next[bid];
		recycle(bid);
	}
	if (s->qhead >= 0) {
		send_head(from);
	} else if (s->eof) {
		close_pair(from);
		return;
	} else {
		s->qtail = -1;
	}
	if (s->rx == RX_OFF && !s->eof && s->qbytes < HOLD) arm_recv(from);
}

static void completion(struct io_uring_cqe *cqe, int lfd) {
	__u64 ud = cqe->user_data;
	int op = (int)(ud >> 56), fd = (int)((ud >> 16) & 0xffff), res = cqe->res;
	unsigned gen = (unsigned)(ud >> 32) & 0xffffff;
	int has_buf = cqe->flags & IORING_CQE_F_BUFFER, bid = (int)(cqe->flags >> IORING_CQE_BUFFER_SHIFT);
	if (op == OP_ACCEPT) {
		if (res >= 0) accepted(res);
		if (!(cqe->flags & IORING_CQE_F_MORE)) {
			struct io_uring_sqe *q = sqe_get();
			io_uring_prep_multishot_accept(q, lfd, NULL, NULL, SOCK_CLOEXEC);
			io_uring_sqe_set_data64(q, UD(OP_ACCEPT, 0, 0, 0));
		}
		return;
	}
	if (op == OP_CANCEL) return;
	struct side *s = &sides[fd];
	if (s->peer < 0 || gen != (s->gen & 0xffffff)) { /* the connection it was for is closed */
		if (has_buf) recycle(bid);
		for (int b = (int)(ud & 0xffff); op == OP_SEND && multishot && b >= 0;) {
			int nb = next[b]; /* the chain close_pair left */
			recycle(b);
			b = nb;
		}
		return;
	}
	if (op == OP_SEND) {
		if (res <= 0) close_pair(fd); else sent(fd, res);
		return;
	}
	if (res > 0) {
		inputs++;
		if (sepoch[fd] != epoch) {
			sepoch[fd] = epoch;
			marked++;
		}
	}
	if (res > 0 && multishot) {
		received_ms(fd, bid, res, cqe->flags & IORING_CQE_F_MORE);
	} else if (res > 0) {
		s->rx = RX_OFF;
		s->blen = (size_t)res;
		send_head(fd);
	} else if (res == -ENOBUFS) { /* every ring buffer is held: re-armed when one comes back */
		s->rx = RX_OFF;
		if (s->qbytes < HOLD) { /* else sent() re-arms it */
			s->rx = RX_STARVED;
			starved[nstarved++] = fd;
		}
	} else if (res == -ECANCELED && s->rx == RX_CANCELLING) { /* the peer may have caught up since */
		s->rx = RX_OFF;
		if (s->qbytes < HOLD) arm_recv(fd);
	} else if (res == 0 && s->sending) { /* what came before the end still goes to the peer */
		s->eof = 1;
		s->rx = RX_OFF;
	} else {
		close_pair(fd);
	}
}

/* batch_want is how many completions the next wait asks for: 1, or with -batch-wait one per 4
 * sides that received in the last complete epoch, when that is 2 or more (veloq's policy). */
static unsigned batch_want(void) {
	unsigned in = inputs;
	inputs = 0;
	if (!batch_us || in < 2) return 1;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	long long now = ts.tv_sec * 1000000000LL + ts.tv_nsec;
	if (now >= epoch_end) {
		active = marked;
		marked = 0;
		epoch++;
		epoch_end = now + 1000000;
	}
	unsigned n = active / 4;
	return n < 2 ? 1 : n < in ? n : in;
}

/* submit_and_wait submits what the batch asked for and waits in one io_uring_enter. liburing 2.3
 * has no call with the min-wait, so a batched wait publishes the SQ tail as io_uring_submit does
 * (liburing fills the SQ index array once at setup) and enters with the getevents argument, whose
 * pad field is min_wait_usec since 6.12. It needs an overall timeout: without one the kernel ends
 * the wait when the min-wait expires, completions or not. */
static void submit_and_wait(void) {
	unsigned want = batch_want();
	if (want <= 1) {
		io_uring_submit_and_wait(&ring, 1);
		return;
	}
	static struct __kernel_timespec limit = {.tv_sec = 3600};
	unsigned tail = ring.sq.sqe_tail, n = tail - ring.sq.sqe_head;
	ring.sq.sqe_head = tail;
	io_uring_smp_store_release(ring.sq.ktail, tail);
	struct io_uring_getevents_arg arg = {.pad = batch_us, .ts = (unsigned long)&limit};
	unsigned flags = IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG | (reg_ring ? IORING_ENTER_REGISTERED_RING : 0);
	/* ETIME or EINTR: the loop takes what is there and waits again */
	syscall(__NR_io_uring_enter, reg_ring ? ring.enter_ring_fd : ring.ring_fd, n, want, flags, &arg, sizeof arg);
}

static void setup_buf_ring(void) {
	br = mmap(NULL, NBUF * sizeof(struct io_uring_buf), PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
	bufs = mmap(NULL, (size_t)NBUF * BUFSZ, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
	if (br == MAP_FAILED || bufs == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	struct io_uring_buf_reg reg = {.ring_addr = (unsigned long)br, .ring_entries = NBUF, .bgid = BGID};
	int r = io_uring_register_buf_ring(&ring, &reg, 0);
	if (r < 0) {
		fprintf(stderr, "uring_relay: buffer ring: %s\n", strerror(-r));
		exit(1);
	}
	io_uring_buf_ring_init(br);
	bmask = io_uring_buf_ring_mask(NBUF);
	for (int i = 0; i < NBUF; i++) io_uring_buf_ring_add(br, bufs + (size_t)i * BUFSZ, BUFSZ, i, bmask, i);
	io_uring_buf_ring_advance(br, NBUF);
}

int main(int argc, char **argv) {
	struct sockaddr_in addr;
	const char *a = NULL, *u = NULL, *mode = "multishot";
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-addr")) a = argv[i + 1];
		if (!strcmp(argv[i], "-upstream")) u = argv[i + 1];
		if (!strcmp(argv[i], "-recv")) mode = argv[i + 1];
		if (!strcmp(argv[i], "-batch-wait")) batch_us = (unsigned)atoi(argv[i + 1]);
	}
	if (!a || !u || parse_addr(a, &addr) < 0 || parse_addr(u, &upaddr) < 0 ||
	    (strcmp(mode, "multishot") && strcmp(mode, "single"))) {
		fprintf(stderr, "usage: uring_relay -addr 127.0.0.1:PORT -upstream 127.0.0.1:PORT [-recv multishot|single] [-batch-wait USEC]\n");
		return 2;
	}
	multishot = !strcmp(mode, "multishot");
	signal(SIGPIPE, SIG_IGN);
	for (int i = 0; i < MAXFD; i++) sides[i].peer = -1;
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(lfd, 4096) < 0) {
		perror("listen");
		return 1;
	}
	/* DEFER_TASKRUN: completions are produced only inside our io_uring_enter, in one batch, instead
	 * of interrupting the loop (COOP_TASKRUN would add nothing on top of it). */
	struct io_uring_params p = {.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
	                                     IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL,
	                            .cq_entries = 16384};
	int r = io_uring_queue_init_params(4096, &ring, &p);
	if (r < 0) {
		fprintf(stderr, "uring_relay: io_uring: %s\n", strerror(-r));
		return 1;
	}
	reg_ring = io_uring_register_ring_fd(&ring) == 1; /* no fd lookup per io_uring_enter; optional */
	if (batch_us && !(p.features & (1U << 15))) { /* IORING_FEAT_MIN_TIMEOUT */
		fprintf(stderr, "uring_relay: -batch-wait ignored: the kernel has no min-wait (Linux 6.12+)\n");
		batch_us = 0;
	}
	if (multishot) setup_buf_ring();
	struct io_uring_sqe *q = sqe_get();
	io_uring_prep_multishot_accept(q, lfd, NULL, NULL, SOCK_CLOEXEC);
	io_uring_sqe_set_data64(q, UD(OP_ACCEPT, 0, 0, 0));
	for (;;) {
		submit_and_wait();
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;
		io_uring_for_each_cqe(&ring, head, cqe) {
			seen++;
			completion(cqe, lfd);
		}
		io_uring_cq_advance(&ring, seen);
	}
}
