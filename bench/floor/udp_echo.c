/* Minimal single-threaded UDP echo: the floor for server CPU per datagram.
 * One blocking socket; each wake-up takes every datagram queued (up to BATCH) with one recvmmsg
 * (MSG_WAITFORONE: wait for the first, then take what is there) and sends them all back to their
 * senders with one sendmmsg. So a wake-up costs two system calls whatever the batch, which is the
 * least a readiness-style server can do here; no GSO/GRO. Loopback only.
 * Prints "udp_echo: on 127.0.0.1:PORT" once bound (bench/udp.sh waits for that line).
 * Usage: udp_echo -addr 127.0.0.1:PORT
 * Build: gcc -O2 -o udp_echo udp_echo.c */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BATCH 64
#define DGRAM 65536

static char bufs[BATCH][DGRAM];
static struct sockaddr_in peers[BATCH];
static struct iovec iovs[BATCH];
static struct mmsghdr msgs[BATCH];

int main(int argc, char **argv) {
	const char *a = NULL;
	for (int i = 1; i + 1 < argc; i += 2)
		if (!strcmp(argv[i], "-addr")) a = argv[i + 1];
	struct sockaddr_in sa = {.sin_family = AF_INET};
	const char *colon = a ? strrchr(a, ':') : NULL;
	char host[64];
	if (!colon || (size_t)(colon - a) >= sizeof host) {
		fprintf(stderr, "usage: udp_echo -addr 127.0.0.1:PORT\n");
		return 2;
	}
	memcpy(host, a, colon - a);
	host[colon - a] = 0;
	sa.sin_port = htons(atoi(colon + 1));
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		fprintf(stderr, "udp_echo: bad address %s\n", a);
		return 2;
	}
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int sz = 4 << 20; /* as the other servers in bench/udp.sh ask */
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		perror("bind");
		return 1;
	}
	socklen_t sl = sizeof sa;
	getsockname(fd, (struct sockaddr *)&sa, &sl);
	printf("udp_echo: on 127.0.0.1:%d\n", ntohs(sa.sin_port));
	fflush(stdout);
	for (;;) {
		for (int i = 0; i < BATCH; i++) {
			iovs[i] = (struct iovec){.iov_base = bufs[i], .iov_len = DGRAM};
			msgs[i].msg_hdr = (struct msghdr){.msg_name = &peers[i], .msg_namelen = sizeof peers[i], .msg_iov = &iovs[i], .msg_iovlen = 1};
		}
		int n = recvmmsg(fd, msgs, BATCH, MSG_WAITFORONE, NULL);
		if (n < 0) {
			if (errno == EINTR) continue;
			perror("recvmmsg");
			return 1;
		}
		/* echo each datagram to its sender: the received length becomes the sent one */
		for (int i = 0; i < n; i++) iovs[i].iov_len = msgs[i].msg_len;
		for (int sent = 0; sent < n;) {
			int m = sendmmsg(fd, msgs + sent, n - sent, 0);
			if (m < 0) {
				if (errno == EINTR) continue;
				break; /* a full socket buffer drops the rest, as UDP may */
			}
			sent += m;
		}
	}
}
