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
 * A datagram longer than a buffer's room (MSG_TRUNC) is dropped, as UDP may. Loopback only.
 * Prints "uring_udp_echo: on 127.0.0.1:PORT (backend uring)" once bound: bench/udp.sh waits for
 * that line, and checks that a server named *uring* says it ran on io_uring.
 * Usage: uring_udp_echo -addr 127.0.0.1:PORT [-send send|sendmsg|sendmmsg]
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
	}
	mode = !strcmp(m, "send") ? SEND : !strcmp(m, "sendmsg") ? SENDMSG : !strcmp(m, "sendmmsg") ? SENDMMSG : -1;
	struct sockaddr_in sa = {.sin_family = AF_INET};
	const char *colon = a ? strrchr(a, ':') : NULL;
	char host[64];
	if (mode < 0 || !colon || (size_t)(colon - a) >= sizeof host) {
		fprintf(stderr, "usage: uring_udp_echo -addr 127.0.0.1:PORT [-send send|sendmsg|sendmmsg]\n");
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
	io_uring_register_ring_fd(&ring); /* no fd lookup per io_uring_enter; optional */
	setup_buf_ring();
	arm_recv();
	socklen_t sl = sizeof sa;
	getsockname(fd, (struct sockaddr *)&sa, &sl);
	printf("uring_udp_echo: on 127.0.0.1:%d (backend uring)\n", ntohs(sa.sin_port));
	fflush(stdout);
	for (;;) {
		io_uring_submit_and_wait(&ring, 1);
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
