// SPDX-License-Identifier: GPL-2.0
/*
 * ACK-aggregation (extra_acked) estimate shared by bbrx and bbrx3.
 *
 * Wi-Fi, cable and receivers with GRO or stretched ACKs deliver ACKs in
 * bursts: between bursts nothing arrives, so a cwnd of exactly one BDP
 * would stall the sender until the next burst. The estimate is the largest
 * number of packets (s)acked beyond what bw explains since the start of an
 * "epoch" (a time at which ACKs had caught up with bw), over two halves of
 * a caller's number of rounds each (BBRX_EXTRA_ACKED_ROUNDS, 5, in steady
 * state; bbrx3 uses one in STARTUP). Source: upstream 78dc70ebaa38
 * ("tcp_bbr: adapt cwnd based on ack aggregation estimation", 5.1) and
 * draft-ietf-ccwg-bbr-06 section 5.5.9.
 */
#include <net/tcp.h>

#include "bbrx.h"
#include "compat.h"

#define BBRX_EXTRA_ACKED_MAX_US	100000	/* cap: bw x 100 ms of packets */
#define BBRX_ACK_EPOCH_MAX	0xFFFFF	/* epoch_acked bit-field limit */

/**
 * bbrx_extra_acked_restart() - start a new ACK epoch
 * @ea: the estimate
 * @mstamp: now, in usec (tp->tcp_mstamp or tp->delivered_mstamp)
 *
 * Called on a restart from idle: the idle time is not aggregation.
 */
void bbrx_extra_acked_restart(struct bbrx_extra_acked *ea, u64 mstamp)
{
	ea->epoch_stamp = (u32)mstamp;
	ea->epoch_acked = 0;
}

/**
 * bbrx_extra_acked_update() - feed one ACK's rate sample
 * @ea: the estimate
 * @sk: the socket
 * @rs: the rate sample
 * @bw: the model's bw, packets per usec << BBRX_BW_SCALE
 * @round_start: this ACK began a packet-timed round
 * @win_rounds: rounds per window half, 1 to 7 (the rounds field's bits)
 */
void bbrx_extra_acked_update(struct bbrx_extra_acked *ea, struct sock *sk,
			     const struct rate_sample *rs, u32 bw,
			     bool round_start, u32 win_rounds)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u32 epoch_us, expected, extra;

	if (rs->acked_sacked <= 0 || rs->delivered < 0 || rs->interval_us <= 0)
		return;

	if (round_start && ++ea->rounds >= win_rounds) {
		ea->rounds = 0;
		ea->idx ^= 1;
		ea->extra[ea->idx] = 0;
	}

	/* u32 usec: wraps after 71 minutes, far beyond any epoch */
	epoch_us = (u32)tp->delivered_mstamp - ea->epoch_stamp;
	expected = (u32)(((u64)bw * epoch_us) >> BBRX_BW_SCALE);

	/* ACKs caught up with bw (or the counter would overflow): new epoch. */
	if (ea->epoch_acked <= expected ||
	    ea->epoch_acked + rs->acked_sacked >= BBRX_ACK_EPOCH_MAX) {
		bbrx_extra_acked_restart(ea, tp->delivered_mstamp);
		expected = 0;
	}

	ea->epoch_acked = min_t(u32, BBRX_ACK_EPOCH_MAX,
				ea->epoch_acked + rs->acked_sacked);
	extra = min(ea->epoch_acked - expected, tcp_snd_cwnd(tp));
	extra = min_t(u32, extra, U16_MAX);
	if (extra > ea->extra[ea->idx])
		ea->extra[ea->idx] = extra;
}

/**
 * bbrx_extra_acked_cwnd() - the cwnd allowance for ACK aggregation
 * @ea: the estimate
 * @bw: the model's bw, packets per usec << BBRX_BW_SCALE
 * @gain: extra_acked gain in 1/256 (0 = no allowance)
 *
 * Return: packets, at most bw x 100 ms (upstream's cap, so that one
 * outlier burst cannot inflate cwnd by more than a tenth of a second).
 */
u32 bbrx_extra_acked_cwnd(const struct bbrx_extra_acked *ea, u32 bw, u32 gain)
{
	u32 extra = max(ea->extra[0], ea->extra[1]);
	u32 cap = (u32)(((u64)bw * BBRX_EXTRA_ACKED_MAX_US) >> BBRX_BW_SCALE);

	extra = ((u64)extra * gain) >> BBRX_GAIN_SCALE;
	return min(extra, cap);
}
