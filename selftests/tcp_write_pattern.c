// SPDX-License-Identifier: GPL-2.0
/*
 * tcp_write_pattern - write a scripted sequence of send() calls on one TCP
 * connection and print where each write ends in the byte stream, so that a
 * capture of the segments can be checked write by write (hook_autocork_semantics.sh).
 *
 *   tcp_write_pattern [-C CC] [-n] [-b LPORT] [-r ROUNDS] [-g MS] [-s BYTES]
 *                     ADDR PORT PATTERN
 *
 *   -C CC      TCP_CONGESTION (default: the netns default)
 *   -b LPORT   bind to this local port (to tell connections apart in a capture)
 *   -n         TCP_NODELAY
 *   -r ROUNDS  how many times the pattern is repeated (default 20)
 *   -g MS      pause after each round, ms (default 20): the next round starts
 *              with nothing in flight
 *   -s BYTES   SO_SNDBUFFORCE (needs CAP_NET_ADMIN): a send buffer the
 *              writer never waits for. Where send() blocks for memory the
 *              kernel pushes the tail skb with PSH (tcp_sendmsg_locked's
 *              wait_for_space), so PSH then also ends a segment in the
 *              middle of a write.
 *
 * PATTERN (one round):
 *   psh    40 back-to-back writes of 300 bytes (autocorking merges some)
 *   more   3 writes of 200 bytes with MSG_MORE, 5 ms apart, then 100 bytes
 *          without: the kernel must hold the first 600 bytes until the last
 *   oob    200 bytes, then 100 bytes with MSG_OOB, then 200 bytes
 *
 * Output, one line per write:  "<kind> <end>" where end is the stream offset
 * just after the write's last byte (the first byte is offset 0), kind is
 * "w" (plain), "m" (MSG_MORE), "o" (MSG_OOB) or "e" (the last write of a
 * round).  Exits non-zero with strerror() on any failure.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static unsigned long long off;

static void die(const char *what)
{
	fprintf(stderr, "tcp_write_pattern: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: tcp_write_pattern [-C CC] [-n] [-b LPORT] [-r ROUNDS] [-g MS] [-s BYTES] ADDR PORT psh|more|oob\n");
	exit(2);
}

static void msleep(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* One send() of len bytes that must be taken whole (blocking socket). */
static void wr(int fd, size_t len, int flags, char kind)
{
	static char buf[4096];
	ssize_t n;

	memset(buf, kind, len);
	n = send(fd, buf, len, flags);
	if (n < 0)
		die("send");
	if ((size_t)n != len) {
		fprintf(stderr, "tcp_write_pattern: short send %zd of %zu\n", n, len);
		exit(1);
	}
	off += len;
	printf("%c %llu\n", kind, off);
}

int main(int argc, char **argv)
{
	struct addrinfo hints = { 0 }, *ai;
	int opt, nodelay = 0, rounds = 20, gap = 20, lport = 0, sndbuf = 0, fd, r, i, err;
	const char *cc = NULL, *pattern;
	char drain[256];

	while ((opt = getopt(argc, argv, "C:nb:r:g:s:")) != -1) {
		switch (opt) {
		case 'C':
			cc = optarg;
			break;
		case 'n':
			nodelay = 1;
			break;
		case 'b':
			lport = atoi(optarg);
			break;
		case 'r':
			rounds = atoi(optarg);
			break;
		case 'g':
			gap = atoi(optarg);
			break;
		case 's':
			sndbuf = atoi(optarg);
			if (sndbuf <= 0)
				usage();
			break;
		default:
			usage();
		}
	}
	if (argc - optind != 3)
		usage();
	pattern = argv[optind + 2];
	if (strcmp(pattern, "psh") && strcmp(pattern, "more") && strcmp(pattern, "oob"))
		usage();

	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	err = getaddrinfo(argv[optind], argv[optind + 1], &hints, &ai);
	if (err) {
		fprintf(stderr, "tcp_write_pattern: %s: %s\n", argv[optind], gai_strerror(err));
		return 1;
	}
	fd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (fd < 0)
		die("socket");
	if (cc && setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, strlen(cc)))
		die("TCP_CONGESTION");
	if (nodelay && setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, sizeof(nodelay)))
		die("TCP_NODELAY");
	if (sndbuf && setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)))
		die("SO_SNDBUFFORCE");
	if (lport) {
		struct sockaddr_storage ss = { 0 };
		int one = 1;

		ss.ss_family = ai->ai_family;
		if (ai->ai_family == AF_INET6)
			((struct sockaddr_in6 *)&ss)->sin6_port = htons(lport);
		else
			((struct sockaddr_in *)&ss)->sin_port = htons(lport);
		if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)))
			die("SO_REUSEADDR");
		if (bind(fd, (struct sockaddr *)&ss, ai->ai_addrlen))
			die("bind");
	}
	if (connect(fd, ai->ai_addr, ai->ai_addrlen))
		die("connect");
	freeaddrinfo(ai);
	msleep(gap);

	for (r = 0; r < rounds; r++) {
		if (!strcmp(pattern, "psh")) {
			for (i = 0; i < 39; i++)
				wr(fd, 300, 0, 'w');
			wr(fd, 300, 0, 'e');
		} else if (!strcmp(pattern, "more")) {
			for (i = 0; i < 3; i++) {
				wr(fd, 200, MSG_MORE, 'm');
				msleep(5);
			}
			wr(fd, 100, 0, 'e');
		} else {
			wr(fd, 200, 0, 'w');
			wr(fd, 100, MSG_OOB, 'o');
			wr(fd, 200, 0, 'e');
		}
		fflush(stdout);
		msleep(gap);
	}
	/* Orderly close; wait for the peer's FIN so every segment was sent. */
	if (shutdown(fd, SHUT_WR))
		die("shutdown");
	while (read(fd, drain, sizeof(drain)) > 0)
		;
	close(fd);
	return 0;
}
