// SPDX-License-Identifier: GPL-2.0
/*
 * What both congestion controls compute the same way: the pacing rate from
 * a bw and a gain and its start, the BDP, the prior cwnd, the burst goal
 * (tso_segs_goal) and its floor, inflight at the departure time, which RTT
 * sample wins and when a stamp is old, the tcp_bbr_info report for ss(8),
 * and the ops both register unchanged (.release, .sndbuf_expand,
 * .min_tso_segs).
 * Units as in the models: bw in packets per usec << BBRX_BW_SCALE, gains
 * in 1/256.
 */
#include <linux/inet_diag.h>
#include <net/tcp.h>

#include "bbrx.h"
#include "compat.h"

#define BW_SCALE	BBRX_BW_SCALE	/* bw is packets per usec << BW_SCALE */
#define BW_UNIT		BIT(BW_SCALE)
#define GAIN_SCALE	BBRX_GAIN_SCALE	/* gains in 1/256 (in-tree BBR_UNIT) */

#define BBRX_PACING_MARGIN	1	/* percent paced below bw to drain queues */
#define BBRX_MIN_TSO_RATE	1200000	/* bit/s below which bursts are 1 segment */
#define BBRX_TSO_SEGS_MAX	127	/* in-tree cap on the burst goal, segments */

/**
 * bbrx_rate_bytes() - a bw times a gain in bytes per second
 * @sk: the socket (its mss_cache)
 * @bw: packets per usec << BBRX_BW_SCALE
 * @gain: in 1/256
 *
 * Less the 1% pacing margin, which keeps a flow paced at its own bw from
 * building a standing queue (in-tree BBR; draft-ietf-ccwg-bbr-06 5.6.2).
 *
 * Return: bytes per second; u64 holds it up to several Tbit/s.
 */
u64 bbrx_rate_bytes(const struct sock *sk, u64 bw, int gain)
{
	unsigned int mss = tcp_sk(sk)->mss_cache;
	u64 rate = bw * mss * gain;

	rate >>= GAIN_SCALE;
	rate *= USEC_PER_SEC / 100 * (100 - BBRX_PACING_MARGIN);
	return rate >> BW_SCALE;
}

/**
 * bbrx_bw_to_pacing_rate() - sk_pacing_rate for a bw and a gain
 * @sk: the socket
 * @bw: packets per usec << BBRX_BW_SCALE
 * @gain: in 1/256
 *
 * Return: bytes per second, at most sk_max_pacing_rate (SO_MAX_PACING_RATE).
 */
static unsigned long bbrx_bw_to_pacing_rate(const struct sock *sk, u32 bw,
					    int gain)
{
	u64 rate = bbrx_rate_bytes(sk, bw, gain);

	return min_t(u64, rate, READ_ONCE(sk->sk_max_pacing_rate));
}

/**
 * bbrx_init_pacing() - the pacing rate before any bw sample
 * @sk: the socket
 * @gain: STARTUP's pacing gain, 1/256
 *
 * @gain times the initial cwnd per smoothed RTT; 1 ms stands in for the RTT
 * until the first sample (in-tree BBR's rule).
 *
 * Return: true if a real RTT was used (the caller recomputes once it is).
 */
bool bbrx_init_pacing(struct sock *sk, u32 gain)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u32 rtt_us = tp->srtt_us ? max(tp->srtt_us >> 3, 1U) : USEC_PER_MSEC;
	u64 bw = (u64)tcp_snd_cwnd(tp) * BW_UNIT;

	do_div(bw, rtt_us);
	WRITE_ONCE(sk->sk_pacing_rate, bbrx_bw_to_pacing_rate(sk, bw, gain));
	return tp->srtt_us;
}

/**
 * bbrx_update_pacing() - set sk_pacing_rate to gain x bw
 * @sk: the socket
 * @bw: packets per usec << BBRX_BW_SCALE
 * @gain: in 1/256
 * @full_bw_reached: STARTUP is over
 *
 * Until the pipe is found full the rate only goes up: early samples
 * underestimate bw.
 */
void bbrx_update_pacing(struct sock *sk, u32 bw, u32 gain,
			bool full_bw_reached)
{
	unsigned long rate = bbrx_bw_to_pacing_rate(sk, bw, gain);

	if (full_bw_reached || rate > READ_ONCE(sk->sk_pacing_rate))
		WRITE_ONCE(sk->sk_pacing_rate, rate);
}

/**
 * bbrx_min_tso_segs() - the .min_tso_segs floor of the burst size
 * @sk: the socket
 *
 * Below 1.2 Mbit/s a 2-segment burst is a large share of the pacing interval,
 * so the floor is 1 segment there, else 2 (as in-tree BBR).
 *
 * Return: segments, 1 or 2.
 */
u32 bbrx_min_tso_segs(struct sock *sk)
{
	return READ_ONCE(sk->sk_pacing_rate) < (BBRX_MIN_TSO_RATE >> 3) ? 1 : 2;
}

/**
 * bbrx_tso_segs_goal_extra() - burst size the cwnd must leave room for
 * @sk: the socket
 * @bn: the netns settings (gso_cap)
 * @extra: bytes allowed beyond the pacing rate's share (bbrx3: the
 *	BBRv3 release's min_rtt term), 0 for bbrx
 *
 * About 1 ms of data at the pacing rate (pacing_rate >> sk_pacing_shift
 * bytes) plus @extra, at most a legacy 64 KB GSO packet, in segments, and
 * never below bbrx_min_tso_segs(). Upstream 350c9f484bde stopped bounding
 * it by the device's gso_max_segs; gso_cap = 1 restores that bound
 * (pre-fix). At most 127 segments, as in-tree BBR: that binds only at an
 * MSS below ~516 bytes.
 *
 * Return: segments.
 */
u32 bbrx_tso_segs_goal_extra(struct sock *sk, const struct bbrx_net *bn,
			     u32 extra)
{
	struct tcp_sock *tp = tcp_sk(sk);
	unsigned long bytes;
	u32 segs;

	bytes = READ_ONCE(sk->sk_pacing_rate) >> READ_ONCE(sk->sk_pacing_shift);
	bytes = min_t(unsigned long, bytes + extra,
		      GSO_LEGACY_MAX_SIZE - 1 - MAX_TCP_HEADER);
	segs = max_t(u32, bytes / tp->mss_cache, bbrx_min_tso_segs(sk));
	if (READ_ONCE(bn->gso_cap))
		segs = min_t(u32, segs, READ_ONCE(sk->sk_gso_max_segs));
	return min_t(u32, segs, BBRX_TSO_SEGS_MAX);
}

/**
 * bbrx_tso_segs_goal() - bbrx's burst goal, see bbrx_tso_segs_goal_extra()
 * @sk: the socket
 * @bn: the netns settings (gso_cap)
 *
 * Return: segments.
 */
u32 bbrx_tso_segs_goal(struct sock *sk, const struct bbrx_net *bn)
{
	return bbrx_tso_segs_goal_extra(sk, bn, 0);
}

/**
 * bbrx_inflight_at_edt() - packets still in the network when the next skb leaves
 * @sk: the socket
 * @inflight: packets in flight now
 * @bw: the model's bw, packets per usec << BBRX_BW_SCALE
 *
 * With EDT pacing (tp->tcp_wstamp_ns in the future) the packets bw delivers
 * until then are gone by that time. Phase and DRAIN checks use it so that
 * they do not wait on data that is already scheduled to drain (in-tree
 * bbr_packets_in_net_at_edt(), upstream "tcp_bbr: adjust TCP BBR for
 * departure time pacing", Oct 2018).
 *
 * Return: packets, @inflight less those delivered before the departure.
 */
u32 bbrx_inflight_at_edt(struct sock *sk, u32 inflight, u32 bw)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u64 now_ns = tp->tcp_clock_cache;
	u64 edt_ns = max(tp->tcp_wstamp_ns, now_ns);
	u64 until_us = div_u64(edt_ns - now_ns, NSEC_PER_USEC);
	u64 gone = ((u64)bw * until_us) >> BW_SCALE;

	return gone >= inflight ? 0 : inflight - (u32)gone;
}

/**
 * bbrx_release() - the .release of both models
 * @sk: the socket leaving bbrx or bbrx3
 *
 * Gives back the kernel's default sk_pacing_shift (10), which .init set
 * from the pacing_shift sysctl.
 */
void bbrx_release(struct sock *sk)
{
	WRITE_ONCE(sk->sk_pacing_shift, 10);
}

/**
 * bbrx_fill_bbr_info() - report a BBR-family model as struct tcp_bbr_info
 * @sk: the socket
 * @ext: INET_DIAG extension bits requested
 * @attr: set to INET_DIAG_BBRINFO
 * @info: filled with bw (bytes/s), min_rtt (usec) and gains (in 1/256)
 * @bw: the model's bw, packets per usec << BBRX_BW_SCALE
 * @min_rtt_us: the model's min_rtt, usec
 * @pacing_gain: current pacing gain, 1/256
 * @cwnd_gain: current cwnd gain, 1/256
 *
 * ss(8) decodes only vegas, dctcp and bbr info; reusing the bbr layout makes
 * `ss -ti` print bbr:(bw:...,mrtt:...,pacing_gain:...,cwnd_gain:...).
 *
 * Return: bytes written to @info, 0 if not requested.
 */
size_t bbrx_fill_bbr_info(struct sock *sk, u32 ext, int *attr,
			  union tcp_cc_info *info, u32 bw, u32 min_rtt_us,
			  u32 pacing_gain, u32 cwnd_gain)
{
	u64 rate;

	if (!(ext & (1 << (INET_DIAG_BBRINFO - 1))) &&
	    !(ext & (1 << (INET_DIAG_VEGASINFO - 1))))
		return 0;

	rate = (u64)bw * tcp_sk(sk)->mss_cache * USEC_PER_SEC;
	rate >>= BW_SCALE;
	memset(&info->bbr, 0, sizeof(info->bbr));
	info->bbr.bbr_bw_lo = (u32)rate;
	info->bbr.bbr_bw_hi = (u32)(rate >> 32);
	info->bbr.bbr_min_rtt = min_rtt_us;
	info->bbr.bbr_pacing_gain = pacing_gain;
	info->bbr.bbr_cwnd_gain = cwnd_gain;
	*attr = INET_DIAG_BBRINFO;
	return sizeof(info->bbr);
}

/**
 * bbrx_sndbuf_expand() - the .sndbuf_expand of both models
 * @sk: the socket
 *
 * Return: 3, buffer 3x cwnd so the application keeps up with probing.
 */
u32 bbrx_sndbuf_expand(struct sock *sk)
{
	return 3;
}

/**
 * bbrx_bdp_packets() - packets in flight that gain x bw x min_rtt allows
 * @bw: packets per usec << BBRX_BW_SCALE
 * @min_rtt_us: the model's min_rtt, usec; ~0U before the first RTT sample
 * @gain: in 1/256
 *
 * Return: packets, rounded up; without an RTT sample yet the initial
 * window (TCP_INIT_CWND).
 */
u32 bbrx_bdp_packets(u32 bw, u32 min_rtt_us, u32 gain)
{
	u64 w;

	if (unlikely(min_rtt_us == ~0U))
		return TCP_INIT_CWND;
	w = (u64)bw * min_rtt_us;
	w = (w * gain) >> GAIN_SCALE;
	return (u32)((w + BW_UNIT - 1) >> BW_SCALE);
}

/**
 * bbrx_prior_cwnd() - the cwnd to restore after recovery or PROBE_RTT
 * @tp: the socket
 * @prior: the value saved so far, packets
 * @cut: cwnd is already cut (in recovery or PROBE_RTT)
 *
 * Saved before a cut so that the model can restore it after; when cwnd is
 * already cut the larger, pre-cut value is kept.
 *
 * Return: the new prior cwnd, packets.
 */
u32 bbrx_prior_cwnd(const struct tcp_sock *tp, u32 prior, bool cut)
{
	return cut ? max(prior, tcp_snd_cwnd(tp)) : tcp_snd_cwnd(tp);
}

/**
 * bbrx_set_pacing() - pace at gain x bw once the first RTT sample is in
 * @sk: the socket
 * @has_seen_rtt: pacing was already set from a real RTT
 * @startup_gain: the model's STARTUP pacing gain, 1/256
 * @bw: packets per usec << BBRX_BW_SCALE
 * @gain: in 1/256
 * @full_bw_reached: STARTUP is over
 *
 * The rate set at .init stood on a 1 ms stand-in RTT; the first real
 * sample recomputes it at @startup_gain (bbrx_init_pacing()) before
 * bbrx_update_pacing() applies @gain x @bw.
 *
 * Return: the new has_seen_rtt, for the model's state.
 */
bool bbrx_set_pacing(struct sock *sk, bool has_seen_rtt, u32 startup_gain,
		     u32 bw, u32 gain, bool full_bw_reached)
{
	if (unlikely(!has_seen_rtt && tcp_sk(sk)->srtt_us))
		has_seen_rtt = bbrx_init_pacing(sk, startup_gain);
	bbrx_update_pacing(sk, bw, gain, full_bw_reached);
	return has_seen_rtt;
}

/**
 * bbrx_rtt_sample_wins() - does an ACK's RTT sample replace a min filter?
 * @rs: the ACK's rate sample (rtt_us < 0: no sample)
 * @min_us: the filter's value, usec
 * @expired: the filter's window ran out
 *
 * A lower sample always does; once the window ran out any sample does,
 * except one the receiver's delayed ACK stretched.
 *
 * Return: true if the sample becomes the filter's value.
 */
bool bbrx_rtt_sample_wins(const struct rate_sample *rs, u32 min_us,
			  bool expired)
{
	return rs->rtt_us >= 0 &&
	       (rs->rtt_us < min_us || (expired && !rs->is_ack_delayed));
}

/**
 * bbrx_stamp_after_ms() - a jiffies stamp some time from now, never 0
 * @ms: milliseconds from now
 *
 * The models keep 0 for "not set" (PROBE_RTT's end), so a stamp that
 * wraps to 0 is taken one jiffy later.
 *
 * Return: tcp_jiffies32 + @ms in jiffies, or 1 for 0.
 */
u32 bbrx_stamp_after_ms(u32 ms)
{
	u32 stamp = tcp_jiffies32 + msecs_to_jiffies(ms);

	stamp |= !stamp;
	return stamp;
}
