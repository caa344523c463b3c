// SPDX-License-Identifier: GPL-2.0
/*
 * tcp_peer - a scripted TCP peer on a tun device: measures when the local
 * kernel ACKs each crafted data segment, relative to when the segment was
 * sent and to when the receiving application read it (hook_delack.sh).
 *
 *   tcp_peer [-i IFNAME] [-C CC] [-b RCVBUF] [-w WARMUP] [-r ROUNDS]
 *            [-p PROBES] [-g GAP_MS] [-G REWARM_MS] [-d READ_DELAY_MS]
 *            [-q QA_PAUSE_MS] [-t TIMEOUT_MS]
 *
 *   -i IFNAME  tun device to create (default tpeer0)
 *   -C CC      TCP_CONGESTION of the listening socket, inherited by the
 *              accepted one (default: the netns default)
 *   -b BYTES   SO_RCVBUF of the listening socket, inherited (default 65536;
 *              0 = leave receive-buffer autotuning on).  While the receive
 *              window still grows (rcv_ssthresh below its clamp) every
 *              segment of 128 bytes or more buys the receiver one more
 *              quick ACK, and autotuning keeps raising the clamp as the
 *              application reads: the receiver then ACKs most probes at
 *              once and the delayed-ACK rules are never exercised.  A
 *              fixed buffer lets the warm-up grow the window to its clamp.
 *   -w N       warm-up: N full-MSS segments, sent two at a time, each pair
 *              waiting for its ACK and its read (default 40: enough ACKs
 *              to end the quick-ACK phase, which lasts at most 16 ACKs)
 *   -r N       rounds of probes (default 5)
 *   -p LIST    probes of one round, comma separated, in this order
 *              (default nopsh,psh,short,qa):
 *                nopsh  one full-MSS segment without PSH, read at once
 *                psh    one full-MSS segment with PSH, read at once
 *                short  one PSH segment of 300 + round bytes (below the
 *                       536-byte default MSS, a new length every round)
 *                qa     one full-MSS segment with PSH; the application
 *                       waits until it is readable, sets TCP_QUICKACK,
 *                       waits QA_PAUSE_MS, then reads
 *   -g MS      pause after a probe is ACKed and read, before the next
 *              segment (default 10).  Keep data gaps far below the RTO
 *              (200 ms): a longer gap puts the receiver back in quick-ACK.
 *   -G MS      stall guard (default 150, 0 = off).  An emulated guest can
 *              stall for most of a second, also inside the write of a
 *              segment; a receiver that sees a data gap longer than its
 *              RTO (>= 200 ms) goes back to quick-ACK for up to 16 ACKs.
 *              The gap of a segment is taken from before the previous
 *              data write to after its own, an upper bound of what the
 *              receiver saw.  A probe whose gap exceeds MS is marked
 *              stale=1 and the peer warms up again before the next probe
 *              (also when the gap already exceeds MS before a probe); a
 *              warm-up pair with such a gap starts the warm-up count again.
 *   -d MS      the application waits MS after the data is readable before
 *              it reads, in the nopsh/psh/short probes (default 0)
 *   -q MS      QA_PAUSE_MS (default 15: an ACK sent on arrival or at the
 *              setsockopt shows as about -15 ms after the read)
 *   -t MS      how long to wait for an ACK (default 1000)
 *
 * The program gives IFNAME 10.77.0.1/24 and brings it up (in the current
 * network namespace).  A thread is the kernel-side application: it listens
 * on port 5500, accepts one connection, never writes to it (a receiver that
 * sends data enters pingpong mode) and reads only when the main thread
 * tells it to.  The main thread is the remote peer, 10.77.0.2: it writes
 * IPv4/TCP segments to the tun fd and reads the kernel's replies from it.
 * Its SYN carries only an MSS option (1460, the tun's MTU 1500), so the
 * connection has no window scaling, SACK or timestamps and every data
 * segment has a 20-byte TCP header.  The peer never sends out of order and
 * starts a probe only when everything before it is ACKed and read.
 *
 * Output (stdout), one line per event, key=value:
 *   handshake cc=CC mss=1460 ms=T
 *   warmup why=start|gap segs=N acks=A restarts=R ms=T
 *   rewarm before=NAME round=R gap_ms=G
 *   probe=NAME round=R len=L psh=0|1 ack_after_send_ms=X
 *         ack_after_read_ms=Y ack_after_rstart_ms=B read_after_send_ms=Z
 *         gap_ms=G stale=0|1
 *         acks=K [qa_after_send_ms=Q ack_after_qa_ms=W]
 *   info when=warmup|end rcv_mss=M ato_ms=A rcv_ssthresh=S rcv_space=B cc=CC
 * gap_ms is the probe's gap (see -G); acks is the number of ACKs the kernel
 * sent while the probe ran; an ACK that never came is reported as "nan".
 * Exits 0 when every probe ran, 1 on errors.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define LOCAL_ADDR	"10.77.0.1"	/* the kernel under test, on the tun */
#define PEER_ADDR	"10.77.0.2"	/* this peer, behind the tun */
#define SRV_PORT	5500
#define MSS		1460
#define PEER_WIN	65535
#define MAX_PKT		2048

#ifndef TCP_CA_NAME_MAX
#define TCP_CA_NAME_MAX 16
#endif

enum { OP_READ, OP_READ_QA, OP_QUIT };

struct app_cmd {
	int op;
	int len;	/* bytes to read */
	int delay_ms;	/* OP_READ: wait this long once readable */
	int pause_ms;	/* OP_READ_QA: between TCP_QUICKACK and the read */
};

struct app_report {
	double t_rstart;	/* when that read began (after any wait) */
	double t_read;	/* when the read that got the last byte returned */
	double t_qa;	/* when setsockopt(TCP_QUICKACK) returned */
};

static const char *ifname = "tpeer0";
static const char *cc;
static int rcvbuf = 65536;
static int warmup = 40, rounds = 5, gap_ms = 10, read_delay_ms;
static int qa_pause_ms = 15, timeout_ms = 1000, rewarm_ms = 150;
static char probes[256] = "nopsh,psh,short,qa";

static int tun_fd;
static int cmd_pipe[2], rep_pipe[2];
static int conn_fd = -1;
static uint32_t peer_addr, local_addr;	/* network order */
static uint16_t peer_port;
static uint32_t snd_nxt, rcv_nxt;	/* peer's view */
static uint32_t last_ack;
static double t_data_start;	/* before the write of the last data segment */
static int need_rewarm;

static void die(const char *what)
{
	fprintf(stderr, "tcp_peer: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void fail(const char *what)
{
	fprintf(stderr, "tcp_peer: %s\n", what);
	exit(1);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: tcp_peer [-i IFNAME] [-C CC] [-b RCVBUF] [-w WARMUP] [-r ROUNDS]\n"
		"                [-p PROBES] [-g GAP_MS] [-G REWARM_MS] [-d READ_DELAY_MS]\n"
		"                [-q QA_PAUSE_MS] [-t TIMEOUT_MS]\n");
	exit(2);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void msleep(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void xwrite(int fd, const void *buf, size_t len, const char *what)
{
	if (write(fd, buf, len) != (ssize_t)len)
		die(what);
}

static void xread(int fd, void *buf, size_t len, const char *what)
{
	ssize_t n = read(fd, buf, len);

	if (n != (ssize_t)len) {
		if (n >= 0)
			errno = EPIPE;
		die(what);
	}
}

/* ---------------------------------------------------------------------- */
/* The kernel-side application (a thread). */

static void *app_main(void *arg)
{
	struct sockaddr_in sin = { 0 };
	static char buf[65536];
	int lfd, one = 1;
	char c = 'L';

	(void)arg;
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0)
		die("socket");
	if (setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)))
		die("SO_REUSEADDR");
	if (rcvbuf && setsockopt(lfd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)))
		die("SO_RCVBUF");
	if (cc && setsockopt(lfd, IPPROTO_TCP, TCP_CONGESTION, cc, strlen(cc)))
		die("setsockopt(TCP_CONGESTION)");
	sin.sin_family = AF_INET;
	sin.sin_port = htons(SRV_PORT);
	sin.sin_addr.s_addr = local_addr;
	if (bind(lfd, (struct sockaddr *)&sin, sizeof(sin)))
		die("bind");
	if (listen(lfd, 1))
		die("listen");
	xwrite(rep_pipe[1], &c, 1, "report pipe");
	conn_fd = accept(lfd, NULL, NULL);
	if (conn_fd < 0)
		die("accept");
	close(lfd);
	c = 'A';
	xwrite(rep_pipe[1], &c, 1, "report pipe");

	for (;;) {
		struct app_report rep = { 0, 0, 0 };
		struct app_cmd cmd;
		int got = 0;

		xread(cmd_pipe[0], &cmd, sizeof(cmd), "command pipe");
		if (cmd.op == OP_QUIT)
			break;
		if (cmd.op == OP_READ_QA || cmd.delay_ms) {
			struct pollfd p = { .fd = conn_fd, .events = POLLIN };

			while (poll(&p, 1, -1) < 0)
				if (errno != EINTR)
					die("poll");
		}
		if (cmd.op == OP_READ_QA) {
			if (setsockopt(conn_fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one)))
				die("setsockopt(TCP_QUICKACK)");
			rep.t_qa = now();
			msleep(cmd.pause_ms);
		} else if (cmd.delay_ms) {
			msleep(cmd.delay_ms);
		}
		rep.t_rstart = now();
		while (got < cmd.len) {
			ssize_t n = recv(conn_fd, buf, sizeof(buf), 0);

			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				die("recv");
			if (n == 0)
				fail("recv: connection closed");
			got += n;
		}
		rep.t_read = now();
		xwrite(rep_pipe[1], &rep, sizeof(rep), "report pipe");
	}
	return NULL;
}

static void app_send(int op, int len, int delay_ms, int pause_ms)
{
	struct app_cmd cmd = { op, len, delay_ms, pause_ms };

	xwrite(cmd_pipe[1], &cmd, sizeof(cmd), "command pipe");
}

/* ---------------------------------------------------------------------- */
/* The peer: packets on the tun. */

static uint32_t csum_add(uint32_t sum, const void *data, size_t len)
{
	const uint8_t *p = data;

	while (len > 1) {
		sum += (p[0] << 8) | p[1];
		p += 2;
		len -= 2;
	}
	if (len)
		sum += p[0] << 8;
	return sum;
}

static uint16_t csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return htons(~sum & 0xffff);
}

/*
 * Send one segment from the peer: FLAGS (TH_*), LEN payload bytes, with an
 * MSS option when it is a SYN.  Returns the time it was written.
 */
static double send_seg(uint8_t flags, int len)
{
	uint8_t pkt[MAX_PKT] = { 0 };
	struct iphdr *ip = (struct iphdr *)pkt;
	struct tcphdr *th = (struct tcphdr *)(pkt + sizeof(*ip));
	int optlen = (flags & TH_SYN) ? 4 : 0;
	int thlen = sizeof(*th) + optlen;
	int tot = sizeof(*ip) + thlen + len;
	uint8_t *opt = (uint8_t *)(th + 1);
	uint32_t sum;
	uint8_t ph[12];
	double t;

	ip->version = 4;
	ip->ihl = 5;
	ip->tot_len = htons(tot);
	ip->id = htons(snd_nxt & 0xffff);
	ip->frag_off = htons(IP_DF);
	ip->ttl = 64;
	ip->protocol = IPPROTO_TCP;
	ip->saddr = peer_addr;
	ip->daddr = local_addr;
	ip->check = csum_fold(csum_add(0, ip, sizeof(*ip)));

	th->source = htons(peer_port);
	th->dest = htons(SRV_PORT);
	th->seq = htonl(snd_nxt);
	th->ack_seq = (flags & TH_ACK) ? htonl(rcv_nxt) : 0;
	th->doff = thlen / 4;
	((uint8_t *)th)[13] = flags;
	th->window = htons(PEER_WIN);
	if (optlen) {
		opt[0] = TCPOPT_MAXSEG;
		opt[1] = TCPOLEN_MAXSEG;
		opt[2] = MSS >> 8;
		opt[3] = MSS & 0xff;
	}
	memset(opt + optlen, 'a' + (snd_nxt % 26), len);

	memcpy(ph, &ip->saddr, 4);
	memcpy(ph + 4, &ip->daddr, 4);
	ph[8] = 0;
	ph[9] = IPPROTO_TCP;
	ph[10] = (thlen + len) >> 8;
	ph[11] = (thlen + len) & 0xff;
	sum = csum_add(0, ph, sizeof(ph));
	sum = csum_add(sum, th, thlen + len);
	th->check = csum_fold(sum);

	xwrite(tun_fd, pkt, tot, "write tun");
	t = now();
	snd_nxt += len + ((flags & (TH_SYN | TH_FIN)) ? 1 : 0);
	return t;
}

/*
 * Send a data segment; *GAP_MS is an upper bound of the time the receiver
 * saw between the previous data segment and this one (from before the
 * previous write to after this one: a guest stall inside a write counts).
 */
static double send_data(uint8_t flags, int len, double *gap_ms)
{
	double t0 = now(), t1;

	t1 = send_seg(flags, len);
	*gap_ms = t_data_start ? (t1 - t_data_start) * 1000 : 0;
	t_data_start = t0;
	return t1;
}

struct seg_in {
	uint8_t flags;
	uint32_t seq, ack;
	int len;
	int mss;	/* from a SYN's options, 0 if none */
};

/*
 * Read packets from the tun until one of our connection arrives or the
 * report pipe is readable; wait at most until DEADLINE.  Returns 1 with *S
 * filled for a segment, 2 when the report pipe is readable, 0 on timeout.
 */
static int recv_seg(double deadline, struct seg_in *s, int watch_reports)
{
	uint8_t pkt[MAX_PKT];

	for (;;) {
		struct pollfd p[2] = {
			{ .fd = tun_fd, .events = POLLIN },
			{ .fd = rep_pipe[0], .events = POLLIN },
		};
		double left = deadline - now();
		struct tcphdr *th;
		struct iphdr *ip;
		ssize_t n;
		int r;

		if (left <= 0)
			return 0;
		r = poll(p, watch_reports ? 2 : 1, (int)(left * 1000) + 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die("poll");
		if (r == 0)
			continue;
		if (p[0].revents & (POLLERR | POLLHUP | POLLNVAL))
			fail("tun fd error");
		if (!(p[0].revents & POLLIN))
			return 2;
		n = read(tun_fd, pkt, sizeof(pkt));
		if (n < 0)
			die("read tun");
		ip = (struct iphdr *)pkt;
		if (n < (ssize_t)sizeof(*ip) || ip->version != 4 ||
		    ip->protocol != IPPROTO_TCP || ip->daddr != peer_addr)
			continue;
		if (n < ip->ihl * 4 + (ssize_t)sizeof(*th))
			continue;
		th = (struct tcphdr *)(pkt + ip->ihl * 4);
		if (ntohs(th->dest) != peer_port || ntohs(th->source) != SRV_PORT)
			continue;
		s->flags = ((uint8_t *)th)[13];
		s->seq = ntohl(th->seq);
		s->ack = ntohl(th->ack_seq);
		s->len = ntohs(ip->tot_len) - ip->ihl * 4 - th->doff * 4;
		s->mss = 0;
		if (s->flags & TH_SYN) {
			uint8_t *o = (uint8_t *)(th + 1), *end = (uint8_t *)th + th->doff * 4;

			while (o < end && *o != TCPOPT_EOL) {
				if (*o == TCPOPT_NOP) {
					o++;
					continue;
				}
				if (o + 1 >= end || o[1] < 2)
					break;
				if (*o == TCPOPT_MAXSEG && o[1] == TCPOLEN_MAXSEG)
					s->mss = (o[2] << 8) | o[3];
				o += o[1];
			}
		}
		if (s->flags & TH_RST)
			fail("the kernel reset the connection");
		if (s->len > 0)
			fail("the kernel sent data (it must only receive)");
		return 1;
	}
}

static void wait_char(char want, const char *what)
{
	char c;

	xread(rep_pipe[0], &c, 1, what);
	if (c != want)
		fail(what);
}

static void tun_setup(void)
{
	struct sockaddr_in *sin;
	struct ifreq ifr;
	int s;

	tun_fd = open("/dev/net/tun", O_RDWR);
	if (tun_fd < 0)
		die("open /dev/net/tun");
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", ifname);
	if (ioctl(tun_fd, TUNSETIFF, &ifr))
		die("TUNSETIFF");

	s = socket(AF_INET, SOCK_DGRAM, 0);
	if (s < 0)
		die("socket");
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", ifname);
	sin = (struct sockaddr_in *)&ifr.ifr_addr;
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = local_addr;
	if (ioctl(s, SIOCSIFADDR, &ifr))
		die("SIOCSIFADDR");
	inet_pton(AF_INET, "255.255.255.0", &sin->sin_addr);
	if (ioctl(s, SIOCSIFNETMASK, &ifr))
		die("SIOCSIFNETMASK");
	ifr.ifr_mtu = MSS + 40;
	if (ioctl(s, SIOCSIFMTU, &ifr))
		die("SIOCSIFMTU");
	if (ioctl(s, SIOCGIFFLAGS, &ifr))
		die("SIOCGIFFLAGS");
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr))
		die("SIOCSIFFLAGS");
	close(s);
}

static void handshake(void)
{
	char name[TCP_CA_NAME_MAX + 1] = { 0 };
	socklen_t nlen = TCP_CA_NAME_MAX;
	struct seg_in s;
	double t0 = now();
	int tries, mss = 0;

	for (tries = 0; tries < 3 && !mss; tries++) {
		snd_nxt -= tries ? 1 : 0;
		send_seg(TH_SYN, 0);
		while (recv_seg(now() + 1.0, &s, 0) == 1) {
			if ((s.flags & (TH_SYN | TH_ACK)) == (TH_SYN | TH_ACK) &&
			    s.ack == snd_nxt) {
				rcv_nxt = s.seq + 1;
				mss = s.mss ? s.mss : 536;
				break;
			}
		}
	}
	if (!mss)
		fail("no SYN-ACK from the kernel");
	last_ack = snd_nxt;
	send_seg(TH_ACK, 0);
	wait_char('A', "accept");
	if (getsockopt(conn_fd, IPPROTO_TCP, TCP_CONGESTION, name, &nlen))
		die("getsockopt(TCP_CONGESTION)");
	printf("handshake cc=%s mss=%d ms=%.3f\n", name, mss, (now() - t0) * 1000);
	fflush(stdout);
}

/*
 * Wait until the kernel ACKs up to snd_nxt and (if WANT_REPORT) the
 * application has reported its read.  Fills *T_ACK (0 if no ACK came
 * before the timeout) and *REP; returns the number of ACKs seen.
 */
static int wait_ack_and_read(double *t_ack, struct app_report *rep, int want_report)
{
	double deadline = now() + timeout_ms / 1000.0;
	int acks = 0, have_rep = !want_report;
	struct seg_in s;

	*t_ack = 0;
	while (!*t_ack || !have_rep) {
		int r = recv_seg(have_rep ? deadline : now() + 30, &s, !have_rep);

		if (r == 0)
			break;
		if (r == 2) {
			xread(rep_pipe[0], rep, sizeof(*rep), "report pipe");
			have_rep = 1;
			continue;
		}
		if (!(s.flags & TH_ACK))
			continue;
		acks++;
		if ((int32_t)(s.ack - last_ack) > 0)
			last_ack = s.ack;
		if (!*t_ack && last_ack == snd_nxt)
			*t_ack = now();
	}
	if (!have_rep)
		fail("the application did not read");
	return acks;
}

/*
 * Full-MSS segments in pairs (each pair ACKed and read before the next)
 * until WARMUP of them went out with no gap longer than REWARM_MS: a pair
 * after a longer gap may have put the receiver back in quick-ACK, so the
 * count starts again from it.
 */
static void do_warmup(const char *why)
{
	int i = 0, segs = 0, restarts = 0, acks = 0, n;
	struct app_report rep;
	double t0 = now(), t_ack, gap, gap2 = 0;

	while (i < warmup) {
		n = warmup - i < 2 ? 1 : 2;
		app_send(OP_READ, n * MSS, 0, 0);
		send_data(TH_ACK, MSS, &gap);
		if (n == 2)
			send_data(TH_ACK, MSS, &gap2);
		acks += wait_ack_and_read(&t_ack, &rep, 1);
		if (!t_ack)
			fail("warm-up segment not ACKed");
		if (rewarm_ms && segs && (gap > rewarm_ms || gap2 > rewarm_ms)) {
			i = 0;
			restarts++;
		}
		i += n;
		segs += n;
	}
	need_rewarm = 0;
	printf("warmup why=%s segs=%d acks=%d restarts=%d ms=%.3f\n", why, segs, acks,
	       restarts, (now() - t0) * 1000);
	fflush(stdout);
}

static void fmt_ms(char *buf, size_t sz, double a, double b)
{
	if (!a || !b)
		snprintf(buf, sz, "nan");
	else
		snprintf(buf, sz, "%.3f", (a - b) * 1000);
}

static void do_probe(const char *name, int round)
{
	int len = MSS, psh = 1, op = OP_READ, acks, stale;
	char as[32], ar[32], rs[32], qs[32], aq[32], ab[32];
	struct app_report rep;
	double t_send, t_ack, gap;

	if (!strcmp(name, "nopsh"))
		psh = 0;
	else if (!strcmp(name, "short"))
		len = 300 + round;
	else if (!strcmp(name, "qa"))
		op = OP_READ_QA;
	gap = t_data_start ? (now() - t_data_start) * 1000 : 0;
	if (rewarm_ms && (need_rewarm || gap > rewarm_ms)) {
		/* The guest stalled (TCG): the receiver may be in quick-ACK. */
		printf("rewarm before=%s round=%d gap_ms=%.3f\n", name, round, gap);
		do_warmup("gap");
	}
	app_send(op, len, read_delay_ms, qa_pause_ms);
	t_send = send_data(TH_ACK | (psh ? TH_PUSH : 0), len, &gap);
	stale = rewarm_ms && gap > rewarm_ms;
	need_rewarm |= stale;
	acks = wait_ack_and_read(&t_ack, &rep, 1);

	fmt_ms(as, sizeof(as), t_ack, t_send);
	fmt_ms(ar, sizeof(ar), t_ack, rep.t_read);
	fmt_ms(rs, sizeof(rs), rep.t_read, t_send);
	fmt_ms(ab, sizeof(ab), t_ack, rep.t_rstart);
	printf("probe=%s round=%d len=%d psh=%d ack_after_send_ms=%s ack_after_read_ms=%s",
	       name, round, len, psh, as, ar);
	printf(" ack_after_rstart_ms=%s", ab);
	printf(" read_after_send_ms=%s gap_ms=%.3f stale=%d acks=%d", rs, gap, stale, acks);
	if (op == OP_READ_QA) {
		fmt_ms(qs, sizeof(qs), rep.t_qa, t_send);
		fmt_ms(aq, sizeof(aq), t_ack, rep.t_qa);
		printf(" qa_after_send_ms=%s ack_after_qa_ms=%s", qs, aq);
	}
	printf("\n");
	fflush(stdout);
	if (!t_ack) {
		/* Not ACKed in time: wait for the ACK so the next probe starts clean. */
		while (last_ack != snd_nxt) {
			struct seg_in s;

			if (recv_seg(now() + 5, &s, 0) != 1)
				fail("a probe was never ACKed");
			if ((s.flags & TH_ACK) && (int32_t)(s.ack - last_ack) > 0)
				last_ack = s.ack;
		}
	}
	msleep(gap_ms);
}

static void print_info(const char *when)
{
	char name[TCP_CA_NAME_MAX + 1] = { 0 };
	socklen_t nlen = TCP_CA_NAME_MAX, ilen;
	struct tcp_info ti;

	ilen = sizeof(ti);
	if (getsockopt(conn_fd, IPPROTO_TCP, TCP_INFO, &ti, &ilen))
		die("getsockopt(TCP_INFO)");
	if (getsockopt(conn_fd, IPPROTO_TCP, TCP_CONGESTION, name, &nlen))
		die("getsockopt(TCP_CONGESTION)");
	printf("info when=%s rcv_mss=%u ato_ms=%.3f rcv_ssthresh=%u rcv_space=%u cc=%s\n",
	       when, ti.tcpi_rcv_mss, ti.tcpi_ato / 1000.0, ti.tcpi_rcv_ssthresh,
	       ti.tcpi_rcv_space, name);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	char list[sizeof(probes)], *name, *save;
	pthread_t app;
	int opt, r;

	while ((opt = getopt(argc, argv, "i:C:b:w:r:p:g:G:d:q:t:")) != -1) {
		switch (opt) {
		case 'i':
			ifname = optarg;
			break;
		case 'C':
			cc = optarg;
			break;
		case 'b':
			rcvbuf = atoi(optarg);
			break;
		case 'w':
			warmup = atoi(optarg);
			break;
		case 'r':
			rounds = atoi(optarg);
			break;
		case 'p':
			snprintf(probes, sizeof(probes), "%s", optarg);
			break;
		case 'g':
			gap_ms = atoi(optarg);
			break;
		case 'G':
			rewarm_ms = atoi(optarg);
			break;
		case 'd':
			read_delay_ms = atoi(optarg);
			break;
		case 'q':
			qa_pause_ms = atoi(optarg);
			break;
		case 't':
			timeout_ms = atoi(optarg);
			break;
		default:
			usage();
		}
	}
	if (optind != argc || rcvbuf < 0 || warmup < 0 || rounds < 0 || gap_ms < 0 ||
	    rewarm_ms < 0 || read_delay_ms < 0 || qa_pause_ms < 0 || timeout_ms <= 0)
		usage();

	memcpy(list, probes, sizeof(list));
	for (name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
		if (strcmp(name, "nopsh") && strcmp(name, "psh") &&
		    strcmp(name, "short") && strcmp(name, "qa")) {
			fprintf(stderr, "tcp_peer: unknown probe %s\n", name);
			usage();
		}
	}

	inet_pton(AF_INET, LOCAL_ADDR, &local_addr);
	inet_pton(AF_INET, PEER_ADDR, &peer_addr);
	peer_port = 40000 + getpid() % 20000;
	snd_nxt = (uint32_t)(now() * 1e6) * 2654435761u;

	tun_setup();
	if (pipe(cmd_pipe) || pipe(rep_pipe))
		die("pipe");
	if (pthread_create(&app, NULL, app_main, NULL))
		fail("pthread_create failed");
	wait_char('L', "listen");

	handshake();
	if (warmup)
		do_warmup("start");
	print_info("warmup");
	for (r = 1; r <= rounds; r++) {
		memcpy(list, probes, sizeof(list));
		for (name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save))
			do_probe(name, r);
	}
	print_info("end");

	send_seg(TH_RST | TH_ACK, 0);
	app_send(OP_QUIT, 0, 0, 0);
	pthread_join(app, NULL);
	close(conn_fd);
	close(tun_fd);
	return 0;
}
