/* Minimal single-threaded io_uring UDP echo: the io_uring floor for server CPU per datagram, the
 * counterpart of udp_echo.c. One multishot recvmsg receives every datagram into a buffer of a
 * provided buffer ring (the kernel writes an io_uring_recvmsg_out header, the sender's address and
 * the payload there); each is echoed to its sender straight from that buffer, which goes back to
 * the ring when the echo completes. One io_uring_enter per batch submits the echoes of the last
 * batch and waits for the next (SINGLE_ISSUER + DEFER_TASKRUN, registered ring fd). No GSO/GRO.
 * How echoes leave, chosen by -send:
 *   send (default): IORING_OP_SEND with the destination address (kernel 6.0+), one SQE per datagram;
 *   sendmsg: IORING_OP_SENDMSG, one SQE per datagram, the msghdr kept beside its buffer;
 *   sendmmsg: one sendmmsg(2) per batch after its completions, as veloq's io_uring backend does.
 * -batch-wait USEC (default 0: off) waits as veloq's loops do by default (Config.BatchWait, 20 µs):
 * while many senders are busy, one io_uring_enter asks for a batch of completions (one per 4
 * senders seen in the last millisecond) and waits at most USEC for it once one is there (the
 * kernel's min-wait, Linux 6.12+), as bench/floor/uring_relay.c does.
 * A datagram longer than a buffer's room (MSG_TRUNC) is dropped, as UDP may. Loopback only.
 * Prints "uring_udp_echo: on 127.0.0.1:PORT (backend uring)" once bound: bench/udp.sh waits for
 * that line, and checks that a server named *uring* says it ran on io_uring.
 * Usage: uring_udp_echo -addr 127.0.0.1:PORT [-send send|sendmsg|sendmmsg] [-batch-wait USEC]
 * Build: gcc -O2 -o uring_udp_echo uring_udp_echo.c -luring */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NBUF 1024  /* ring buffers: more than any load here keeps in flight (64 ports x 8) */
#define BUFSZ 4096 /* header + address + payload: datagrams up to about 4 KB (bench/udp.sh: 64, 1200) */
#define BGID 1
enum { OP_RECV = 1, OP_SEND };
enum { SEND, SENDMSG, SENDMMSG };
/* user_data: op in the top byte, the ring buffer id below */
#define UD(op, bid) (((__u64)(op) << 56) | (bid))

static struct io_uring ring;
static struct io_uring_buf_ring *br;
static char *bufs;
static int fd, bmask, mode = SEND;
static struct msghdr rxhdr = {.msg_namelen = sizeof(struct sockaddr_in)}; /* what each buffer holds */
static struct msghdr txhdr[NBUF];  /* SENDMSG: read by the kernel until the send completes */
static struct iovec txiov[NBUF];
static struct mmsghdr batch[NBUF]; /* SENDMMSG: the echoes of one batch */
static int batchbid[NBUF], nbatch;
/* -batch-wait: datagrams since the last wait, and the senders seen per epoch (>= 1 ms); a sender
 * is marked by a hash of its address, so two that share a mark count as one */
static unsigned batch_us, inputs, marked, active;
static unsigned char epoch = 1, marks[1024];
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

static void recycle(int bid) {
	io_uring_buf_ring_add(br, bufs + (size_t)bid * BUFSZ, BUFSZ, bid, bmask, 0);
	io_uring_buf_ring_advance(br, 1);
}

static void arm_recv(void) {
	struct io_uring_sqe *s = sqe_get();
	io_uring_prep_recvmsg_multishot(s, fd, &rxhdr, 0);
	s->flags |= IOSQE_BUFFER_SELECT;
	s->buf_group = BGID;
	io_uring_sqe_set_data64(s, UD(OP_RECV, 0));
}

/* echo sends the datagram in ring buffer bid (res bytes written there) back to its sender. */
static void echo(int bid, int res) {
	char *buf = bufs + (size_t)bid * BUFSZ;
	struct io_uring_recvmsg_out *o = io_uring_recvmsg_validate(buf, res, &rxhdr);
	if (!o || (o->flags & MSG_TRUNC) || o->namelen > rxhdr.msg_namelen) {
		recycle(bid);
		return;
	}
	void *name = io_uring_recvmsg_name(o), *p = io_uring_recvmsg_payload(o, &rxhdr);
	size_t n = io_uring_recvmsg_payload_length(o, res, &rxhdr);
	struct sockaddr_in *from = name;
	unsigned h = (from->sin_addr.s_addr * 2654435761u ^ from->sin_port * 40503u) % 1024;
	inputs++;
	if (marks[h] != epoch) {
		marks[h] = epoch;
		marked++;
	}
	if (mode == SENDMMSG) {
		txiov[bid] = (struct iovec){p, n};
		batch[nbatch].msg_hdr = (struct msghdr){.msg_name = name, .msg_namelen = o->namelen, .msg_iov = &txiov[bid], .msg_iovlen = 1};
		batchbid[nbatch++] = bid;
		return;
	}
	struct io_uring_sqe *s = sqe_get();
	if (mode == SEND) {
		io_uring_prep_send(s, fd, p, n, 0);
		io_uring_prep_send_set_addr(s, name, (__u16)o->namelen);
	} else {
		txiov[bid] = (struct iovec){p, n};
		txhdr[bid] = (struct msghdr){.msg_name = name, .msg_namelen = o->namelen, .msg_iov = &txiov[bid], .msg_iovlen = 1};
		io_uring_prep_sendmsg(s, fd, &txhdr[bid], 0);
	}
	io_uring_sqe_set_data64(s, UD(OP_SEND, bid));
}

/* flush_batch sends the batch's echoes with sendmmsg and gives their buffers back. */
static void flush_batch(void) {
	for (int sent = 0; sent < nbatch;) {
		int m = sendmmsg(fd, batch + sent, nbatch - sent, 0);
		if (m < 0) {
			if (errno == EINTR) continue;
			break; /* a full socket buffer drops the rest, as UDP may */
		}
		sent += m;
	}
	for (int i = 0; i < nbatch; i++) recycle(batchbid[i]);
	nbatch = 0;
}

/* batch_want is how many completions the next wait asks for: 1, or with -batch-wait one per 4
 * senders seen in the last complete epoch, when that is 2 or more (veloq's policy). */
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

/* submit_and_wait: as in uring_relay.c, a batched wait publishes the SQ tail itself (liburing 2.3
 * has no min-wait call) and enters with the getevents argument, whose pad is min_wait_usec since
 * 6.12, and an overall timeout, without which the kernel ends the wait at the min-wait. */
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
		fprintf(stderr, "uring_udp_echo: buffer ring: %s\n", strerror(-r));
		exit(1);
	}
	io_uring_buf_ring_init(br);
	bmask = io_uring_buf_ring_mask(NBUF);
	for (int i = 0; i < NBUF; i++) io_uring_buf_ring_add(br, bufs + (size_t)i * BUFSZ, BUFSZ, i, bmask, i);
	io_uring_buf_ring_advance(br, NBUF);
}

int main(int argc, char **argv) {
	const char *a = NULL, *m = "send";
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-addr")) a = argv[i + 1];
		if (!strcmp(argv[i], "-send")) m = argv[i + 1];
		if (!strcmp(argv[i], "-batch-wait")) batch_us = (unsigned)atoi(argv[i + 1]);
	}
	mode = !strcmp(m, "send") ? SEND : !strcmp(m, "sendmsg") ? SENDMSG : !strcmp(m, "sendmmsg") ? SENDMMSG : -1;
	struct sockaddr_in sa = {.sin_family = AF_INET};
	const char *colon = a ? strrchr(a, ':') : NULL;
	char host[64];
	if (mode < 0 || !colon || (size_t)(colon - a) >= sizeof host) {
		fprintf(stderr, "usage: uring_udp_echo -addr 127.0.0.1:PORT [-send send|sendmsg|sendmmsg] [-batch-wait USEC]\n");
		return 2;
	}
	memcpy(host, a, colon - a);
	host[colon - a] = 0;
	sa.sin_port = htons(atoi(colon + 1));
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		fprintf(stderr, "uring_udp_echo: bad address %s\n", a);
		return 2;
	}
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int sz = 4 << 20; /* as the other servers in bench/udp.sh ask */
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		perror("bind");
		return 1;
	}
	struct io_uring_params p = {.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
	                                     IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL,
	                            .cq_entries = 4 * NBUF};
	int r = io_uring_queue_init_params(NBUF, &ring, &p);
	if (r < 0) {
		fprintf(stderr, "uring_udp_echo: io_uring: %s\n", strerror(-r));
		return 1;
	}
	reg_ring = io_uring_register_ring_fd(&ring) == 1; /* no fd lookup per io_uring_enter; optional */
	if (batch_us && !(p.features & (1U << 15))) { /* IORING_FEAT_MIN_TIMEOUT */
		fprintf(stderr, "uring_udp_echo: -batch-wait ignored: the kernel has no min-wait (Linux 6.12+)\n");
		batch_us = 0;
	}
	setup_buf_ring();
	arm_recv();
	socklen_t sl = sizeof sa;
	getsockname(fd, (struct sockaddr *)&sa, &sl);
	printf("uring_udp_echo: on 127.0.0.1:%d (backend uring)\n", ntohs(sa.sin_port));
	fflush(stdout);
	for (;;) {
		submit_and_wait();
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;
		io_uring_for_each_cqe(&ring, head, cqe) {
			seen++;
			int op = (int)(cqe->user_data >> 56), res = cqe->res;
			if (op == OP_SEND) { /* an error (a full socket buffer) loses that echo, as UDP may */
				recycle((int)(cqe->user_data & 0xffff));
				continue;
			}
			if (res >= 0 && (cqe->flags & IORING_CQE_F_BUFFER))
				echo((int)(cqe->flags >> IORING_CQE_BUFFER_SHIFT), res);
			else if (cqe->flags & IORING_CQE_F_BUFFER)
				recycle((int)(cqe->flags >> IORING_CQE_BUFFER_SHIFT));
			/* ended: out of buffers (ENOBUFS, they come back as echoes complete) or an error */
			if (!(cqe->flags & IORING_CQE_F_MORE)) arm_recv();
		}
		io_uring_cq_advance(&ring, seen);
		if (nbatch > 0) flush_batch();
	}
}
