// SPDX-License-Identifier: GPL-2.0
/*
 * bbrx3: a BBRv3-class TCP congestion control for stock kernels.
 *
 * The model is draft-ietf-ccwg-bbr-06 (6 July 2026; "[D]" below, with its
 * section numbers), which describes Google's BBRv3 release ("release"
 * below: github.com/google/bbr, branch v3). On top of v1's bw and min_rtt
 * it keeps bounds that loss and ECN set:
 *
 *   bw          = min(max_bw, bw_lo)
 *   max_bw      = max of the delivery rate over this and the last PROBE_BW
 *                 cycle (bw_hi[])
 *   inflight_hi = inflight at which a bandwidth probe saw too much loss
 *                 (> loss_thresh) or CE (> ecn_thresh): long-term bound
 *   bw_lo,      = cut to beta after each lossy loss round outside probing,
 *   inflight_lo   inflight_lo also by alpha/3 after a CE-marked round:
 *                 short-term bounds, reset when probing starts
 *   cwnd        = min(2 x BDP + extra_acked, state's bound of inflight_hi,
 *                 inflight_lo)
 *
 * PROBE_BW cycles DOWN (pace 0.9 x bw until inflight is below the
 * headroom) -> CRUISE (1.0, inflight_hi less headroom) -> REFILL (1.0, one
 * round, bounds lifted) -> UP (1.25, inflight_hi grows 1, 2, 4 ... packets
 * per round until loss/CE or bw stops growing) -> DOWN. The wait in DOWN and
 * CRUISE is 2-3 s of wall clock, or fewer rounds than a Reno flow at the
 * same BDP needs to regrow its window (at most 63): the two bounds behind
 * v3's coexistence with Reno/CUBIC [D 5.3.3.8]. STARTUP also ends on
 * loss or ECN; PROBE_RTT holds 0.5 x BDP every 5 s.
 *
 * What a stock kernel does not give a module, and what bbrx3 uses instead:
 * - The release compares the packets lost while a packet was in flight
 *   with the inflight when it was sent (rate_sample's tx_in_flight and lost,
 *   added by its kernel patches). bbrx3 counts tp->lost since the start of
 *   the round the acked data was sent in, against that flight estimated as
 *   the sample's rs->delivered plus those losses: the window starts up to a
 *   round early, so a loss is charged to the flight after it too, never
 *   missed. inflight_hi is raised only to the rs->delivered of a flight
 *   judged so.
 * - The release reacts per lost skb (.skb_marked_lost) and refines
 *   inflight_hi inside a TSO burst; bbrx3 reacts on the ACK that reports
 *   the loss, with inflight_hi = max(inflight, beta x target inflight).
 * - CE: rs->delivered_ce and tp->delivered_ce count packets acked with
 *   ECE. With an RFC 3168 receiver ECE stays on until the sender's CWR, so
 *   one mark reads as about a round of marks: bbrx3 then reacts like a
 *   classic ECN sender (once per round). Hence the release's min_rtt gate
 *   (bbrx3_ecn_max_rtt_us, 5 ms) is the default.
 * - An undo of a spurious recovery takes each bound back to at least its
 *   value when the episode began, as the release does; the copies of
 *   bw_lo and inflight_lo are in the per-socket block, and a socket
 *   without one lifts those two instead (see struct bbrx3).
 * - Not modelled: the release's fast path, ECN reprobe, TLP-loss
 *   accounting and PLB.
 * Constants follow [D]; where the release differs, the comment says so.
 */
#include <linux/module.h>
#include <linux/random.h>
#include <net/inet_ecn.h>
#include <net/tcp.h>

#include "bbrx.h"
#include "bbrx_trace.h"
#include "compat.h"

#define BW_UNIT		BIT(BBRX_BW_SCALE)
#define GAIN_UNIT	BIT(BBRX_GAIN_SCALE)
#define PERMILLE	1000
#define B3_UNSET	U32_MAX		/* bound not set: infinite */

/* Gains in 1/256. */
#define B3_STARTUP_GAIN		710	/* 2.77 = 4 ln 2: doubles per round [D 2.5] */
#define B3_CWND_GAIN		512	/* 2.0 x BDP in most states [D 2.6] */
#define B3_DRAIN_GAIN		128	/* 0.5 [D 5.3.2]; release 1/2.885 */
#define B3_DOWN_GAIN		230	/* 0.90 [D 5.3.3.1]; release 0.91 */
#define B3_UP_GAIN		320	/* 1.25 [D 5.3.3.5] */
#define B3_UP_CWND_GAIN		576	/* 2.25: inflight may grow in UP */
#define B3_PROBE_RTT_GAIN	128	/* cwnd 0.5 x BDP [D 2.16.2] */
#define B3_FULL_BW_GROWTH	320	/* bw still growing: +25% [D 5.3.1.2] */

#define B3_MIN_CWND		4	/* MinPipeCwnd, packets [D 2.8] */
#define B3_FULL_BW_ROUNDS	3	/* rounds without growth: full [D 5.3.1.2] */
#define B3_FULL_LOSS_CNT	6	/* lossy ACKs in a round: STARTUP exit */
#define B3_FULL_ECN_ROUNDS	2	/* CE rounds ending STARTUP (release) */
#define B3_DRAIN_MAX_ROUNDS	4	/* DRAIN's 4th round ends it [D 5.3.2] */
#define B3_MIN_RTT_WIN_MS	10000	/* min_rtt filter [D 2.16.1] */
#define B3_PROBE_RTT_MS		200	/* at PROBE_RTT cwnd [D 2.16.2] */
#define B3_PROBE_WAIT_MS	2000	/* DOWN/CRUISE last 2 s ... */
#define B3_PROBE_RAND_MS	1000	/* ... plus up to 1 s [D 5.3.3.8.3] */
#define B3_PROBE_MAX_ROUNDS	63	/* Reno-coexistence bound [D 5.3.3.8.3] */
#define B3_PROBE_UP_MAX_SHIFT	30	/* inflight_hi growth doubles to 2^30 */
#define B3_ECN_ALPHA_SHIFT	4	/* alpha EWMA gain 1/16 (release) */
#define B3_ECN_FACTOR		85	/* inflight_lo cut alpha/3 (release) */
#define B3_TSO_RTT_SHIFT	9	/* burst + 64 KB halved per 512 us (release) */

enum bbrx3_mode {
	B3_STARTUP,
	B3_DRAIN,
	B3_PROBE_BW,
	B3_PROBE_RTT,
};

enum bbrx3_probe_bw_state {
	B3_DOWN,
	B3_CRUISE,
	B3_REFILL,
	B3_UP,
};

/*
 * Where the ACKs of a bandwidth probe are [D 2.14]: only the ACKs of data
 * sent after a probe ended start anything (the max_bw window's shift).
 */
enum bbrx3_ack_phase {
	B3_ACKS_INIT,
	B3_ACKS_PROBE_STOPPING,	/* of data sent after the probe ended */
};

/* bbrx3_round's phase outside PROBE_BW (bbrx_trace.h prints it "-"). */
#define B3_TRACE_NO_PHASE	4

/*
 * Private state, packed into ICSK_CA_PRIV_SIZE (104 bytes on every kernel
 * bbrx builds for), all of the model: stamps are 32-bit jiffies or usec, the
 * probe-up counters 16 bits (probe_up_cnt is capped, so a cwnd above 65535
 * packets grows inflight_hi a little faster than 2^n per round), rounds
 * since a probe 6 bits (they matter up to B3_PROBE_MAX_ROUNDS); the bounds'
 * copies for an undo are in the block.
 *
 * The last 8 bytes hold the pointer to the block (struct bbrx3_block, below),
 * freed by packing, without a change to any value the model computes:
 * - min_rtt's stamp is kept as its age relative to probe_rtt_min_stamp
 *   (min_rtt_age, 16 bits of jiffies, saturating): min_rtt only ever takes
 *   the stamp of probe_rtt_min, and the age is compared with the 10 s
 *   window only, which 65535 jiffies exceed at any HZ up to 6553 (asserted
 *   below). Saturated, the window has passed either way; the two differ
 *   only when min_rtt went unrefreshed for 2^31 jiffies, where the 32-bit
 *   stamp's after() wraps.
 * - DOWN/CRUISE keep the end of their wall-clock wait (probe_deadline,
 *   jiffies) instead of its start and length (cycle_stamp and a 12-bit
 *   probe_wait_ms): the same sum, computed once when DOWN begins.
 * - probe_deadline (read in DOWN and CRUISE only, set when DOWN begins),
 *   probe_rtt_done_stamp (PROBE_RTT only, set on entry) and the probe-up
 *   counters (REFILL and UP only, set when REFILL and UP begin) share 4
 *   bytes: each is written on entry to the states that read it.
 * The block holds the in-flight and lost at each send (read by the loss
 * check and the round event) and the bounds' copies for an undo. A socket
 * whose allocation failed runs the same model except that it judges losses
 * over the rounds since the acked data's round began (b3_acked_flight()),
 * an undo lifts bw_lo and inflight_lo (bbrx3 0.2.0's rule: more room after
 * a spurious episode, never less) and keeps inflight_hi as it is; it
 * reports tx_in_flight 0.
 */
struct bbrx3_block;

struct bbrx3 {
	u32 bw_hi[2];		/* BW_UNIT: max bw, last and this cycle */
	u32 bw_lo;		/* BW_UNIT: short-term bound, B3_UNSET */
	u32 bw_latest;		/* BW_UNIT: max delivery rate this round */
	u32 inflight_hi;	/* packets: long-term bound, B3_UNSET */
	u32 inflight_lo;	/* packets: short-term bound, B3_UNSET */
	u32 inflight_latest;	/* packets delivered per sample, max */
	u32 min_rtt_us;		/* 10 s min filter */
	u32 probe_rtt_min_us;	/* bbrx3_probe_rtt_win_ms min filter */
	u32 probe_rtt_min_stamp; /* jiffies */
	u32 next_round_delivered; /* tp->delivered that ends this round */
	u32 round_lost;		/* tp->lost at this round's start */
	u32 prev_round_lost;	/* tp->lost at the last round's start */
	u32 round_delivered;	/* tp->delivered at this round's start */
	u32 round_delivered_ce;	/* tp->delivered_ce at this round's start */
	u32 prior_cwnd;		/* cwnd before recovery or PROBE_RTT */
	u32 full_bw;		/* BW_UNIT: bw at the last 25% growth */
	union {			/* written on entry to the states reading it */
		u32 probe_deadline; /* DOWN, CRUISE, jiffies: time to probe */
		u32 probe_rtt_done_stamp; /* PROBE_RTT, jiffies: may end, 0 unset */
		struct {	/* REFILL, UP */
			u16 probe_up_cnt;   /* acked per +1 of inflight_hi */
			u16 probe_up_acked; /* acked toward the next +1 */
		};
	};
	u32 loss_round_delivered; /* tp->delivered that ends the loss round */
	struct bbrx_extra_acked ea; /* ACK aggregation (extra_acked.c) */
	u32 mode:2,		/* enum bbrx3_mode */
	    state:2,		/* enum bbrx3_probe_bw_state */
	    ack_phase:1,	/* enum bbrx3_ack_phase */
	    prev_ca_state:3,	/* icsk_ca_state on the last ACK */
	    full_bw_cnt:2,	/* rounds without bw growth */
	    round_start:1,	/* this ACK began a round */
	    idle_restart:1,	/* restarting after idle */
	    probe_rtt_round_done:1, /* a round passed at PROBE_RTT cwnd */
	    full_bw_reached:1,	/* STARTUP found the pipe full */
	    full_bw_now:1,	/* bw plateau in this STARTUP/UP */
	    has_seen_rtt:1,	/* pacing was set from a real RTT */
	    loss_in_round:1,	/* a loss was reported this round */
	    ecn_in_round:1,	/* a CE mark was echoed this round */
	    probe_samples:1,	/* samples come from a bw probe */
	    prev_probe_too_high:1, /* the last probe went too high */
	    stopped_risky_probe:1, /* UP stopped at inflight_hi */
	    probe_up_rounds:5,	/* UP rounds: growth 2^n per round */
	    initialized:1,	/* .init ran (cong_control may run before) */
	    startup_ecn_rounds:2, /* consecutive CE rounds in STARTUP */
	    loss_events:3;	/* ACKs with losses this round, saturating */
	u32 min_rtt_age:16,	/* jiffies from min_rtt's stamp to probe_rtt_min's */
	    ecn_alpha:9,	/* CE share EWMA, GAIN_UNIT = all marked */
	    rounds_since_probe:6, /* since the last UP, saturating */
	    unused:1;
	struct bbrx3_block *blk; /* NULL: none (allocation failed) */
};

#define B3_ROUNDS_SINCE_PROBE_MAX	63	/* rounds_since_probe's bits */
static_assert(B3_PROBE_MAX_ROUNDS <= B3_ROUNDS_SINCE_PROBE_MAX);
#define B3_MIN_RTT_AGE_MAX		U16_MAX	/* min_rtt_age's bits */
static_assert(DIV_ROUND_UP(B3_MIN_RTT_WIN_MS * HZ, MSEC_PER_SEC) <
	      B3_MIN_RTT_AGE_MAX);

static u32 b3_max_bw(const struct bbrx3 *b)
{
	return max(b->bw_hi[0], b->bw_hi[1]);
}

/* The bw the model runs on: max_bw, unless a lossy loss round set bw_lo. */
static u32 b3_bw(const struct bbrx3 *b)
{
	return min(b3_max_bw(b), b->bw_lo);
}

static u32 b3_pacing_gain(const struct bbrx3 *b)
{
	switch (b->mode) {
	case B3_STARTUP:
		return B3_STARTUP_GAIN;
	case B3_DRAIN:
		return B3_DRAIN_GAIN;
	case B3_PROBE_BW:
		if (b->state == B3_UP)
			return B3_UP_GAIN;
		return b->state == B3_DOWN ? B3_DOWN_GAIN : GAIN_UNIT;
	default:
		return GAIN_UNIT;
	}
}

static u32 b3_cwnd_gain(const struct bbrx3 *b)
{
	if (b->mode == B3_PROBE_BW && b->state == B3_UP)
		return B3_UP_CWND_GAIN;
	if (b->mode == B3_PROBE_RTT)
		return B3_PROBE_RTT_GAIN;
	return B3_CWND_GAIN;
}

/* Packets in gain x bw x min_rtt, rounded up; the initial window before
 * the first RTT sample.
 */
static u32 b3_bdp(const struct bbrx3 *b, u32 bw, u32 gain)
{
	return bbrx_bdp_packets(bw, b->min_rtt_us, gain);
}

/*
 * The burst goal of the BBRv3 release (bbr_tso_segs_generic()): bbrx's
 * goal from the pacing rate, plus a 64 KB allowance halved for every 512
 * us of min_rtt, so that short paths keep room for full offload bursts.
 */
static u32 b3_tso_segs_goal(struct sock *sk, const struct bbrx_net *bn)
{
	const struct bbrx3 *b = inet_csk_ca(sk);
	u32 r = b->min_rtt_us >> B3_TSO_RTT_SHIFT;

	return bbrx_tso_segs_goal_extra(sk, bn,
					r < 32 ? GSO_LEGACY_MAX_SIZE >> r : 0);
}

/*
 * The offload budget: room for tso_margin bursts of the burst goal (the
 * qdisc, the TSO engine and the receiver's GRO each hold one) [D 5.5.8.1],
 * at least MinPipeCwnd, and 2 more packets in UP so that a tiny BDP can
 * still exceed itself [D 5.6.4.2]. gso_cap acts on the goal as in bbrx.
 */
static u32 b3_quantization_budget(struct sock *sk, const struct bbrx_net *bn,
				  u32 inflight)
{
	const struct bbrx3 *b = inet_csk_ca(sk);
	u32 budget = READ_ONCE(bn->tso_margin) * b3_tso_segs_goal(sk, bn);

	inflight = max3(inflight, budget, (u32)B3_MIN_CWND);
	if (b->mode == B3_PROBE_BW && b->state == B3_UP)
		inflight += 2;
	return inflight;
}

static u32 b3_inflight(struct sock *sk, const struct bbrx_net *bn, u32 bw,
		       u32 gain)
{
	return b3_quantization_budget(sk, bn,
				      b3_bdp(inet_csk_ca(sk), bw, gain));
}

/* The inflight the flow aims at in steady state: one BDP, at most cwnd. */
static u32 b3_target_inflight(struct sock *sk, const struct bbrx_net *bn)
{
	const struct bbrx3 *b = inet_csk_ca(sk);

	return min(b3_inflight(sk, bn, b3_bw(b), GAIN_UNIT),
		   tcp_snd_cwnd(tcp_sk(sk)));
}

/* inflight_hi less the headroom left to other flows [D 5.3.3.9]. */
static u32 b3_inflight_with_headroom(const struct bbrx3 *b,
				     const struct bbrx_net *bn)
{
	u32 headroom;

	if (b->inflight_hi == B3_UNSET)
		return B3_UNSET;
	headroom = (u64)b->inflight_hi * READ_ONCE(bn->bbrx3_headroom) /
		   PERMILLE;
	headroom = max(headroom, 1U);
	return max_t(s32, b->inflight_hi - headroom, B3_MIN_CWND);
}

/* ECN is used on ECN-capable connections at a min_rtt inside the gate. */
static bool b3_ecn_eligible(struct sock *sk, const struct bbrx_net *bn)
{
	const struct bbrx3 *b = inet_csk_ca(sk);
	u32 gate = READ_ONCE(bn->bbrx3_ecn_max_rtt_us);

	return READ_ONCE(bn->bbrx3_ecn) &&
	       bbrx_ecn_ok(tcp_sk(sk)) &&
	       (!gate || b->min_rtt_us <= gate);
}

static void b3_start_round(struct sock *sk)
{
	struct bbrx3 *b = inet_csk_ca(sk);

	b->next_round_delivered = tcp_sk(sk)->delivered;
}

static void b3_reset_lower_bounds(struct bbrx3 *b)
{
	b->bw_lo = B3_UNSET;
	b->inflight_lo = B3_UNSET;
}

static void b3_reset_full_bw(struct bbrx3 *b)
{
	b->full_bw = 0;
	b->full_bw_cnt = 0;
	b->full_bw_now = 0;
}

/* Save cwnd before recovery or PROBE_RTT cut it, to restore it after. */
static void b3_save_cwnd(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbrx3 *b = inet_csk_ca(sk);

	b->prior_cwnd = bbrx_prior_cwnd(tp, b->prior_cwnd,
					b->prev_ca_state >= TCP_CA_Recovery ||
					b->mode == B3_PROBE_RTT);
}

/*
 * DOWN: forget this cycle's signals, stop growing inflight_hi and draw the
 * wait until the next probe: 2-3 s, and a round count that starts at a
 * random 0 or 1 so that flows do not probe in lockstep [D 5.3.3.8.3].
 */
static void b3_start_down(struct sock *sk)
{
	struct bbrx3 *b = inet_csk_ca(sk);

	b->mode = B3_PROBE_BW;
	b->state = B3_DOWN;
	b->loss_in_round = 0;
	b->ecn_in_round = 0;
	b->bw_latest = 0;
	b->inflight_latest = 0;
	b->rounds_since_probe = get_random_u32_below(2);
	/* the wait's end; shares its word with UP's counters (struct bbrx3) */
	b->probe_deadline = tcp_jiffies32 +
		msecs_to_jiffies(B3_PROBE_WAIT_MS +
				 get_random_u32_below(B3_PROBE_RAND_MS));
	b->ack_phase = B3_ACKS_PROBE_STOPPING;
	b3_start_round(sk);
}

/* CRUISE: never more short-term room than the long-term bound allows. */
static void b3_start_cruise(struct sock *sk)
{
	struct bbrx3 *b = inet_csk_ca(sk);

	if (b->inflight_lo != B3_UNSET)
		b->inflight_lo = min(b->inflight_lo, b->inflight_hi);
	b->state = B3_CRUISE;
}

/* REFILL: lift the short-term bounds and fill the pipe for one round. */
static void b3_start_refill(struct sock *sk)
{
	struct bbrx3 *b = inet_csk_ca(sk);

	b3_reset_lower_bounds(b);
	b->probe_up_rounds = 0;
	b->probe_up_acked = 0;
	b->stopped_risky_probe = 0;
	b->state = B3_REFILL;
	b3_start_round(sk);
}

/*
 * inflight_hi grows 1, 2, 4 ... packets per round of UP: per round, one
 * packet per cwnd / 2^n packets acked [D 5.3.3.9].
 */
static void b3_raise_inflight_hi_slope(struct sock *sk)
{
	struct bbrx3 *b = inet_csk_ca(sk);
	u32 growth = 1U << b->probe_up_rounds;

	b->probe_up_rounds = min(b->probe_up_rounds + 1, B3_PROBE_UP_MAX_SHIFT);
	b->probe_up_cnt = clamp_t(u32, tcp_snd_cwnd(tcp_sk(sk)) / growth, 1,
				  U16_MAX - 1);
}

static void b3_start_up(struct sock *sk, struct bbrx_net *bn, u32 bw_sample)
{
	struct bbrx3 *b = inet_csk_ca(sk);

	b->ack_phase = B3_ACKS_INIT;
	b3_start_round(sk);
	b3_reset_full_bw(b);
	b->full_bw = bw_sample;
	b->state = B3_UP;
	b3_raise_inflight_hi_slope(sk);
	bbrx_stat_inc(bn, BBRX3_STAT_BW_PROBE);
}

/*
 * Time to probe: the wall-clock wait is over, or as many rounds passed as
 * a Reno flow with this BDP needs to grow its window back (at most 63)
 * [D 5.3.3.8.2].
 */
static bool b3_check_time_to_probe(struct sock *sk, const struct bbrx_net *bn)
{
	struct bbrx3 *b = inet_csk_ca(sk);
	u32 rounds = min_t(u32, b3_target_inflight(sk, bn), B3_PROBE_MAX_ROUNDS);

	if (after(tcp_jiffies32, b->probe_deadline) ||
	    b->rounds_since_probe >= rounds) {
		b3_start_refill(sk);
		return true;
	}
	return false;
}

/* DOWN ends once inflight is below both the headroom and one BDP. */
static bool b3_check_time_to_cruise(struct sock *sk, const struct bbrx_net *bn,
				    u32 inflight)
{
	const struct bbrx3 *b = inet_csk_ca(sk);

	if (inflight > b3_inflight_with_headroom(b, bn))
		return false;
	return inflight <= b3_inflight(sk, bn, b3_max_bw(b), GAIN_UNIT);
}

/*
 * The block: state beyond ICSK_CA_PRIV_SIZE, allocated in .init and freed
 * in .release, as in-tree tcp_cdg.c does. A passive open runs .init in
 * softirq: the allocation never sleeps, and when it fails the socket runs
 * without one (Bbrx3NoBlock). It holds the bounds saved when a loss
 * episode begins, for an undo, and a ring of snapshots of
 * {tp->delivered, tp->lost, packets in flight}, one per ~cwnd/16 packets
 * delivered: what a stock kernel's rate_sample lacks of v3's per-skb
 * tx_in_flight and lost-at-send, found again by rs->prior_delivered (the
 * tp->delivered the acked data was sent at). 32 of them span about two
 * cwnds of deliveries, a round and the one before; 8 bytes each, so an ACK
 * touches about one cache line.
 */
#define B3_SNAPS	32	/* a power of 2 */
#define B3_SNAP_SHIFT	4	/* a snapshot per cwnd >> 4 delivered */

struct b3_snap {
	u32 delivered;		/* tp->delivered when taken */
	u16 lost;		/* tp->lost, low 16 bits */
	u16 in_flight;		/* tcp_packets_in_flight(), at most U16_MAX */
};

struct bbrx3_block {
	struct b3_snap snap[B3_SNAPS];
	u32 undo_bw_lo;		/* bw_lo when a loss episode began */
	u32 undo_inflight_lo;	/* inflight_lo then */
	u32 undo_inflight_hi;	/* inflight_hi then */
	u8 newest;		/* index in snap[] of the newest */
	u8 count;		/* snapshots taken, at most B3_SNAPS */
};

static struct kmem_cache *bbrx3_block_cache __read_mostly;

/*
 * Test only: bbrx3 sockets start without a block, as when the allocation
 * fails; Debian's kernels have no CONFIG_FAULT_INJECTION to make it fail.
 * Writable at run time, so that a test switches it between flows.
 */
static bool bbrx3_fault_block;

static int b3_fault_block_set(const char *val, const struct kernel_param *kp)
{
	bool on;

	if (kstrtobool(val, &on)) {
		pr_err("bbrx: %s: want 0 or 1, not \"%.*s\"\n", kp->name,
		       (int)strcspn(val, "\n"), val);
		return -EINVAL;
	}
	WRITE_ONCE(*(bool *)kp->arg, on);
	return 0;
}

static const struct kernel_param_ops b3_fault_block_ops = {
	.set = b3_fault_block_set,
	.get = param_get_bool,
};

module_param_cb(fault_block, &b3_fault_block_ops, &bbrx3_fault_block, 0644);
MODULE_PARM_DESC(fault_block,
		 "Test only: bbrx3 sockets start without their block, as if its allocation failed (0 or 1; writable)");

/**
 * bbrx3_block_cache_create() - the slab cache of bbrx3's per-socket blocks
 *
 * A cache of its own: the block is a few bytes over 256, which kmalloc
 * would round up to 512. Called before bbrx3 registers.
 *
 * Return: 0 or -ENOMEM.
 */
int bbrx3_block_cache_create(void)
{
	/* tcp_bbrx_block; the bench's tcp_bbrx3base has its own */
	bbrx3_block_cache = kmem_cache_create(KBUILD_MODNAME "_block",
					      sizeof(struct bbrx3_block), 0, 0,
					      NULL);
	return bbrx3_block_cache ? 0 : -ENOMEM;
}

/**
 * bbrx3_block_cache_destroy() - free the cache, after bbrx3 unregistered
 *
 * Every socket that used bbrx3 held a module reference until its .release,
 * which freed its block: the cache is empty at module exit.
 */
void bbrx3_block_cache_destroy(void)
{
	kmem_cache_destroy(bbrx3_block_cache);
}

/*
 * A snapshot every cwnd/16 delivered packets, on the ACKs that deliver,
 * after the model set cwnd. Its in-flight is what the sends this ACK
 * releases go out into (v3's tx_in_flight counts the flight at the send):
 * what the ACK left plus what it acked, as far as cwnd lets them refill.
 */
static void b3_block_snap(struct sock *sk, struct bbrx3_block *blk,
			  u32 acked)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct b3_snap *s = &blk->snap[blk->newest];
	u32 every = max(tcp_snd_cwnd(tp) >> B3_SNAP_SHIFT, 1U);
	u32 in_flight;

	if (blk->count) {
		if (tp->delivered - s->delivered < every)
			return;
		blk->newest = (blk->newest + 1) & (B3_SNAPS - 1);
		s = &blk->snap[blk->newest];
	}
	blk->count = min(blk->count + 1, B3_SNAPS);
	s->delivered = tp->delivered;
	s->lost = (u16)tp->lost;
	in_flight = tcp_packets_in_flight(tp);
	in_flight = max(in_flight, min(in_flight + acked, tcp_snd_cwnd(tp)));
	s->in_flight = min_t(u32, in_flight, U16_MAX);
}

/*
 * The block at .init: one snapshot of the start, or none (counted).  Its
 * flight is cwnd, the initial window the first round sends, not the
 * nothing in flight at .init.
 */
static void b3_block_alloc(struct sock *sk, struct bbrx3 *b,
			   struct bbrx_net *bn)
{
	if (!READ_ONCE(bbrx3_fault_block))
		b->blk = kmem_cache_zalloc(bbrx3_block_cache,
					   GFP_NOWAIT | __GFP_NOWARN);
	if (!b->blk) {
		bbrx_stat_inc(bn, BBRX3_STAT_NO_BLOCK);
		return;
	}
	bbrx_stat_inc(bn, BBRX3_STAT_BLOCKS);
	b3_block_snap(sk, b->blk, tcp_snd_cwnd(tcp_sk(sk)));
}

/**
 * b3_sent_flight() - in flight and lost when data was sent, from the ring
 * @sk: a bbrx3 socket
 * @prior_delivered: tp->delivered when the data was sent
 *	(rs->prior_delivered of its ACK)
 * @in_flight: set to the packets in flight then (v3's tx_in_flight)
 * @lost: set to tp->lost then (v3's lost-at-send), exact while fewer than
 *	65536 packets were lost since
 *
 * Uses the newest snapshot taken at or before the send: a binary search
 * over the ring, newest to oldest, whose tp->delivered only grows. The
 * flight is that of the snapshot, taken up to cwnd/16 deliveries before
 * the send.
 *
 * Return: true if found; false without a block or when the data is older
 * than the oldest snapshot.
 */
static bool b3_sent_flight(const struct sock *sk, u32 prior_delivered,
			   u32 *in_flight, u32 *lost)
{
	const struct bbrx3 *b = inet_csk_ca(sk);
	const struct bbrx3_block *blk = b->blk;
	const struct b3_snap *s;
	u32 lo = 0, hi, mid;

	if (!blk)
		return false;
	hi = blk->count;	/* look in [lo, hi) of age: 0 = newest */
	while (lo < hi) {
		mid = (lo + hi) / 2;
		s = &blk->snap[(blk->newest - mid) & (B3_SNAPS - 1)];
		if (before(prior_delivered, s->delivered))
			lo = mid + 1;	/* taken after the send: older ones */
		else
			hi = mid;
	}
	if (lo == blk->count)
		return false;
	s = &blk->snap[(blk->newest - lo) & (B3_SNAPS - 1)];
	*in_flight = s->in_flight;
	*lost = tcp_sk(sk)->lost - (u16)(tcp_sk(sk)->lost - s->lost);
	return true;
}

/* The block at .release (or a zeroed state that never had one). */
static void b3_block_free(struct sock *sk, struct bbrx3 *b)
{
	if (!b->blk)
		return;
	kmem_cache_free(bbrx3_block_cache, b->blk);
	b->blk = NULL;
	bbrx_stat_dec(bbrx_sk_net(sk), BBRX3_STAT_BLOCKS);
}

enum b3_too_high { B3_OK, B3_TOO_HIGH_LOSS, B3_TOO_HIGH_ECN };

/*
 * The flight the acked data was sent in, as the release's per-skb
 * rs->tx_in_flight and rs->lost give it: packets in flight at the send and
 * packets lost since (tp->lost counts every loss, including those the RACK
 * reorder timer marks between ACKs). From the block's ring, whose snapshot
 * precedes the send by at most cwnd/16 deliveries. Without one that covers
 * the send (no block, or data older than the ring): losses since the start
 * of the round it was sent in (this one or the last), against what the
 * sample delivered plus them, which counts up to two rounds of losses
 * against one flight.
 */
struct b3_flight {
	u32 in_flight;		/* packets in flight when the data was sent */
	u32 lost;		/* packets lost since */
};

static void b3_acked_flight(const struct sock *sk,
			    const struct rate_sample *rs, struct b3_flight *f)
{
	const struct bbrx3 *b = inet_csk_ca(sk);
	u32 lost_then = b->prev_round_lost;

	if (b3_sent_flight(sk, rs->prior_delivered, &f->in_flight,
			   &lost_then)) {
		f->lost = tcp_sk(sk)->lost - lost_then;
		return;
	}
	if (!before(rs->prior_delivered, b->round_delivered))
		lost_then = b->round_lost;
	f->lost = tcp_sk(sk)->lost - lost_then;
	f->in_flight = rs->delivered + f->lost;
}

/*
 * A flight's losses above loss_thresh of it (the release: rs->lost against
 * rs->tx_in_flight) [D 5.5.10.2].
 */
static bool b3_loss_too_high(const struct bbrx_net *bn,
			     const struct b3_flight *f)
{
	return f->lost && (u64)f->lost * PERMILLE >
	       (u64)READ_ONCE(bn->bbrx3_loss_thresh) * f->in_flight;
}

/*
 * Did the flight this ACK's data was sent in carry too much? Too many
 * losses, or a CE-marked share of the sample above ecn_thresh (the
 * release's ECN rule). The caller needs a sample (rs->delivered > 0).
 */
static enum b3_too_high b3_is_inflight_too_high(struct sock *sk,
						const struct rate_sample *rs,
						const struct bbrx_net *bn,
						const struct b3_flight *f)
{
	s32 ce = bbrx_rs_delivered_ce(rs);

	if (b3_loss_too_high(bn, f))
		return B3_TOO_HIGH_LOSS;
	if (ce > 0 && b3_ecn_eligible(sk, bn) &&
	    (u64)ce * PERMILLE >
	    (u64)READ_ONCE(bn->bbrx3_ecn_thresh) * rs->delivered)
		return B3_TOO_HIGH_ECN;
	return B3_OK;
}

/*
 * A probe went too high: the inflight it reached (or beta of the target,
 * whichever is more) becomes the long-term bound, once per probe; UP ends.
 * Returns true if that moved the cycle to DOWN.
 */
static bool b3_handle_inflight_too_high(struct sock *sk, bool app_limited,
					struct bbrx_net *bn,
					enum b3_too_high why,
					const struct b3_flight *f)
{
	struct bbrx3 *b = inet_csk_ca(sk);
	u32 beta = READ_ONCE(bn->bbrx3_beta);

	b->prev_probe_too_high = 1;
	b->probe_samples = 0;
	if (!app_limited) {
		b->inflight_hi = max_t(u32, f->in_flight,
				       (u64)b3_target_inflight(sk, bn) * beta /
				       PERMILLE);
		bbrx_stat_inc(bn, why == B3_TOO_HIGH_ECN ?
			      BBRX3_STAT_INFLIGHT_HI_ECN :
			      BBRX3_STAT_INFLIGHT_HI_LOSS);
	}
	if (b->mode == B3_PROBE_BW && b->state == B3_UP) {
		b3_start_down(sk);
		return true;
	}
	return false;
}

/* UP, limited by inflight_hi: count acked packets into its growth. */
static void b3_probe_inflight_hi_upward(struct sock *sk,
					const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbrx3 *b = inet_csk_ca(sk);
	u32 acked, delta;

	if (!tp->is_cwnd_limited || tcp_snd_cwnd(tp) < b->inflight_hi) {
		b->probe_up_acked = 0;	/* no credit for unused room */
		return;
	}
	acked = b->probe_up_acked + rs->acked_sacked;
	if (acked >= b->probe_up_cnt) {
		delta = acked / b->probe_up_cnt;
		acked -= delta * b->probe_up_cnt;
		b->inflight_hi += delta;
	}
	b->probe_up_acked = min_t(u32, acked, U16_MAX);
	if (b->round_start)
		b3_raise_inflight_hi_slope(sk);
}

/*
 * The long-term model, on every ACK once the pipe was found full: the ACK
 * phase of the last probe, the max_bw window, and inflight_hi (cut when a
 * probe went too high, raised when more inflight proved safe). Returns true
 * if it moved the PROBE_BW cycle (REFILL after a risky stop, DOWN after a
 * probe that went too high).
 */
static bool b3_adapt_upper_bounds(struct sock *sk, const struct rate_sample *rs,
				  struct bbrx_net *bn)
{
	struct bbrx3 *b = inet_csk_ca(sk);
	enum b3_too_high why;
	struct b3_flight f;

	if (b->ack_phase == B3_ACKS_PROBE_STOPPING && b->round_start) {
		b->probe_samples = 0;
		b->ack_phase = B3_ACKS_INIT;
		if (b->mode == B3_PROBE_BW && !rs->is_app_limited) {
			/* a cycle ended: max_bw now spans this one and the last */
			b->bw_hi[0] = b->bw_hi[1];
			b->bw_hi[1] = 0;
		}
		/*
		 * a stop at inflight_hi without loss: probe again at once,
		 * REFILL first; nothing else may move the cycle on this ACK
		 */
		if (b->mode == B3_PROBE_BW && b->stopped_risky_probe &&
		    !b->prev_probe_too_high) {
			b3_start_refill(sk);
			return true;
		}
	}

	if (rs->delivered <= 0)
		return false;		/* no sample: no flight to judge */
	b3_acked_flight(sk, rs, &f);
	why = b3_is_inflight_too_high(sk, rs, bn, &f);
	if (why != B3_OK) {
		if (b->probe_samples)
			return b3_handle_inflight_too_high(sk,
							   rs->is_app_limited,
							   bn, why, &f);
		return false;
	}
	if (b->inflight_hi == B3_UNSET)
		return false;
	/*
	 * the flight this data was sent in proved safe: inflight_hi may grow
	 * to it (the release: to rs->tx_in_flight), so that random loss
	 * cannot pin the bound
	 */
	if (f.in_flight > b->inflight_hi)
		b->inflight_hi = f.in_flight;
	if (b->mode == B3_PROBE_BW && b->state == B3_UP)
		b3_probe_inflight_hi_upward(sk, rs);
	return false;
}

static void b3_update_cycle_phase(struct sock *sk,
				  const struct rate_sample *rs,
				  struct bbrx_net *bn, u32 bw_sample)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbrx3 *b = inet_csk_ca(sk);
	u32 inflight;

	if (!b->full_bw_reached)
		return;
	/* the release's order: a decision there is this ACK's only one */
	if (b3_adapt_upper_bounds(sk, rs, bn) || b->mode != B3_PROBE_BW)
		return;

	inflight = bbrx_inflight_at_edt(sk, rs->prior_in_flight, b3_bw(b));
	switch (b->state) {
	case B3_DOWN:
		if (b3_check_time_to_probe(sk, bn))
			return;
		if (b3_check_time_to_cruise(sk, bn, inflight))
			b3_start_cruise(sk);
		break;
	case B3_CRUISE:
		b3_check_time_to_probe(sk, bn);
		break;
	case B3_REFILL:
		if (b->round_start) {
			b->probe_samples = 1;
			b3_start_up(sk, bn, bw_sample);
		}
		break;
	case B3_UP:
		if (b->prev_probe_too_high && inflight >= b->inflight_hi) {
			b->stopped_risky_probe = 1;
		} else if (tp->is_cwnd_limited &&
			   tcp_snd_cwnd(tp) >= b->inflight_hi) {
			/* held by inflight_hi: bw cannot show a plateau */
			b3_reset_full_bw(b);
			b->full_bw = bw_sample;
			break;
		} else if (!b->full_bw_now) {
			break;
		}
		b->prev_probe_too_high = 0;
		b3_start_down(sk);
		break;
	}
}

/* A PROBE_BW phase, or B3_TRACE_NO_PHASE outside PROBE_BW. */
static u32 b3_trace_phase(u32 mode, u32 state)
{
	return mode == B3_PROBE_BW ? state : B3_TRACE_NO_PHASE;
}

/*
 * The bbrx3_round trace event for the round ending on this ACK; its
 * tx_in_flight is that of the flight this ACK's data was sent in (0: no
 * block, or sent before the oldest snapshot).
 */
static void b3_trace_round_end(struct sock *sk, const struct rate_sample *rs,
			       u32 delivered, u32 lost, u32 ce)
{
	const struct bbrx3 *b = inet_csk_ca(sk);
	u32 sent_lost;
	struct bbrx_trace_round r = {
		.mode = b->mode,
		.phase = b3_trace_phase(b->mode, b->state),
		.bw = b3_bw(b),
		.max_bw = b3_max_bw(b),
		.bw_lo = b->bw_lo == B3_UNSET ? 0 : b->bw_lo,
		.min_rtt_us = b->min_rtt_us,
		.pacing_gain = b3_pacing_gain(b),
		.cwnd_gain = b3_cwnd_gain(b),
		.inflight_hi = b->inflight_hi == B3_UNSET ? 0 : b->inflight_hi,
		.inflight_lo = b->inflight_lo == B3_UNSET ? 0 : b->inflight_lo,
		.delivered = delivered,
		.lost = lost,
		.ce = ce,
	};

	/* left 0 where no snapshot covers the send */
	b3_sent_flight(sk, rs->prior_delivered, &r.tx_in_flight, &sent_lost);
	bbrx_trace_round_fill(sk, &r);
	trace_bbrx3_round(sk, &r);
}

/* Per-round signals: the CE share's EWMA and STARTUP's loss and ECN exits. */
static void b3_end_of_round(struct sock *sk, const struct rate_sample *rs,
			    struct bbrx_net *bn)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbrx3 *b = inet_csk_ca(sk);
	u32 delivered = tp->delivered - b->round_delivered;
	u32 ce = tp->delivered_ce - b->round_delivered_ce;
	u32 lost = tp->lost - b->round_lost;
	u32 ratio = 0;

	if (delivered && b3_ecn_eligible(sk, bn)) {
		ratio = min_t(u32, div_u64((u64)ce << BBRX_GAIN_SCALE, delivered),
			      GAIN_UNIT);
		b->ecn_alpha = b->ecn_alpha -
			       (b->ecn_alpha >> B3_ECN_ALPHA_SHIFT) +
			       (ratio >> B3_ECN_ALPHA_SHIFT);
	}
	if (b->mode == B3_STARTUP && !b->full_bw_reached) {
		bool ecn_high = ratio * PERMILLE >=
			(u64)READ_ONCE(bn->bbrx3_ecn_thresh) * GAIN_UNIT;
		/* [D 5.3.1.3]; losses counted per ACK, as the release */
		bool loss_high = inet_csk(sk)->icsk_ca_state == TCP_CA_Recovery &&
			b->loss_events >= B3_FULL_LOSS_CNT &&
			(u64)lost * PERMILLE >
			(u64)READ_ONCE(bn->bbrx3_loss_thresh) * (delivered + lost);

		if (ecn_high && ce)
			b->startup_ecn_rounds = min(b->startup_ecn_rounds + 1,
						    B3_FULL_ECN_ROUNDS);
		else
			b->startup_ecn_rounds = 0;
		if (loss_high || b->startup_ecn_rounds >= B3_FULL_ECN_ROUNDS) {
			b->full_bw_reached = 1;
			b->inflight_hi = max(b3_bdp(b, b3_max_bw(b), GAIN_UNIT),
					     b->inflight_latest);
			bbrx_stat_inc(bn, BBRX3_STAT_STARTUP_EXIT_CONG);
		}
	}
	/*
	 * CE echoed in this round, counted once: rs->delivered_ce spans the
	 * acked packet's sampling interval, which reaches into the last round
	 */
	b->ecn_in_round = ce > 0;
	if (trace_bbrx3_round_enabled())
		b3_trace_round_end(sk, rs, delivered, lost, ce);
	b->prev_round_lost = b->round_lost;
	b->round_lost = tp->lost;
	b->round_delivered = tp->delivered;
	b->round_delivered_ce = tp->delivered_ce;
	b->loss_events = 0;
}

/* The lower bounds adapt outside probing only [D 5.5.10.3]. */
static bool b3_lower_bounds_adapt(const struct bbrx3 *b)
{
	return b->mode != B3_STARTUP &&
	       !(b->mode == B3_PROBE_BW &&
		 (b->state == B3_REFILL || b->state == B3_UP));
}

/*
 * Once per main round: after a CE-marked round cut inflight_lo by alpha/3
 * (release). The CE share is counted per round (classic ECN echoes one
 * ECE per round), so the ECN response stays on the main round.
 */
static void b3_adapt_lower_bounds_ecn(struct sock *sk, struct bbrx_net *bn)
{
	struct bbrx3 *b = inet_csk_ca(sk);

	if (!b->ecn_in_round || !b3_ecn_eligible(sk, bn) ||
	    !b3_lower_bounds_adapt(b))
		return;
	if (b->inflight_lo == B3_UNSET)
		b->inflight_lo = tcp_snd_cwnd(tcp_sk(sk));
	b->inflight_lo = (u64)b->inflight_lo *
			 (GAIN_UNIT - ((b->ecn_alpha * B3_ECN_FACTOR) >>
				       BBRX_GAIN_SCALE)) >> BBRX_GAIN_SCALE;
	b->bw_lo = max(b->bw_lo, 1U);
	bbrx_stat_inc(bn, BBRX3_STAT_INFLIGHT_LO_ECN);
}

/*
 * At the end of a lossy loss round: keep beta of bw_lo and inflight_lo,
 * but never less than the loss round delivered [D 5.5.10.3].
 */
static void b3_adapt_lower_bounds_loss(struct sock *sk, struct bbrx_net *bn)
{
	struct bbrx3 *b = inet_csk_ca(sk);
	u32 beta = READ_ONCE(bn->bbrx3_beta);

	if (!b->loss_in_round || !b3_lower_bounds_adapt(b))
		return;
	if (b->bw_lo == B3_UNSET)
		b->bw_lo = b3_max_bw(b);
	if (b->inflight_lo == B3_UNSET)
		b->inflight_lo = tcp_snd_cwnd(tcp_sk(sk));
	b->bw_lo = max_t(u32, b->bw_latest, (u64)b->bw_lo * beta / PERMILLE);
	b->bw_lo = max(b->bw_lo, 1U);
	b->inflight_lo = max_t(u32, b->inflight_latest,
			       (u64)b->inflight_lo * beta / PERMILLE);
	bbrx_stat_inc(bn, BBRX3_STAT_INFLIGHT_LO_LOSS);
}

/*
 * A loss was seen. The first one since the loss round began restarts the
 * loss round there, so that the losses of one episode, reported over the
 * next round trip, are judged once, when the data sent at the first loss
 * is acked: the release's bbr_note_loss(), the draft's NoteLoss [D 5.5.10.3].
 */
static void b3_note_loss(struct sock *sk)
{
	struct bbrx3 *b = inet_csk_ca(sk);

	if (!b->loss_in_round)
		b->loss_round_delivered = tcp_sk(sk)->delivered;
	b->loss_in_round = 1;
}

/*
 * The loss round, apart from the main one (release, draft): it ends when
 * data sent after its start is acked; at its end the loss response is
 * applied and the latest delivery signals restart.
 */
static void b3_update_loss_round(struct sock *sk, const struct rate_sample *rs,
				 struct bbrx_net *bn, u32 bw_sample)
{
	struct bbrx3 *b = inet_csk_ca(sk);

	if (rs->losses > 0)
		b3_note_loss(sk);
	if (rs->delivered <= 0 || rs->interval_us <= 0)
		return;
	b->bw_latest = max(b->bw_latest, bw_sample);
	b->inflight_latest = max_t(u32, b->inflight_latest, rs->delivered);
	if (before(rs->prior_delivered, b->loss_round_delivered))
		return;
	b->loss_round_delivered = tcp_sk(sk)->delivered;
	if (b->loss_in_round)
		bbrx_stat_inc(bn, BBRX3_STAT_LOSS_ROUNDS);
	b3_adapt_lower_bounds_loss(sk, bn);
	b->loss_in_round = 0;
	b->bw_latest = bw_sample;
	b->inflight_latest = rs->delivered;
}

/*
 * A loss that a tail loss probe repaired: the ACK that covers the probe
 * moves the socket to CWR (tcp_process_tlp_ack()) and marks nothing lost,
 * so neither rs->losses nor tp->lost shows it. The release notes it and,
 * in a probe, judges one loss against the latest flight
 * (bbr_run_loss_probe_recovery(), on an event its kernel adds). The
 * socket's app_limited stands in for the probe's, which 6.1 does not keep.
 */
static void b3_loss_probe_repaired(struct sock *sk)
{
	struct bbrx_net *bn = bbrx_sk_net(sk);
	struct bbrx3 *b = inet_csk_ca(sk);
	struct b3_flight f = { .in_flight = b->inflight_latest + 1, .lost = 1 };

	b3_note_loss(sk);
	if (b->probe_samples && b3_loss_too_high(bn, &f))
		b3_handle_inflight_too_high(sk, tcp_sk(sk)->app_limited, bn,
					    B3_TOO_HIGH_LOSS, &f);
}

/* Packet-timed rounds; at each round's end the round's signals are used. */
static void b3_update_round(struct sock *sk, const struct rate_sample *rs,
			    struct bbrx_net *bn, u32 bw_sample)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbrx3 *b = inet_csk_ca(sk);

	b->round_start = 0;
	b3_update_loss_round(sk, rs, bn, bw_sample);
	if (rs->losses > 0 && b->loss_events < 7)
		b->loss_events++;

	if (rs->delivered < 0 || rs->interval_us <= 0 ||
	    before(rs->prior_delivered, b->next_round_delivered))
		return;

	b->next_round_delivered = tp->delivered;
	b->round_start = 1;
	if (b->rounds_since_probe < B3_ROUNDS_SINCE_PROBE_MAX)
		b->rounds_since_probe++;
	b3_end_of_round(sk, rs, bn);
	b3_adapt_lower_bounds_ecn(sk, bn);
	b->ecn_in_round = 0;
}

static void b3_update_max_bw(struct sock *sk, const struct rate_sample *rs,
			     u32 bw_sample)
{
	struct bbrx3 *b = inet_csk_ca(sk);

	/* app-limited samples count only if they show more bw */
	if (rs->is_app_limited && bw_sample <= b3_max_bw(b))
		return;
	b->bw_hi[1] = max(b->bw_hi[1], bw_sample);
}

/* bw stopped growing by 25% for 3 rounds: STARTUP's end, UP's plateau. */
static void b3_check_full_bw(struct sock *sk, const struct rate_sample *rs)
{
	struct bbrx3 *b = inet_csk_ca(sk);
	u32 bw = b3_max_bw(b);

	if (b->full_bw_now || !b->round_start || rs->is_app_limited)
		return;
	if ((u64)bw << BBRX_GAIN_SCALE >= (u64)b->full_bw * B3_FULL_BW_GROWTH) {
		b->full_bw = bw;
		b->full_bw_cnt = 0;
		return;
	}
	if (++b->full_bw_cnt >= B3_FULL_BW_ROUNDS) {
		b->full_bw_now = 1;
		b->full_bw_reached = 1;
	}
}

static void b3_check_drain(struct sock *sk, struct bbrx_net *bn)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbrx3 *b = inet_csk_ca(sk);
	u32 inflight;

	if (b->mode == B3_STARTUP && b->full_bw_reached) {
		b->mode = B3_DRAIN;
		b->rounds_since_probe = 0;	/* counts DRAIN's rounds */
		tp->snd_ssthresh = b3_inflight(sk, bn, b3_max_bw(b), GAIN_UNIT);
		bbrx_stat_inc(bn, BBRX3_STAT_STARTUP_EXIT);
	}
	if (b->mode != B3_DRAIN)
		return;
	inflight = bbrx_inflight_at_edt(sk, tcp_packets_in_flight(tp),
					b3_bw(b));
	/*
	 * CheckDrainDone's round_count > drain_start_round + 3: the round
	 * DRAIN began on counts as 0 here, so the 4th round after it ends it
	 */
	if (inflight <= b3_inflight(sk, bn, b3_max_bw(b), GAIN_UNIT) ||
	    b->rounds_since_probe >= B3_DRAIN_MAX_ROUNDS)
		b3_start_down(sk);
}

/*
 * probe_rtt_min's stamp moves to @now; min_rtt's stays where it was, so its
 * age relative to the new stamp grows by the step (saturating: past the
 * 10 s window, see struct bbrx3).
 */
static void b3_stamp_probe_rtt_min(struct bbrx3 *b, u32 now)
{
	u32 step = now - b->probe_rtt_min_stamp;

	b->min_rtt_age = step >= B3_MIN_RTT_AGE_MAX - b->min_rtt_age ?
			 B3_MIN_RTT_AGE_MAX : b->min_rtt_age + step;
	b->probe_rtt_min_stamp = now;
}

static void b3_exit_probe_rtt(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbrx3 *b = inet_csk_ca(sk);

	b3_reset_lower_bounds(b);
	b3_stamp_probe_rtt_min(b, tcp_jiffies32);
	tcp_snd_cwnd_set(tp, max(tcp_snd_cwnd(tp), b->prior_cwnd));
	if (b->full_bw_reached) {
		b3_start_down(sk);
		b3_start_cruise(sk);
	} else {
		b->mode = B3_STARTUP;
	}
}

static bool b3_check_probe_rtt_done(struct sock *sk)
{
	struct bbrx3 *b = inet_csk_ca(sk);

	if (!b->probe_rtt_done_stamp ||
	    !after(tcp_jiffies32, b->probe_rtt_done_stamp))
		return false;
	b3_exit_probe_rtt(sk);
	return true;
}

static u32 b3_probe_rtt_cwnd(const struct bbrx3 *b)
{
	return max_t(u32, b3_bdp(b, b3_bw(b), B3_PROBE_RTT_GAIN), B3_MIN_CWND);
}

/*
 * min_rtt (10 s) and probe_rtt_min (bbrx3_probe_rtt_win_ms) filters; when
 * the latter expires, PROBE_RTT holds inflight at 0.5 x BDP for 200 ms and
 * a round [D 5.3.4].
 */
static void b3_update_min_rtt(struct sock *sk, const struct rate_sample *rs,
			      struct bbrx_net *bn)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbrx3 *b = inet_csk_ca(sk);
	u32 win = msecs_to_jiffies(READ_ONCE(bn->bbrx3_probe_rtt_win_ms));
	bool expired = after(tcp_jiffies32, b->probe_rtt_min_stamp + win);

	if (bbrx_rtt_sample_wins(rs, b->probe_rtt_min_us, expired)) {
		b->probe_rtt_min_us = rs->rtt_us;
		b3_stamp_probe_rtt_min(b, tcp_jiffies32);
	}
	/* min_rtt's stamp: probe_rtt_min's less min_rtt_age (struct bbrx3) */
	if (b->probe_rtt_min_us <= b->min_rtt_us ||
	    after(tcp_jiffies32, b->probe_rtt_min_stamp - b->min_rtt_age +
		  msecs_to_jiffies(B3_MIN_RTT_WIN_MS))) {
		b->min_rtt_us = b->probe_rtt_min_us;
		b->min_rtt_age = 0;	/* takes probe_rtt_min's stamp */
	}

	if (expired && !b->idle_restart && b->mode != B3_PROBE_RTT) {
		b3_save_cwnd(sk);
		b->mode = B3_PROBE_RTT;
		b->probe_rtt_done_stamp = 0;
		b->ack_phase = B3_ACKS_PROBE_STOPPING;
		b3_start_round(sk);
		bbrx_stat_inc(bn, BBRX3_STAT_PROBE_RTT_ENTER);
	}

	if (b->mode == B3_PROBE_RTT) {
		/* samples at the reduced cwnd say nothing about bw */
		tp->app_limited = (tp->delivered + tcp_packets_in_flight(tp)) ?: 1;
		if (!b->probe_rtt_done_stamp &&
		    tcp_packets_in_flight(tp) <= b3_probe_rtt_cwnd(b)) {
			b->probe_rtt_done_stamp =
				bbrx_stamp_after_ms(B3_PROBE_RTT_MS);
			b->probe_rtt_round_done = 0;
			b3_start_round(sk);
		} else if (b->probe_rtt_done_stamp) {
			if (b->round_start)
				b->probe_rtt_round_done = 1;
			if (b->probe_rtt_round_done)
				b3_check_probe_rtt_done(sk);
		}
	}
	if (rs->delivered > 0)
		b->idle_restart = 0;
}

static void b3_set_pacing_rate(struct sock *sk, u32 bw, u32 gain)
{
	struct bbrx3 *b = inet_csk_ca(sk);

	b->has_seen_rtt = bbrx_set_pacing(sk, b->has_seen_rtt, B3_STARTUP_GAIN,
					  bw, gain, b->full_bw_reached);
}

/* The inflight model's bound on cwnd in this state [D 5.6.4.6]. */
static u32 b3_inflight_bound(const struct bbrx3 *b, const struct bbrx_net *bn)
{
	u32 cap = B3_UNSET;

	if (b->mode == B3_PROBE_BW && b->state != B3_CRUISE)
		cap = b->inflight_hi;
	else if (b->mode == B3_PROBE_RTT ||
		 (b->mode == B3_PROBE_BW && b->state == B3_CRUISE))
		cap = b3_inflight_with_headroom(b, bn);
	cap = min(cap, b->inflight_lo);
	return max_t(u32, cap, B3_MIN_CWND);
}

static void b3_set_cwnd(struct sock *sk, struct bbrx_net *bn,
			const struct rate_sample *rs, u32 bw)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbrx3 *b = inet_csk_ca(sk);
	u32 acked = rs->acked_sacked;
	u32 cwnd = tcp_snd_cwnd(tp), target;

	/*
	 * No packet conservation in fast recovery, and no cut by the losses:
	 * v3 removed both (the release's bbr_set_cwnd() has no recovery
	 * branch); the loss response is the lower bounds'.
	 */
	if (!acked)
		goto done;

	/* the allowance applies in STARTUP too [D 5.5.9; release] */
	target = b3_bdp(b, bw, b3_cwnd_gain(b)) +
		 bbrx_extra_acked_cwnd(&b->ea, bw,
				       bbrx_gain(READ_ONCE(bn->extra_acked_gain)));
	target = b3_quantization_budget(sk, bn, target);
	if (b->full_bw_reached)
		cwnd = min(cwnd + acked, target);
	else if (cwnd < target || tp->delivered < TCP_INIT_CWND)
		cwnd += acked;
	cwnd = max_t(u32, cwnd, B3_MIN_CWND);
done:
	cwnd = min(cwnd, b3_inflight_bound(b, bn));
	if (b->mode == B3_PROBE_RTT)
		cwnd = min(cwnd, b3_probe_rtt_cwnd(b));
	tcp_snd_cwnd_set(tp, min(cwnd, tp->snd_cwnd_clamp));
}

/*
 * The bbrx3_state event, if this ACK changed the mode, the PROBE_BW phase
 * or whether the connection is in loss recovery. prev_ca_state is the
 * congestion state on the ACK before (or the RTO's, set in .set_state).
 */
static void b3_trace_state(struct sock *sk, u32 mode, u32 state, u8 ca_prev)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	const struct bbrx3 *b = inet_csk_ca(sk);
	u8 ca = inet_csk(sk)->icsk_ca_state;
	bool rec = ca >= TCP_CA_Recovery, rec_prev = ca_prev >= TCP_CA_Recovery;
	struct bbrx_trace_state s;

	if (b->mode == mode && b->state == state && rec == rec_prev)
		return;
	s = (struct bbrx_trace_state) {
		.mode = b->mode,
		.phase = b3_trace_phase(b->mode, b->state),
		.prev_mode = mode,
		.prev_phase = b3_trace_phase(mode, state),
		.inflight_hi = b->inflight_hi == B3_UNSET ? 0 : b->inflight_hi,
		.inflight_lo = b->inflight_lo == B3_UNSET ? 0 : b->inflight_lo,
		.delivered = tp->delivered,
		.lost = tp->lost,
		.cwnd = tcp_snd_cwnd(tp),
		.ca_state = ca,
		.prev_ca_state = ca_prev,
	};
	trace_bbrx3_state(sk, &s);
}

/* .cong_control: the per-ACK model update, in [D 5.2.3]'s order. */
static void bbrx3_cong_control(struct sock *sk, const struct rate_sample *rs)
{
	struct bbrx_net *bn = bbrx_sk_net(sk);
	struct bbrx3 *b = inet_csk_ca(sk);
	u32 bw_sample = 0, bw, mode0 = b->mode, state0 = b->state;
	u8 ca0 = b->prev_ca_state;

	/*
	 * An active open's SYN-ACK is acked before tcp_init_transfer() calls
	 * .init, on zeroed state (upstream's BBRv3 release guards it too)
	 */
	if (unlikely(!b->initialized))
		return;
	if (rs->delivered > 0 && rs->interval_us > 0)
		bw_sample = (u32)min_t(u64, div64_long((u64)rs->delivered * BW_UNIT,
						       rs->interval_us), U32_MAX);

	b3_update_round(sk, rs, bn, bw_sample);
	if (bw_sample)
		b3_update_max_bw(sk, rs, bw_sample);
	if (READ_ONCE(bn->extra_acked_gain))
		/* STARTUP's bw doubles per round: a one-round window (release) */
		bbrx_extra_acked_update(&b->ea, sk, rs, b3_bw(b), b->round_start,
					b->full_bw_reached ?
					BBRX_EXTRA_ACKED_ROUNDS : 1);
	b3_check_full_bw(sk, rs);
	b3_check_drain(sk, bn);
	b3_update_cycle_phase(sk, rs, bn, bw_sample);
	b3_update_min_rtt(sk, rs, bn);

	bw = b3_bw(b);
	b3_set_pacing_rate(sk, bw, b3_pacing_gain(b));
	b3_set_cwnd(sk, bn, rs, bw);
	b->prev_ca_state = inet_csk(sk)->icsk_ca_state;
	if (trace_bbrx3_state_enabled())
		b3_trace_state(sk, mode0, state0, ca0);
	/* after the model, which reads nothing of it */
	if (b->blk && rs->delivered > 0)
		b3_block_snap(sk, b->blk, rs->acked_sacked);
}

/* Sending starts with nothing in flight: as bbrx_tx_start() (cc_bbrx.c). */
static void bbrx3_tx_start(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbrx3 *b = inet_csk_ca(sk);

	if (!tp->app_limited || unlikely(!b->initialized))
		return;
	bbrx_stat_inc(bbrx_sk_net(sk), BBRX3_STAT_IDLE_RESTART);
	/* restarting from idle: do not burst at a probing gain */
	b->idle_restart = 1;
	bbrx_extra_acked_restart(&b->ea, tp->tcp_mstamp);
	if (b->mode == B3_PROBE_BW) {
		b3_set_pacing_rate(sk, b3_bw(b), GAIN_UNIT);
	} else if (b->mode == B3_PROBE_RTT && b3_check_probe_rtt_done(sk) &&
		   trace_bbrx3_state_enabled()) {
		/* PROBE_RTT ended here, not on an ACK */
		b3_trace_state(sk, B3_PROBE_RTT, B3_DOWN, b->prev_ca_state);
	}
}

static void bbrx3_init(struct sock *sk)
{
	struct bbrx_net *bn = bbrx_sk_net(sk);
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbrx3 *b = inet_csk_ca(sk);

	memset(b, 0, sizeof(*b));
	tp->snd_ssthresh = TCP_INFINITE_SSTHRESH;
	b->prev_ca_state = TCP_CA_Open;
	b->next_round_delivered = tp->delivered;
	b->round_delivered = tp->delivered;
	b->round_delivered_ce = tp->delivered_ce;
	b->round_lost = tp->lost;
	b->prev_round_lost = tp->lost;
	b->min_rtt_us = tcp_min_rtt(tp);
	b->probe_rtt_min_us = b->min_rtt_us;
	b->probe_rtt_min_stamp = tcp_jiffies32;	/* min_rtt_age 0: the same */
	b->bw_lo = B3_UNSET;
	b->inflight_hi = B3_UNSET;
	b->inflight_lo = B3_UNSET;
	b->ecn_alpha = GAIN_UNIT;	/* react at once if the path starts marked */
	b->mode = B3_STARTUP;
	/* the first loss round ends with the first flight (release) */
	b->loss_round_delivered = tp->delivered + 1;
	b->initialized = 1;
	bbrx_extra_acked_restart(&b->ea, tp->tcp_mstamp);

	WRITE_ONCE(sk->sk_pacing_shift, READ_ONCE(bn->pacing_shift));
	b->has_seen_rtt = bbrx_init_pacing(sk, B3_STARTUP_GAIN);
	/* without fq on the device, TCP paces by itself (EDT timer) */
	cmpxchg(&sk->sk_pacing_status, SK_PACING_NONE, SK_PACING_NEEDED);
	bbrx_stat_inc(bn, BBRX3_STAT_SOCKETS_INIT);
	b3_block_alloc(sk, b, bn);
}

/*
 * .release: the block back, then what bbrx's .release does. The kernel
 * zeroes the private area before every .init (tcp_assign_congestion_control(),
 * tcp_reinit_congestion_control(), tcp_disconnect(); a passive open's child
 * copies its listener's, which never ran .init) and after tcp_disconnect()'s
 * .release, and 6.1 calls .release also where .init never ran (socket
 * closed before it was established): blk is NULL there, or this socket's.
 */
static void bbrx3_release(struct sock *sk)
{
	b3_block_free(sk, inet_csk_ca(sk));
	bbrx_release(sk);
}

/* A loss episode begins: save cwnd, and the bounds for an undo (release). */
static u32 bbrx3_ssthresh(struct sock *sk)
{
	struct bbrx3 *b = inet_csk_ca(sk);

	b3_save_cwnd(sk);
	if (b->blk) {
		b->blk->undo_bw_lo = b->bw_lo;
		b->blk->undo_inflight_lo = b->inflight_lo;
		b->blk->undo_inflight_hi = b->inflight_hi;
	}
	return tcp_sk(sk)->snd_ssthresh;
}

/*
 * A spurious loss episode: forget STARTUP's plateau and the round's loss,
 * give each bound back what the episode took (max of now and its start),
 * and cwnd its value before the episode: the release's bbr_undo_cwnd().
 * Without a block the bounds have no copies: the lower bounds are lifted
 * and inflight_hi stays.
 */
static u32 bbrx3_undo_cwnd(struct sock *sk)
{
	struct bbrx3 *b = inet_csk_ca(sk);

	b3_reset_full_bw(b);
	b->loss_in_round = 0;
	/* the episode's losses were not real: no flight is judged by them */
	b->round_lost = tcp_sk(sk)->lost;
	b->prev_round_lost = b->round_lost;
	if (b->blk) {
		b->bw_lo = max(b->bw_lo, b->blk->undo_bw_lo);
		b->inflight_lo = max(b->inflight_lo, b->blk->undo_inflight_lo);
		b->inflight_hi = max(b->inflight_hi, b->blk->undo_inflight_hi);
	} else {
		b3_reset_lower_bounds(b);
	}
	return b->prior_cwnd;
}

static void bbrx3_set_state(struct sock *sk, u8 new_state)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbrx3 *b = inet_csk_ca(sk);
	bool probing = b->mode == B3_STARTUP ||
		       (b->mode == B3_PROBE_BW &&
			(b->state == B3_REFILL || b->state == B3_UP));

	/*
	 * Recovery begins only on a loss, also one the RACK reorder timer
	 * marked between ACKs (no rs->losses shows it): the round is lossy.
	 */
	if (new_state == TCP_CA_Recovery)
		b3_note_loss(sk);
	/*
	 * CWR without ECN: a loss repaired by a tail loss probe, or a packet
	 * a local qdisc refused (tcp_enter_cwr() on NET_XMIT_CN), a loss too
	 */
	if (new_state == TCP_CA_CWR && !bbrx_ecn_ok(tp))
		b3_loss_probe_repaired(sk);
	/* leaving an RTO's recovery: cwnd back to before it (release) */
	if (b->prev_ca_state == TCP_CA_Loss && new_state != TCP_CA_Loss)
		tcp_snd_cwnd_set(tp, max(tcp_snd_cwnd(tp), b->prior_cwnd));
	if (new_state != TCP_CA_Loss)
		return;
	/*
	 * RTO: the loss is noted; outside probing the short-term
	 * bound starts from the cwnd before the timeout (RTO takes cwnd to 1).
	 */
	b->prev_ca_state = TCP_CA_Loss;
	b->full_bw = 0;
	b3_note_loss(sk);
	if (!probing && b->inflight_lo == B3_UNSET)
		b->inflight_lo = max(tcp_snd_cwnd(tp), b->prior_cwnd);
}

static size_t bbrx3_get_info(struct sock *sk, u32 ext, int *attr,
			     union tcp_cc_info *info)
{
	struct bbrx3 *b = inet_csk_ca(sk);

	return bbrx_fill_bbr_info(sk, ext, attr, info, b3_bw(b), b->min_rtt_us,
				  b3_pacing_gain(b), b3_cwnd_gain(b));
}

BBRX_DEFINE_CONG_CONTROL_WRAPPER(bbrx3_cong_control)
BBRX_DEFINE_TX_START_WRAPPER(bbrx3_tx_start)

static_assert(sizeof(struct bbrx3) <= ICSK_CA_PRIV_SIZE);

/* Registered by main.c; a socket's icsk_ca_ops points here. */
struct tcp_congestion_ops bbrx3_cong_ops __read_mostly = {
	.flags		= TCP_CONG_NON_RESTRICTED,
	.name		= BBRX3_CA_NAME,
	.owner		= THIS_MODULE,
	.init		= bbrx3_init,
	.release	= bbrx3_release,
	.cong_control	= BBRX_CONG_CONTROL(bbrx3_cong_control),
	.sndbuf_expand	= bbrx_sndbuf_expand,
	.undo_cwnd	= bbrx3_undo_cwnd,
	BBRX_TX_START_OP(bbrx3_tx_start),
	.ssthresh	= bbrx3_ssthresh,
	.min_tso_segs	= bbrx_min_tso_segs,
	.get_info	= bbrx3_get_info,
	.set_state	= bbrx3_set_state,
};
