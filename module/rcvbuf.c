// SPDX-License-Identifier: GPL-2.0
/*
 * Receive-buffer policy: net.ipv4.bbrx.rcvbuf, the per-MSS sizing of the
 * 2013 proposal "tcp: rcvbuf autotuning improvements" (Eric Dumazet's
 * netdev series; not merged in that form).
 *
 * With TSO/GSO off at the sender every segment is its own skb, and each
 * costs a power-of-two slab object plus an sk_buff, more than the kernel's
 * SKB_TRUESIZE(advmss + MAX_TCP_HEADER) estimate; receivers with default
 * settings were then window-limited at low and mid RTTs (1150 vs 2906 Mbit/s
 * at 0 ms in the report). The proposal:
 *
 *   per_mss = roundup_pow_of_two(mss + MAX_TCP_HEADER +
 *                                SKB_DATA_ALIGN(sizeof(skb_shared_info)))
 *             + SKB_DATA_ALIGN(sizeof(struct sk_buff))
 *   rcvmem  = 2 * init_rwnd * per_mss, * 4 when tcp_moderate_rcvbuf is on
 *             (room for the 2-3 RTTs dynamic right-sizing needs to react)
 *
 * with mss = max(advmss, mss_cache) and init_rwnd = 20 segments for
 * mss <= 1460, else max(1460 * 20 / mss, 2) (its tcp_default_init_rwnd(),
 * gone from the kernel since 4.19).
 *
 *   0 kernel   sk_rcvbuf starts at tcp_rmem[1] (6.1)
 *   1 per_mss  at establishment sk_rcvbuf = max(sk_rcvbuf, min(rcvmem,
 *              tcp_rmem[2])); when the kernel grows the buffer, its
 *              window rule stays and its per-segment estimate is replaced
 *              by per_mss. Never when the application set SO_RCVBUF.
 *
 * Mechanisms: an ftrace callback at the entry of tcp_init_transfer(), which
 * runs on both sides at establishment right before tcp_init_buffer_space()
 * derives window_clamp and rcvq_space from sk_rcvbuf; and an ftrace
 * redirect, for in-scope sockets, of the function that grows the buffer:
 * tcp_rcv_space_adjust() through 6.12, tcp_rcvbuf_grow() on 7.x (both of
 * its callers: tcp_rcv_space_adjust() and tcp_data_queue_ofo()). Not a
 * kretprobe: kprobes on the ftrace site of this hot function crashed the
 * guest (a jump to address 0 from its caller) while the module was loaded
 * and unloaded under traffic.
 */
#include <linux/kernel.h>
#include <linux/log2.h>
#include <linux/seq_file.h>
#include <linux/skbuff.h>
#include <linux/slab.h>
#include <net/tcp.h>

#include "bbrx.h"
#include "bbrx_trace.h"
#include "compat.h"
#include "hook.h"

/* The proposal's initial receive window, segments. */
#define BBRX_INIT_RWND		20
#define BBRX_INIT_RWND_MSS	1460

static bool bbrx_rcvbuf_acts(struct sock *sk, struct bbrx_net *bn)
{
	return bbrx_policy(bn, BBRX_POL_RCVBUF) != BBRX_POLICY_KERNEL &&
	       !(sk->sk_userlocks & SOCK_RCVBUF_LOCK) &&
	       bbrx_sk_in_scope(sk, bn);
}

/* Memory one received MSS costs: power-of-two data + sk_buff, bytes. */
static u32 bbrx_rcvbuf_per_mss(u32 mss)
{
	return roundup_pow_of_two(mss + MAX_TCP_HEADER +
				  SKB_DATA_ALIGN(sizeof(struct skb_shared_info))) +
	       SKB_DATA_ALIGN(sizeof(struct sk_buff));
}

/**
 * bbrx_rcvbuf_show() - append this build's per_mss formula to the status line
 * @seq: /proc/net/bbrx_hooks being read
 *
 * Prints " per_mss=pow2(mss+H)+S", bytes: H is MAX_TCP_HEADER plus the
 * aligned skb_shared_info, S the aligned sk_buff. Both depend on the kernel
 * build (the generic flavour of 6.1 reserves more link-layer headroom than
 * cloud: per_mss 4352 instead of 2304 for MSS 1448), so users and tests
 * read them here rather than assuming one build's values.
 */
static void bbrx_rcvbuf_show(struct seq_file *seq)
{
	seq_printf(seq, " per_mss=pow2(mss+%zu)+%zu",
		   (size_t)MAX_TCP_HEADER +
		   SKB_DATA_ALIGN(sizeof(struct skb_shared_info)),
		   (size_t)SKB_DATA_ALIGN(sizeof(struct sk_buff)));
}

static u32 bbrx_rcvbuf_mss(const struct tcp_sock *tp)
{
	return max_t(u32, tp->advmss, tp->mss_cache);
}

/**
 * bbrx_rcvbuf_init_transfer() - size sk_rcvbuf per MSS at establishment
 * @sk: the socket tcp_init_transfer() is about to finish setting up
 *
 * Runs at the entry of tcp_init_transfer(), so the kernel's own
 * tcp_init_buffer_space() then derives window_clamp (tcp_full_space) and
 * rcv_ssthresh from the larger buffer. The window scale and the initial
 * window were fixed at SYN time and do not change.
 */
static void bbrx_rcvbuf_init_transfer(struct sock *sk)
{
	struct bbrx_net *bn = bbrx_pernet(sock_net(sk));
	const struct net *net = sock_net(sk);
	u32 mss, rwnd, rcvmem;
	int target;

	/* the entry hook reads the socket, tcp_init_transfer()'s first argument */
	BUILD_BUG_ON(!__same_type(&tcp_init_transfer,
				  void (*)(struct sock *, int, struct sk_buff *)));
	if (!bbrx_rcvbuf_acts(sk, bn))
		return;

	mss = bbrx_rcvbuf_mss(tcp_sk(sk));
	if (!mss)
		return;
	rwnd = BBRX_INIT_RWND;
	if (mss > BBRX_INIT_RWND_MSS)
		rwnd = max_t(u32, BBRX_INIT_RWND_MSS * BBRX_INIT_RWND / mss, 2);
	rcvmem = 2 * rwnd * bbrx_rcvbuf_per_mss(mss);
	if (READ_ONCE(net->ipv4.sysctl_tcp_moderate_rcvbuf))
		rcvmem *= 4;

	target = min_t(u32, rcvmem, READ_ONCE(net->ipv4.sysctl_tcp_rmem[2]));
	if (target <= READ_ONCE(sk->sk_rcvbuf))
		return;
	WRITE_ONCE(sk->sk_rcvbuf, target);
	bbrx_stat_inc(bn, BBRX_STAT_RCVBUF_SIZED);
	if (trace_bbrx_rcvbuf_enabled())
		bbrx_trace_hook(sk, BBRX_POL_RCVBUF,
				bbrx_policy(bn, BBRX_POL_RCVBUF),
				BBRX_TRACE_SIZED, target);
}

/**
 * bbrx_rcvbuf_grow_wants() - does the growth redirect act on this socket?
 * @sk: the socket the growth function was called for
 *
 * Return: true with rcvbuf 1, @sk in scope and no SO_RCVBUF lock.
 */
static bool bbrx_rcvbuf_grow_wants(struct sock *sk)
{
	return bbrx_rcvbuf_acts(sk, bbrx_pernet(sock_net(sk)));
}

/*
 * Memory charged per segment when the buffer grows: per_mss, raised in
 * 128-byte steps (as the kernel raises its own estimate) until one
 * segment's worth of it still offers an advmss of window after
 * tcp_adv_win_scale. Without that, a buffer of N * per_mss would offer
 * fewer than N segments of window (1152 bytes each with per_mss 2304 and
 * the default scale of 1) and cap throughput at long RTTs.
 */
static u32 bbrx_rcvbuf_seg_mem(const struct sock *sk, const struct tcp_sock *tp)
{
	u32 mem = bbrx_rcvbuf_per_mss(bbrx_rcvbuf_mss(tp));

	while (tcp_win_from_space(sk, mem) < tp->advmss)
		mem += 128;
	return mem;
}

/*
 * Raise sk_rcvbuf to @mem (capped by tcp_rmem[2]) and the window clamp with
 * it, as the kernel's growth does; count it (@ofo: asked for by the
 * out-of-order path) and trace it.
 */
static void bbrx_rcvbuf_set(struct sock *sk, u64 mem, bool ofo)
{
	const struct net *net = sock_net(sk);
	struct bbrx_net *bn = bbrx_pernet(net);
	int rcvbuf;

	rcvbuf = min_t(u64, mem, READ_ONCE(net->ipv4.sysctl_tcp_rmem[2]));
	if (rcvbuf <= sk->sk_rcvbuf)
		return;
	WRITE_ONCE(sk->sk_rcvbuf, rcvbuf);
	WRITE_ONCE(tcp_sk(sk)->window_clamp, tcp_win_from_space(sk, rcvbuf));
	bbrx_stat_inc(bn, BBRX_STAT_RCVBUF_GROWN);
	if (ofo)
		bbrx_stat_inc(bn, BBRX_STAT_RCVBUF_GROWN_OFO);
	if (trace_bbrx_rcvbuf_enabled())
		bbrx_trace_hook(sk, BBRX_POL_RCVBUF,
				bbrx_policy(bn, BBRX_POL_RCVBUF),
				BBRX_TRACE_GROWN, rcvbuf);
}

#ifndef BBRX_HAVE_TCP_RCVBUF_GROW
/**
 * bbrx_rcvbuf_grow() - 6.1/6.12's tcp_rcv_space_adjust() charging per_mss
 * @sk: a TCP socket the application just read from, locked
 *
 * Dynamic right-sizing (the kernel's rule since 2.6, refined in 4.x): once
 * per receive RTT, if the application read more than in the previous RTT,
 * size the window for the next one at twice what was read (room for a
 * loss) plus 16 segments of cushion, plus twice the growth seen (a sender
 * in slow start doubles per RTT, and the ACK now opens the window for the
 * RTT after next), then the buffer at that many segments times the memory
 * each costs. The only change from the kernel is that cost: per_mss,
 * raised until a segment's memory offers an advmss of window, instead of
 * 6.1's SKB_TRUESIZE(advmss + MAX_TCP_HEADER) raised the same way (2944 vs
 * 2932 bytes for MSS 1448 with tcp_adv_win_scale 1; the difference is
 * larger for other MSS) or 6.12's tcp_space_from_win() (the window scaled
 * by the len/truesize ratio measured on received skbs). What counts as
 * read follows the running kernel (bbrx_rcvq_copied()). The
 * tcp_rcv_space_adjust tracepoint does not fire for redirected calls.
 */
static void bbrx_rcvbuf_grow(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	const struct net *net = sock_net(sk);
	typeof(tp->rcvq_space.space) prev;
	u32 rtt_us8;
	s64 copied;
	u64 now_ns, win;

	/* the replacement takes the headers' prototype */
	BUILD_BUG_ON(!__same_type(&tcp_rcv_space_adjust, &bbrx_rcvbuf_grow));

	/* What tcp_mstamp_refresh() does (not exported). */
	now_ns = tcp_clock_ns();
	tp->tcp_clock_cache = now_ns;
	tp->tcp_mstamp = div_u64(now_ns, NSEC_PER_USEC);

	rtt_us8 = tp->rcv_rtt_est.rtt_us;	/* << 3 */
	if (!rtt_us8 ||
	    tcp_stamp_us_delta(tp->tcp_mstamp, tp->rcvq_space.time) < (rtt_us8 >> 3))
		return;

	copied = bbrx_rcvq_copied(tp);
	prev = tp->rcvq_space.space;
	/*
	 * Compared in the field's own type, as the kernel does: u32 in 6.1,
	 * int in 6.12, where copied (read minus still queued) can be negative
	 * and must not pass. Stored negative, the kernel's own function would
	 * later store 0 there and divide by it.
	 */
	if ((typeof(prev))copied > prev) {
		if (READ_ONCE(net->ipv4.sysctl_tcp_moderate_rcvbuf) && prev > 0 &&
		    tp->advmss) {
			win = 2ULL * copied + 16ULL * tp->advmss;
			win += 2 * div_u64(win * (u32)(copied - prev), prev);
			win = div_u64(win, tp->advmss) *
			      bbrx_rcvbuf_seg_mem(sk, tp);
			bbrx_rcvbuf_set(sk, win, false);
		}
		tp->rcvq_space.space = copied;
	}
	tp->rcvq_space.seq = tp->copied_seq;
	tp->rcvq_space.time = tp->tcp_mstamp;
}

#else /* BBRX_HAVE_TCP_RCVBUF_GROW */

/**
 * bbrx_rcvbuf_grow() - 7.x's tcp_rcvbuf_grow() charging per_mss
 * @sk: a TCP socket, locked, with an application attached
 * @newval: what the application read in the last receive RTT, bytes (from
 *	tcp_rcv_space_adjust(), above rcvq_space.space), or rcvq_space.space
 *	itself (from tcp_data_queue_ofo(), when out-of-order data queues)
 *
 * 7.x's window rule, unchanged: twice @newval (dynamic right-sizing is one
 * RTT late), plus room to grow: below net.ipv4.tcp_rcvbuf_low_rtt (1000 us
 * by default) that room is the window scaled by rtt / low_rtt, so short
 * paths do not inflate the buffer; otherwise twice the window times the
 * relative growth of what was read (a sender in slow start doubles per
 * RTT); plus the span the out-of-order queue covers. As in 7.3.4's
 * tcp_input.c; upstream 65c5287892e9 ("tcp: fix sk_rcvbuf overshoot"),
 * aa251c84636c ("tcp: fix too slow tcp_rcvbuf_grow() action") and "tcp:
 * add net.ipv4.tcp_rcvbuf_low_rtt" (net-next, November 2025). The one
 * change from the kernel is the memory charged per segment of window:
 * per_mss (bbrx_rcvbuf_seg_mem()) instead of tcp_space_from_win()'s
 * measured len/truesize ratio. RcvbufGrownOfo counts the growths the
 * out-of-order caller asked for (@newval equal to rcvq_space.space: the
 * other caller passes more).
 */
static void bbrx_rcvbuf_grow(struct sock *sk, u32 newval)
{
	struct tcp_sock *tp = tcp_sk(sk);
	const struct net *net = sock_net(sk);
	u32 oldval = tp->rcvq_space.space, rtt_us, low_rtt;
	u64 win;

	/* the replacement takes the headers' prototype */
	BUILD_BUG_ON(!__same_type(&tcp_rcvbuf_grow, &bbrx_rcvbuf_grow));
	tp->rcvq_space.space = newval;
	if (!READ_ONCE(net->ipv4.sysctl_tcp_moderate_rcvbuf) || !tp->advmss)
		return;

	win = 2ULL * newval;
	rtt_us = tp->rcv_rtt_est.rtt_us >> 3;
	low_rtt = bbrx_rcvbuf_low_rtt(net);
	if (rtt_us < low_rtt)
		win += div_u64(win * rtt_us, low_rtt);
	else if (oldval)	/* the kernel divides unchecked: never 0 there */
		win += div_u64((win << 1) * (u32)(newval - oldval), oldval);
	if (!RB_EMPTY_ROOT(&tp->out_of_order_queue))
		win += TCP_SKB_CB(tp->ooo_last_skb)->end_seq - tp->rcv_nxt;
	win = div_u64(win, tp->advmss) * bbrx_rcvbuf_seg_mem(sk, tp);
	bbrx_rcvbuf_set(sk, win, newval == oldval);
}
#endif /* BBRX_HAVE_TCP_RCVBUF_GROW */

struct bbrx_hook bbrx_hook_rcvbuf = {
	.symbol = "tcp_init_transfer",
	.kind = BBRX_HOOK_ENTRY,
	.verify = bbrx_rcvbuf_verify,
	.entry = bbrx_rcvbuf_init_transfer,
	.show = bbrx_rcvbuf_show,
};

struct bbrx_hook bbrx_hook_rcvbuf_grow = {
	.symbol = BBRX_RCVBUF_GROW_SYMBOL,
	.kind = BBRX_HOOK_REDIRECT,
	.verify = bbrx_rcvbuf_grow_verify,
	.wants = bbrx_rcvbuf_grow_wants,
	.redirect = bbrx_rcvbuf_grow,
};
