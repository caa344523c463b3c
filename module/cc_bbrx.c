// SPDX-License-Identifier: GPL-2.0
/*
 * bbrx: a BBR-family TCP congestion control.
 *
 * The model (Cardwell, Cheng, Gunn, Hassas Yeganeh, Jacobson, "BBR:
 * Congestion-Based Congestion Control", ACM Queue 14(5), 2016, and
 * draft-cardwell-iccrg-bbr-congestion-control), per ACK:
 *
 *   bw          = max over the last 10 rounds of delivered / interval
 *   min_rtt     = min over the last min_rtt_win_ms of the RTT samples
 *   pacing_rate = pacing_gain * bw                         (1% below)
 *   cwnd        = cwnd_gain * bw * min_rtt                 (the BDP)
 *               + extra_acked_gain * extra_acked           (ACK aggregation)
 *               + tso_margin * tso_segs_goal               (burst allowance)
 *
 * Phases:
 *
 *            |
 *            V
 *   +---> STARTUP  ----+     pacing gain high_gain until bw stops growing
 *   |        |         |     by 25% for 3 rounds (full bw reached)
 *   |        V         |
 *   |      DRAIN   ----+     pacing gain drain_gain until inflight <= BDP
 *   |        |         |
 *   |        V         |
 *   +---> PROBE_BW ----+     pacing gain cycles up, down, 1 x 6 (one
 *   |        ^         |     min_rtt each)
 *   |        |         |
 *   |        |         V
 *   +---- PROBE_RTT <--+     min_rtt not refreshed for min_rtt_win_ms:
 *                            cwnd 4 for probe_rtt_ms and one round
 *
 * The burst goal (tso_segs_goal) follows upstream 350c9f484bde ("tcp_bbr:
 * better deal with suboptimal GSO"): about 1 ms of data at the pacing rate
 * (pacing_rate >> sk_pacing_shift), bounded by the legacy 64 KB GSO size but
 * never by the device's gso_max_segs, so a NIC with GSO capped at 2 segments
 * does not shrink cwnd to a few packets. gso_cap = 1 brings the pre-fix cap
 * back for A/B tests.
 *
 * Long-term bw: behind a token-bucket policer (two sampling intervals with
 * heavy loss at the same rate) the model paces at that rate for 48 rounds.
 *
 * Gains are kept in 1/256 as in-tree BBR; the per-mille sysctls are
 * rounded to that unit, so the defaults compute exactly as 6.1's
 * tcp_bbr.c. Not modelled: the ECN/loss response of BBR v2/v3.
 */
#include <linux/inet_diag.h>
#include <linux/module.h>
#include <linux/random.h>
#include <linux/win_minmax.h>
#include <net/tcp.h>

#include "bbrx.h"
#include "bbrx_trace.h"
#include "compat.h"

#define BW_SCALE	BBRX_BW_SCALE	/* bw is packets per usec << BW_SCALE */
#define BW_UNIT		BIT(BW_SCALE)
#define GAIN_SCALE	BBRX_GAIN_SCALE	/* gains in 1/256 (in-tree BBR_UNIT) */
#define GAIN_UNIT	BIT(GAIN_SCALE)

#define BBRX_BW_FILTER_ROUNDS	10	/* rounds in the bw max filter */
#define BBRX_CYCLE_LEN		8	/* PROBE_BW phases: up, down, 1 x 6 */
#define BBRX_FULL_BW_GROWTH	(GAIN_UNIT * 5 / 4) /* "still growing": 25% */
#define BBRX_FULL_BW_ROUNDS	3	/* rounds without that growth = full */
#define BBRX_MIN_CWND		4	/* segments: PROBE_RTT and the floor */
/*
 * Long-term (policer) bw, as in 6.1's tcp_bbr.c (since upstream "tcp_bbr:
 * add BBR congestion control", Sep 2016): after a loss, sample
 * delivery over 4..16 rounds; two consecutive intervals with a loss rate of
 * 20% or more and rates within 12.5% (or 4 kbit/s) of each other mean a
 * token-bucket policer, so pace at their average, gain 1, for 48 rounds.
 */
#define BBRX_LT_INTVL_MIN_RTTS	4	/* rounds per sampling interval, min */
#define BBRX_LT_LOSS_THRESH	50	/* loss rate, 1/256: ~20% */
#define BBRX_LT_BW_RATIO	(GAIN_UNIT / 8)	/* rates this close: 12.5% */
#define BBRX_LT_BW_DIFF		(4000 / 8)	/* or this close, bytes/s */
#define BBRX_LT_BW_MAX_RTTS	48	/* rounds lt_bw is used for */

enum bbrx_mode {
	BBRX_STARTUP,
	BBRX_DRAIN,
	BBRX_PROBE_BW,
	BBRX_PROBE_RTT,
};

/* Private state in icsk_ca_priv (ICSK_CA_PRIV_SIZE bytes). */
struct bbrx {
	struct minmax bw;		/* max filter, BW_UNIT, keyed by round */
	u64 cycle_mstamp;		/* usec: start of this PROBE_BW phase */
	struct bbrx_extra_acked ea;	/* ACK aggregation (extra_acked.c) */
	u32 min_rtt_us;			/* min_rtt filter value */
	u32 min_rtt_stamp;		/* jiffies: when min_rtt was taken */
	u32 probe_rtt_done_stamp;	/* jiffies: PROBE_RTT may end, 0 unset */
	u32 round_count;		/* packet-timed rounds so far */
	u32 next_round_delivered;	/* tp->delivered that ends this round */
	u32 prior_cwnd;			/* cwnd before recovery or PROBE_RTT */
	u32 full_bw;			/* BW_UNIT: bw at the last 25% growth */
	u32 lt_bw;			/* BW_UNIT: long-term (policed) bw */
	u32 lt_last_delivered;		/* tp->delivered at interval start */
	u32 lt_last_stamp;		/* msec: delivered_mstamp at start */
	u32 lt_last_lost;		/* tp->lost at interval start */
	u32 round_lost;			/* tp->lost at this round's start */
	u32 round_ce;			/* tp->delivered_ce at round start */
	u16 pacing_gain;		/* GAIN_UNIT, current */
	u16 cwnd_gain;			/* GAIN_UNIT, current */
	u32 mode:2,			/* enum bbrx_mode */
	    prev_ca_state:3,		/* icsk_ca_state on the last ACK */
	    cycle_idx:3,		/* PROBE_BW phase, 0 = probe up */
	    full_bw_cnt:2,		/* rounds without bw growth */
	    round_start:1,		/* this ACK started a new round */
	    packet_conservation:1,	/* first round of fast recovery */
	    idle_restart:1,		/* restarting after idle */
	    probe_rtt_round_done:1,	/* a round passed at PROBE_RTT cwnd */
	    full_bw_reached:1,		/* STARTUP found the pipe full */
	    has_seen_rtt:1,		/* pacing was set from a real RTT */
	    lt_is_sampling:1,		/* a long-term interval is running */
	    lt_use_bw:1,		/* pacing at lt_bw (policer found) */
	    lt_rtt_cnt:7,		/* rounds in this lt interval */
	    unused2:7;
};

static u32 bbrx_max_bw(const struct sock *sk)
{
	const struct bbrx *b = inet_csk_ca(sk);

	return minmax_get(&b->bw);
}

/* The bw the model runs on: the policed rate while one was found. */
static u32 bbrx_bw(const struct sock *sk)
{
	const struct bbrx *b = inet_csk_ca(sk);

	return b->lt_use_bw ? b->lt_bw : bbrx_max_bw(sk);
}

static void bbrx_set_pacing_rate(struct sock *sk, const struct bbrx_net *bn,
				 u32 bw, int gain)
{
	struct bbrx *b = inet_csk_ca(sk);
	u32 high_gain = bbrx_gain(READ_ONCE(bn->high_gain));

	b->has_seen_rtt = bbrx_set_pacing(sk, b->has_seen_rtt, high_gain, bw,
					  gain, b->full_bw_reached);
}

/* Remember cwnd before recovery or PROBE_RTT cut it, to restore it after. */
static void bbrx_save_cwnd(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbrx *b = inet_csk_ca(sk);

	b->prior_cwnd = bbrx_prior_cwnd(tp, b->prior_cwnd,
					b->prev_ca_state >= TCP_CA_Recovery ||
					b->mode == BBRX_PROBE_RTT);
}

static void bbrx_enter_probe_bw(struct sock *sk, struct bbrx_net *bn)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbrx *b = inet_csk_ca(sk);

	b->mode = BBRX_PROBE_BW;
	/* Random start phase other than probe-down, to desynchronise flows. */
	b->cycle_idx = (2 + get_random_u32_below(BBRX_CYCLE_LEN - 1)) %
		       BBRX_CYCLE_LEN;
	b->cycle_mstamp = tp->delivered_mstamp;
}

static void bbrx_exit_probe_rtt(struct sock *sk, struct bbrx_net *bn)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbrx *b = inet_csk_ca(sk);

	b->min_rtt_stamp = tcp_jiffies32;
	tcp_snd_cwnd_set(tp, max(tcp_snd_cwnd(tp), b->prior_cwnd));
	if (b->full_bw_reached)
		bbrx_enter_probe_bw(sk, bn);
	else
		b->mode = BBRX_STARTUP;
}

/*
 * PROBE_RTT ends once its time at the low cwnd has passed; on an ACK the
 * caller also waits for a round, after an idle restart it does not (as
 * in-tree BBR's CA_EVENT_TX_START).
 */
static bool bbrx_check_probe_rtt_done(struct sock *sk, struct bbrx_net *bn)
{
	struct bbrx *b = inet_csk_ca(sk);

	if (!b->probe_rtt_done_stamp ||
	    !after(tcp_jiffies32, b->probe_rtt_done_stamp))
		return false;
	bbrx_exit_probe_rtt(sk, bn);
	return true;
}

/*
 * Sending starts with nothing in flight (CA_EVENT_TX_START; compat.h says
 * which op the kernel calls). Restarting from idle: do not burst at a
 * probing gain.
 */
static void bbrx_tx_start(struct sock *sk)
{
	struct bbrx_net *bn = bbrx_sk_net(sk);
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbrx *b = inet_csk_ca(sk);

	if (!tp->app_limited)
		return;

	bbrx_stat_inc(bn, BBRX_STAT_IDLE_RESTART);
	b->idle_restart = 1;
	bbrx_extra_acked_restart(&b->ea, tp->tcp_mstamp);
	if (b->mode == BBRX_PROBE_BW)
		bbrx_set_pacing_rate(sk, bn, bbrx_bw(sk), GAIN_UNIT);
	else if (b->mode == BBRX_PROBE_RTT &&
		 bbrx_check_probe_rtt_done(sk, bn))
		bbrx_stat_inc(bn, BBRX_STAT_PROBE_RTT_IDLE_EXIT);
}

/*
 * Packets in flight that gain * BDP allows: bw * min_rtt, rounded up.
 * Without an RTT sample yet, the initial window.
 */
static u32 bbrx_bdp(const struct sock *sk, u32 bw, int gain)
{
	const struct bbrx *b = inet_csk_ca(sk);

	return bbrx_bdp_packets(bw, b->min_rtt_us, gain);
}

/* Room for the bursts TSO/GSO and pacing produce on top of the BDP. */
static u32 bbrx_add_burst_allowance(struct sock *sk, const struct bbrx_net *bn,
				    u32 cwnd)
{
	const struct bbrx *b = inet_csk_ca(sk);

	cwnd += READ_ONCE(bn->tso_margin) * bbrx_tso_segs_goal(sk, bn);
	cwnd = (cwnd + 1) & ~1U;	/* even, so delayed ACKs keep flowing */
	if (b->mode == BBRX_PROBE_BW && b->cycle_idx == 0)
		cwnd += 2;		/* the probe-up phase must fill its gain */
	return cwnd;
}

/* Target inflight for a gain: BDP plus the burst allowance. */
static u32 bbrx_inflight(struct sock *sk, const struct bbrx_net *bn, u32 bw,
			 int gain)
{
	return bbrx_add_burst_allowance(sk, bn, bbrx_bdp(sk, bw, gain));
}

/* ACK-aggregation allowance, once the pipe is full. */
static u32 bbrx_aggregation_cwnd(struct sock *sk, const struct bbrx_net *bn)
{
	const struct bbrx *b = inet_csk_ca(sk);

	if (!b->full_bw_reached)
		return 0;
	return bbrx_extra_acked_cwnd(&b->ea, bbrx_bw(sk),
				     bbrx_gain(READ_ONCE(bn->extra_acked_gain)));
}

/* The bbrx_round trace event for the round ending on this ACK. */
static void bbrx_trace_round_end(struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	const struct bbrx *b = inet_csk_ca(sk);
	struct bbrx_trace_round r = {
		.mode = b->mode,
		.phase = b->cycle_idx,
		.bw = bbrx_bw(sk),
		.max_bw = bbrx_bw(sk),
		.min_rtt_us = b->min_rtt_us,
		.pacing_gain = b->pacing_gain,
		.cwnd_gain = b->cwnd_gain,
		.delivered = tp->delivered - b->next_round_delivered,
		.lost = tp->lost - b->round_lost,
		.ce = tp->delivered_ce - b->round_ce,
	};

	bbrx_trace_round_fill(sk, &r);
	trace_bbrx_round(sk, &r);
}

/*
 * A new round begins now: at a round's end, and early where the model
 * restarts the count (recovery, PROBE_RTT), which ends the round too.
 */
static void bbrx_round_begin(struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct bbrx *b = inet_csk_ca(sk);

	if (trace_bbrx_round_enabled())
		bbrx_trace_round_end(sk);
	b->next_round_delivered = tp->delivered;
	b->round_lost = tp->lost;
	b->round_ce = tp->delivered_ce;
}

/*
 * Recovery: drop cwnd by the losses, hold it at inflight + acked for the
 * first round of fast recovery (packet conservation), and restore the
 * pre-recovery cwnd when recovery ends. Returns true if cwnd is decided.
 */
static bool bbrx_recovery_cwnd(struct sock *sk, struct bbrx_net *bn,
			       const struct rate_sample *rs, u32 acked,
			       u32 *new_cwnd)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbrx *b = inet_csk_ca(sk);
	u8 state = inet_csk(sk)->icsk_ca_state, prev = b->prev_ca_state;
	u32 cwnd = tcp_snd_cwnd(tp);

	if (rs->losses > 0)
		cwnd = max_t(s32, cwnd - rs->losses, 1);

	if (state == TCP_CA_Recovery && prev != TCP_CA_Recovery) {
		b->packet_conservation = 1;
		bbrx_round_begin(sk);
		cwnd = tcp_packets_in_flight(tp) + acked;
		bbrx_stat_inc(bn, BBRX_STAT_RECOVERY_ENTER);
	} else if (prev >= TCP_CA_Recovery && state < TCP_CA_Recovery) {
		cwnd = max(cwnd, b->prior_cwnd);
		b->packet_conservation = 0;
	}
	b->prev_ca_state = state;

	if (b->packet_conservation) {
		*new_cwnd = max(cwnd, tcp_packets_in_flight(tp) + acked);
		return true;
	}
	*new_cwnd = cwnd;
	return false;
}

static void bbrx_set_cwnd(struct sock *sk, struct bbrx_net *bn,
			  const struct rate_sample *rs, u32 bw)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbrx *b = inet_csk_ca(sk);
	u32 acked = rs->acked_sacked;
	u32 cwnd = tcp_snd_cwnd(tp), target;

	if (!acked)
		goto done;
	if (bbrx_recovery_cwnd(sk, bn, rs, acked, &cwnd))
		goto done;

	target = bbrx_bdp(sk, bw, b->cwnd_gain) + bbrx_aggregation_cwnd(sk, bn);
	target = bbrx_add_burst_allowance(sk, bn, target);

	/* Grow toward target; before the pipe is full, grow like slow start. */
	if (b->full_bw_reached)
		cwnd = min(cwnd + acked, target);
	else if (cwnd < target || tp->delivered < TCP_INIT_CWND)
		cwnd += acked;
	cwnd = max_t(u32, cwnd, BBRX_MIN_CWND);
done:
	cwnd = min(cwnd, tp->snd_cwnd_clamp);
	if (b->mode == BBRX_PROBE_RTT)
		cwnd = min_t(u32, cwnd, BBRX_MIN_CWND);
	tcp_snd_cwnd_set(tp, cwnd);
}

/* Packet-timed rounds: a round ends when a packet sent after it began is acked. */
static void bbrx_update_round(struct sock *sk, const struct rate_sample *rs)
{
	struct bbrx *b = inet_csk_ca(sk);

	b->round_start = 0;
	if (rs->delivered < 0 || rs->interval_us <= 0)
		return;
	if (!before(rs->prior_delivered, b->next_round_delivered)) {
		bbrx_round_begin(sk);
		b->round_count++;
		b->round_start = 1;
		b->packet_conservation = 0;
	}
}

/* Start a long-term sampling interval at the current delivery and loss. */
static void bbrx_lt_interval_start(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbrx *b = inet_csk_ca(sk);

	b->lt_last_stamp = div_u64(tp->delivered_mstamp, USEC_PER_MSEC);
	b->lt_last_delivered = tp->delivered;
	b->lt_last_lost = tp->lost;
	b->lt_rtt_cnt = 0;
}

/* Forget the long-term estimate; sampling restarts at the next loss. */
static void bbrx_lt_reset(struct sock *sk)
{
	struct bbrx *b = inet_csk_ca(sk);

	b->lt_bw = 0;
	b->lt_use_bw = 0;
	b->lt_is_sampling = 0;
	bbrx_lt_interval_start(sk);
}

/*
 * An interval ended with @bw (BW_UNIT): if the previous one saw about the
 * same rate, a policer is the likeliest cause; pace at their mean.
 */
static void bbrx_lt_interval_done(struct sock *sk, struct bbrx_net *bn, u32 bw)
{
	struct bbrx *b = inet_csk_ca(sk);
	u32 diff;

	if (b->lt_bw) {
		diff = bw > b->lt_bw ? bw - b->lt_bw : b->lt_bw - bw;
		if ((u64)diff * GAIN_UNIT <= (u64)BBRX_LT_BW_RATIO * b->lt_bw ||
		    bbrx_rate_bytes(sk, diff, GAIN_UNIT) <= BBRX_LT_BW_DIFF) {
			b->lt_bw = (bw + b->lt_bw) >> 1;
			b->lt_use_bw = 1;
			b->pacing_gain = GAIN_UNIT;
			b->lt_rtt_cnt = 0;
			bbrx_stat_inc(bn, BBRX_STAT_LT_BW_USED);
			return;
		}
	}
	b->lt_bw = bw;
	bbrx_lt_interval_start(sk);
}

/*
 * Long-term bw sampling (a token-bucket policer): intervals of 4..16 rounds
 * that start and end with a loss; app-limited data or an interval that
 * runs too long starts over. While lt_bw is in use it expires after
 * BBRX_LT_BW_MAX_RTTS rounds of PROBE_BW, which then restarts probing.
 */
static void bbrx_lt_bw_sampling(struct sock *sk, const struct rate_sample *rs,
				struct bbrx_net *bn)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbrx *b = inet_csk_ca(sk);
	u32 lost, delivered;
	u64 bw;
	u32 t;

	if (!READ_ONCE(bn->lt_bw)) {	/* switched off: forget it all */
		if (b->lt_use_bw || b->lt_is_sampling)
			bbrx_lt_reset(sk);
		return;
	}
	if (b->lt_use_bw) {
		if (b->mode == BBRX_PROBE_BW && b->round_start &&
		    ++b->lt_rtt_cnt >= BBRX_LT_BW_MAX_RTTS) {
			bbrx_lt_reset(sk);
			bbrx_enter_probe_bw(sk, bn);
		}
		return;
	}
	/*
	 * Start at a loss: before it the policer still had tokens, and a
	 * burst would make the rate look higher than what it lets through.
	 */
	if (!b->lt_is_sampling) {
		if (!rs->losses)
			return;
		bbrx_lt_interval_start(sk);
		b->lt_is_sampling = 1;
	}
	if (rs->is_app_limited) {	/* the rate would be too low */
		bbrx_lt_reset(sk);
		return;
	}
	if (b->round_start)
		b->lt_rtt_cnt++;
	if (b->lt_rtt_cnt < BBRX_LT_INTVL_MIN_RTTS)
		return;
	if (b->lt_rtt_cnt > 4 * BBRX_LT_INTVL_MIN_RTTS) {
		bbrx_lt_reset(sk);
		return;
	}
	/* End at a loss too, once the loss rate says the tokens ran out. */
	if (!rs->losses)
		return;
	lost = tp->lost - b->lt_last_lost;
	delivered = tp->delivered - b->lt_last_delivered;
	if (!delivered ||
	    ((u64)lost << GAIN_SCALE) < (u64)BBRX_LT_LOSS_THRESH * delivered)
		return;
	t = (u32)div_u64(tp->delivered_mstamp, USEC_PER_MSEC) - b->lt_last_stamp;
	if ((s32)t < 1)
		return;			/* under a millisecond: wait */
	if (t >= U32_MAX / USEC_PER_MSEC) {
		bbrx_lt_reset(sk);	/* too long to compute in u32 usec */
		return;
	}
	bw = (u64)delivered * BW_UNIT;
	do_div(bw, t * USEC_PER_MSEC);
	bbrx_lt_interval_done(sk, bn, (u32)min_t(u64, bw, U32_MAX));
}

static void bbrx_update_bw(struct sock *sk, const struct rate_sample *rs,
			   struct bbrx_net *bn)
{
	struct bbrx *b = inet_csk_ca(sk);
	u64 bw;

	if (rs->delivered < 0 || rs->interval_us <= 0)
		return;

	bbrx_lt_bw_sampling(sk, rs, bn);
	bw = div64_long((u64)rs->delivered * BW_UNIT, rs->interval_us);
	if (rs->is_app_limited) {
		bbrx_stat_inc(bn, BBRX_STAT_APP_LIMITED);
		/* An app-limited sample only counts if it shows more bw. */
		if (bw < bbrx_max_bw(sk))
			return;
	}
	minmax_running_max(&b->bw, BBRX_BW_FILTER_ROUNDS, b->round_count,
			   (u32)min_t(u64, bw, U32_MAX));
}

/* In a probing phase the next burst is added to what is in flight. */
static u32 bbrx_edt_inflight(struct sock *sk, const struct bbrx_net *bn,
			     u32 inflight)
{
	const struct bbrx *b = inet_csk_ca(sk);

	if (b->pacing_gain > GAIN_UNIT)
		inflight += bbrx_tso_segs_goal(sk, bn);
	return bbrx_inflight_at_edt(sk, inflight, bbrx_bw(sk));
}

/* PROBE_BW: is it time to move to the next gain phase? */
static bool bbrx_phase_done(struct sock *sk, const struct rate_sample *rs,
			    const struct bbrx_net *bn)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbrx *b = inet_csk_ca(sk);
	bool a_min_rtt = tcp_stamp_us_delta(tp->delivered_mstamp,
					    b->cycle_mstamp) > b->min_rtt_us;
	u32 inflight = bbrx_edt_inflight(sk, bn, rs->prior_in_flight);
	u32 bw = bbrx_max_bw(sk);

	if (b->pacing_gain == GAIN_UNIT)
		return a_min_rtt;
	/* Probing up lasts until the extra inflight is there, or loss. */
	if (b->pacing_gain > GAIN_UNIT)
		return a_min_rtt &&
		       (rs->losses ||
			inflight >= bbrx_inflight(sk, bn, bw, b->pacing_gain));
	/* Draining ends early once the queue it made is gone. */
	return a_min_rtt || inflight <= bbrx_inflight(sk, bn, bw, GAIN_UNIT);
}

static int bbrx_cycle_gain(const struct bbrx_net *bn, u32 idx)
{
	if (idx == 0)
		return bbrx_gain(READ_ONCE(bn->probe_bw_up_gain));
	if (idx == 1)
		return bbrx_gain(READ_ONCE(bn->probe_bw_down_gain));
	return GAIN_UNIT;
}

static void bbrx_update_cycle(struct sock *sk, const struct rate_sample *rs,
			      const struct bbrx_net *bn)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbrx *b = inet_csk_ca(sk);

	if (b->mode == BBRX_PROBE_BW && bbrx_phase_done(sk, rs, bn)) {
		b->cycle_idx = (b->cycle_idx + 1) % BBRX_CYCLE_LEN;
		b->cycle_mstamp = tp->delivered_mstamp;
	}
}

/* STARTUP ends when bw grew less than 25% over three non-app-limited rounds. */
static void bbrx_check_full_bw(struct sock *sk, const struct rate_sample *rs)
{
	struct bbrx *b = inet_csk_ca(sk);
	u32 bw = bbrx_max_bw(sk);

	if (b->full_bw_reached || !b->round_start || rs->is_app_limited)
		return;

	if (bw >= ((u64)b->full_bw * BBRX_FULL_BW_GROWTH) >> GAIN_SCALE) {
		b->full_bw = bw;
		b->full_bw_cnt = 0;
		return;
	}
	if (++b->full_bw_cnt >= BBRX_FULL_BW_ROUNDS)
		b->full_bw_reached = 1;
}

static void bbrx_check_drain(struct sock *sk, struct bbrx_net *bn)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbrx *b = inet_csk_ca(sk);

	if (b->mode == BBRX_STARTUP && b->full_bw_reached) {
		b->mode = BBRX_DRAIN;
		tp->snd_ssthresh = bbrx_inflight(sk, bn, bbrx_max_bw(sk),
						 GAIN_UNIT);
		bbrx_stat_inc(bn, BBRX_STAT_STARTUP_EXIT);
	}
	if (b->mode == BBRX_DRAIN &&
	    bbrx_edt_inflight(sk, bn, tcp_packets_in_flight(tp)) <=
	    bbrx_inflight(sk, bn, bbrx_max_bw(sk), GAIN_UNIT)) {
		bbrx_enter_probe_bw(sk, bn);
		bbrx_stat_inc(bn, BBRX_STAT_DRAIN_EXIT);
	}
}

/*
 * min_rtt filter and PROBE_RTT: when min_rtt has not been refreshed for
 * min_rtt_win_ms, hold inflight at BBRX_MIN_CWND for probe_rtt_ms and at
 * least one round so that the queue drains and the real min_rtt shows.
 */
static void bbrx_update_min_rtt(struct sock *sk, const struct rate_sample *rs,
				struct bbrx_net *bn)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbrx *b = inet_csk_ca(sk);
	u32 win = msecs_to_jiffies(READ_ONCE(bn->min_rtt_win_ms));
	bool expired = after(tcp_jiffies32, b->min_rtt_stamp + win);

	if (bbrx_rtt_sample_wins(rs, b->min_rtt_us, expired)) {
		b->min_rtt_us = rs->rtt_us;
		b->min_rtt_stamp = tcp_jiffies32;
	}

	if (expired && !b->idle_restart && b->mode != BBRX_PROBE_RTT) {
		b->mode = BBRX_PROBE_RTT;
		bbrx_save_cwnd(sk);
		b->probe_rtt_done_stamp = 0;
		bbrx_stat_inc(bn, BBRX_STAT_PROBE_RTT_ENTER);
	}

	if (b->mode == BBRX_PROBE_RTT) {
		/* Samples taken at cwnd 4 say nothing about bw. */
		tp->app_limited = (tp->delivered + tcp_packets_in_flight(tp)) ?: 1;
		if (!b->probe_rtt_done_stamp &&
		    tcp_packets_in_flight(tp) <= BBRX_MIN_CWND) {
			b->probe_rtt_done_stamp =
				bbrx_stamp_after_ms(READ_ONCE(bn->probe_rtt_ms));
			b->probe_rtt_round_done = 0;
			bbrx_round_begin(sk);
		} else if (b->probe_rtt_done_stamp) {
			if (b->round_start)
				b->probe_rtt_round_done = 1;
			if (b->probe_rtt_round_done)
				bbrx_check_probe_rtt_done(sk, bn);
		}
	}

	if (rs->delivered > 0)
		b->idle_restart = 0;
}

static void bbrx_update_gains(struct sock *sk, const struct bbrx_net *bn)
{
	struct bbrx *b = inet_csk_ca(sk);

	switch (b->mode) {
	case BBRX_STARTUP:
		b->pacing_gain = bbrx_gain(READ_ONCE(bn->high_gain));
		b->cwnd_gain = bbrx_gain(READ_ONCE(bn->high_gain));
		break;
	case BBRX_DRAIN:
		b->pacing_gain = bbrx_gain(READ_ONCE(bn->drain_gain));
		b->cwnd_gain = bbrx_gain(READ_ONCE(bn->high_gain));
		break;
	case BBRX_PROBE_BW:
		/* at the policed rate: gain 1, probing would only drop */
		b->pacing_gain = b->lt_use_bw ? GAIN_UNIT :
				 bbrx_cycle_gain(bn, b->cycle_idx);
		b->cwnd_gain = bbrx_gain(READ_ONCE(bn->cwnd_gain));
		break;
	case BBRX_PROBE_RTT:
		b->pacing_gain = GAIN_UNIT;
		b->cwnd_gain = GAIN_UNIT;
		break;
	}
}

/* .cong_control: the per-ACK model update, then pacing rate and cwnd. */
static void bbrx_cong_control(struct sock *sk, const struct rate_sample *rs)
{
	struct bbrx_net *bn = bbrx_sk_net(sk);
	struct bbrx *b = inet_csk_ca(sk);
	u32 bw;

	bbrx_update_round(sk, rs);
	bbrx_update_bw(sk, rs, bn);
	if (READ_ONCE(bn->extra_acked_gain))
		bbrx_extra_acked_update(&b->ea, sk, rs, bbrx_bw(sk),
					b->round_start, BBRX_EXTRA_ACKED_ROUNDS);
	bbrx_update_cycle(sk, rs, bn);
	bbrx_check_full_bw(sk, rs);
	bbrx_check_drain(sk, bn);
	bbrx_update_min_rtt(sk, rs, bn);
	bbrx_update_gains(sk, bn);

	bw = bbrx_bw(sk);
	bbrx_set_pacing_rate(sk, bn, bw, b->pacing_gain);
	bbrx_set_cwnd(sk, bn, rs, bw);
}

static void bbrx_init(struct sock *sk)
{
	struct bbrx_net *bn = bbrx_sk_net(sk);
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbrx *b = inet_csk_ca(sk);

	memset(b, 0, sizeof(*b));
	tp->snd_ssthresh = TCP_INFINITE_SSTHRESH;
	b->prev_ca_state = TCP_CA_Open;
	b->next_round_delivered = tp->delivered;
	b->round_lost = tp->lost;
	b->round_ce = tp->delivered_ce;
	b->min_rtt_us = tcp_min_rtt(tp);
	b->min_rtt_stamp = tcp_jiffies32;
	minmax_reset(&b->bw, 0, 0);
	bbrx_lt_reset(sk);
	b->mode = BBRX_STARTUP;
	bbrx_update_gains(sk, bn);
	bbrx_extra_acked_restart(&b->ea, tp->tcp_mstamp);

	WRITE_ONCE(sk->sk_pacing_shift, READ_ONCE(bn->pacing_shift));
	b->has_seen_rtt = bbrx_init_pacing(sk,
					   bbrx_gain(READ_ONCE(bn->high_gain)));
	/* Without fq on the device, ask TCP to pace by itself (EDT timer). */
	cmpxchg(&sk->sk_pacing_status, SK_PACING_NONE, SK_PACING_NEEDED);

	bbrx_stat_inc(bn, BBRX_STAT_SOCKETS_INIT);
}

/* Save cwnd for after recovery; the model, not ssthresh, sets cwnd. */
static u32 bbrx_ssthresh(struct sock *sk)
{
	bbrx_save_cwnd(sk);
	return tcp_sk(sk)->snd_ssthresh;
}

/*
 * Undo of a spurious loss episode: the cwnd cut is undone by recovery
 * restoring prior_cwnd, so only forget the STARTUP plateau and the
 * long-term sample it may have caused (as in-tree bbr_undo_cwnd()).
 */
static u32 bbrx_undo_cwnd(struct sock *sk)
{
	struct bbrx *b = inet_csk_ca(sk);

	b->full_bw = 0;
	b->full_bw_cnt = 0;
	bbrx_lt_reset(sk);
	bbrx_stat_inc(bbrx_sk_net(sk), BBRX_STAT_UNDO);
	return tcp_snd_cwnd(tcp_sk(sk));
}

static void bbrx_set_state(struct sock *sk, u8 new_state)
{
	struct rate_sample rs = { .losses = 1 };
	struct bbrx_net *bn = bbrx_sk_net(sk);
	struct bbrx *b = inet_csk_ca(sk);

	if (new_state != TCP_CA_Loss)
		return;

	/*
	 * RTO: the next ACK starts a new round, STARTUP plateau forgotten;
	 * for long-term sampling it is a loss.
	 */
	b->prev_ca_state = TCP_CA_Loss;
	b->full_bw = 0;
	b->round_start = 1;
	bbrx_lt_bw_sampling(sk, &rs, bn);
	bbrx_stat_inc(bn, BBRX_STAT_LOSS_ENTER);
}

static size_t bbrx_get_info(struct sock *sk, u32 ext, int *attr,
			    union tcp_cc_info *info)
{
	struct bbrx *b = inet_csk_ca(sk);

	return bbrx_fill_bbr_info(sk, ext, attr, info, bbrx_bw(sk),
				  b->min_rtt_us, b->pacing_gain, b->cwnd_gain);
}

BBRX_DEFINE_CONG_CONTROL_WRAPPER(bbrx_cong_control)
BBRX_DEFINE_TX_START_WRAPPER(bbrx_tx_start)

static_assert(sizeof(struct bbrx) <= ICSK_CA_PRIV_SIZE);

/* Registered by main.c; a socket's icsk_ca_ops points here. */
struct tcp_congestion_ops bbrx_cong_ops __read_mostly = {
	.flags		= TCP_CONG_NON_RESTRICTED,
	.name		= BBRX_CA_NAME,
	.owner		= THIS_MODULE,
	.init		= bbrx_init,
	.release	= bbrx_release,
	.cong_control	= BBRX_CONG_CONTROL(bbrx_cong_control),
	.sndbuf_expand	= bbrx_sndbuf_expand,
	.undo_cwnd	= bbrx_undo_cwnd,
	BBRX_TX_START_OP(bbrx_tx_start),
	.ssthresh	= bbrx_ssthresh,
	.min_tso_segs	= bbrx_min_tso_segs,
	.get_info	= bbrx_get_info,
	.set_state	= bbrx_set_state,
};
