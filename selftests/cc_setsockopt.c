// SPDX-License-Identifier: GPL-2.0
/*
 * cc_setsockopt - choose a TCP congestion control with setsockopt() and
 * report what the kernel actually uses.
 *
 * Client:  cc_setsockopt [-H SEC] [-D] [-S CC,...] CC ADDR PORT [BYTES]
 *   Opens a TCP socket (IPv4 or IPv6, from ADDR), sets TCP_CONGESTION to CC
 *   (CC "-" leaves the default: netns default or route congctl), connects,
 *   sends BYTES (default 1 MiB), reads TCP_CONGESTION back and prints it on
 *   stdout.  With -H, keeps the socket open for SEC seconds after sending
 *   (used to hold a module reference).  With -D, then disconnects the
 *   socket (connect() to AF_UNSPEC: the kernel's tcp_disconnect()),
 *   connects it again and sends BYTES more.  With -S, switches the live
 *   socket's TCP_CONGESTION to each CC of the list in turn, evenly spread
 *   over the BYTES sent.  Exits non-zero with strerror() on any failure.
 *
 * Sink:    cc_setsockopt -l [-6] PORT
 *   Listens on PORT (any address), accepts connections and discards what
 *   they send until EOF.  Runs until killed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef TCP_CA_NAME_MAX
#define TCP_CA_NAME_MAX 16
#endif

static void usage(void)
{
	fprintf(stderr,
		"usage: cc_setsockopt [-H SEC] CC ADDR PORT [BYTES]\n"
		"       cc_setsockopt -l [-6] PORT\n");
	exit(2);
}

static void die(const char *what)
{
	fprintf(stderr, "cc_setsockopt: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int sink(int v6, const char *port)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t len;
	int fd, one = 1;

	signal(SIGCHLD, SIG_IGN);
	if (v6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_addr = in6addr_any;
		s6->sin6_port = htons(atoi(port));
		len = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		s4->sin_addr.s_addr = htonl(INADDR_ANY);
		s4->sin_port = htons(atoi(port));
		len = sizeof(*s4);
	}
	fd = socket(ss.ss_family, SOCK_STREAM, 0);
	if (fd < 0)
		die("socket");
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)))
		die("SO_REUSEADDR");
	if (bind(fd, (struct sockaddr *)&ss, len))
		die("bind");
	if (listen(fd, 64))
		die("listen");
	for (;;) {
		static char buf[65536];
		int c = accept(fd, NULL, NULL);

		if (c < 0) {
			if (errno == EINTR)
				continue;
			die("accept");
		}
		if (fork() == 0) {
			close(fd);
			while (read(c, buf, sizeof(buf)) > 0)
				;
			_exit(0);
		}
		close(c);
	}
}

static void set_cc(int fd, const char *cc)
{
	if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, strlen(cc)))
		die("setsockopt(TCP_CONGESTION)");
}

/*
 * Send @bytes; with @switches (a comma-separated list of congestion
 * controls), set each in turn after every 1/(n + 1) of them.
 */
static void send_bytes(int fd, unsigned long long bytes, char *switches)
{
	static char buf[65536];
	unsigned long long sent = 0, next = bytes + 1, step = bytes;
	char *cur = switches, *cc;
	int n = 0;

	if (switches) {
		for (cc = switches, n = 1; *cc; cc++)
			n += *cc == ',';
		step = bytes / (n + 1);
		next = step;
	}
	memset(buf, 'x', sizeof(buf));
	while (sent < bytes) {
		unsigned long long left = (next < bytes ? next : bytes) - sent;
		size_t len = left < sizeof(buf) ? left : sizeof(buf);
		ssize_t w = write(fd, buf, len);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			die("write");
		}
		sent += w;
		if (sent == next && cur) {
			cc = strsep(&cur, ",");
			set_cc(fd, cc);
			next = cur ? next + step : bytes + 1;
		}
	}
}

int main(int argc, char **argv)
{
	char name[TCP_CA_NAME_MAX + 1] = { 0 };
	struct addrinfo hints = { 0 }, *ai;
	int opt, listen_mode = 0, v6 = 0, hold = 0, reconnect = 0, fd, err;
	unsigned long long bytes = 1 << 20;
	socklen_t nlen = TCP_CA_NAME_MAX;
	char *switches = NULL;
	const char *cc;

	while ((opt = getopt(argc, argv, "l6H:DS:")) != -1) {
		switch (opt) {
		case 'l':
			listen_mode = 1;
			break;
		case '6':
			v6 = 1;
			break;
		case 'H':
			hold = atoi(optarg);
			break;
		case 'D':
			reconnect = 1;
			break;
		case 'S':
			switches = optarg;
			break;
		default:
			usage();
		}
	}
	argc -= optind;
	argv += optind;

	if (listen_mode) {
		if (argc != 1)
			usage();
		return sink(v6, argv[0]);
	}
	if (argc < 3 || argc > 4)
		usage();
	cc = argv[0];
	if (argc == 4)
		bytes = strtoull(argv[3], NULL, 0);

	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	err = getaddrinfo(argv[1], argv[2], &hints, &ai);
	if (err) {
		fprintf(stderr, "cc_setsockopt: %s: %s\n", argv[1],
			gai_strerror(err));
		return 1;
	}
	fd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (fd < 0)
		die("socket");
	if (strcmp(cc, "-"))
		set_cc(fd, cc);
	if (connect(fd, ai->ai_addr, ai->ai_addrlen))
		die("connect");
	send_bytes(fd, bytes, switches);
	if (reconnect) {
		struct sockaddr unspec = { .sa_family = AF_UNSPEC };

		if (connect(fd, &unspec, sizeof(unspec)))
			die("connect(AF_UNSPEC)");
		if (connect(fd, ai->ai_addr, ai->ai_addrlen))
			die("connect again");
		send_bytes(fd, bytes, NULL);
	}
	freeaddrinfo(ai);
	if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &nlen))
		die("getsockopt(TCP_CONGESTION)");
	name[nlen < TCP_CA_NAME_MAX ? nlen : TCP_CA_NAME_MAX] = '\0';
	printf("%s\n", name);
	fflush(stdout);
	if (hold > 0)
		sleep(hold);
	if (close(fd))
		die("close");
	return 0;
}
