// SPDX-License-Identifier: GPL-2.0
/*
 * bbrx trace events: the one object their code is generated in (the
 * events and their fields are in bbrx_trace.h).
 */
#define CREATE_TRACE_POINTS
#include "bbrx_trace.h"

/* A model's bw (packets per usec << BBRX_BW_SCALE) in bytes/s. */
static u64 bbrx_trace_bytes(const struct tcp_sock *tp, u32 bw)
{
	return ((u64)bw * tp->mss_cache * USEC_PER_SEC) >> BBRX_BW_SCALE;
}

/**
 * bbrx_trace_round_fill() - complete a round for its trace event
 * @sk: the flow's socket
 * @r: the round, with the model's fields (mode .. tx_in_flight) set
 *
 * Sets the socket's identity (netns inode, ports), cwnd, pacing_rate and
 * ca_state, bw, max_bw and bw_lo in bytes/s and the round's loss and CE
 * fractions in per-mille. Called only while bbrx_round or bbrx3_round is
 * enabled.
 */
void bbrx_trace_round_fill(const struct sock *sk, struct bbrx_trace_round *r)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	u64 tot = (u64)r->delivered + r->lost;

	r->netns = sock_net(sk)->ns.inum;
	r->sport = ntohs(inet_sk(sk)->inet_sport);
	r->dport = ntohs(inet_sk(sk)->inet_dport);
	r->cwnd = tcp_snd_cwnd(tp);
	r->pacing_rate = READ_ONCE(sk->sk_pacing_rate);
	r->bw_bytes = bbrx_trace_bytes(tp, r->bw);
	r->max_bw_bytes = bbrx_trace_bytes(tp, r->max_bw);
	r->bw_lo_bytes = bbrx_trace_bytes(tp, r->bw_lo);
	r->ca_state = inet_csk(sk)->icsk_ca_state;
	r->loss_pm = tot ? div64_u64((u64)r->lost * 1000, tot) : 0;
	r->ce_pm = r->delivered ? div_u64((u64)r->ce * 1000, r->delivered) : 0;
}

/**
 * bbrx_trace_hook() - emit the trace event of one hook decision
 * @sk: the socket the decision was taken for
 * @hook: the hook (its event: bbrx_autocork, bbrx_tsq, bbrx_rcvbuf for
 *	both rcvbuf hooks, bbrx_delack)
 * @policy: the netns policy the decision was taken under
 * @decision: enum bbrx_trace_decision
 * @value: bytes; what it is depends on the hook (bbrx_trace.h)
 *
 * Callers test trace_<event>_enabled() first, so a disabled event costs a
 * static-key NOP. Out of line on purpose: the redirects' call check
 * (bbrx_hook_calls_check()) accepts a call to this function as a leaf,
 * because a tracepoint runs its probes with preemption disabled, where
 * nothing can block (on PREEMPT_RT either), while the tracepoint's own
 * call site is a static call that the kernel re-targets at run time to
 * whatever probe is attached, which no load-time check could follow.
 */
void bbrx_trace_hook(const struct sock *sk, enum bbrx_hook_id hook,
		     int policy, int decision, u32 value)
{
	switch (hook) {
	case BBRX_HOOK_AUTOCORK:
		trace_bbrx_autocork(sk, policy, decision, value);
		break;
	case BBRX_HOOK_TSQ:
		trace_bbrx_tsq(sk, policy, decision, value);
		break;
	case BBRX_HOOK_RCVBUF:
	case BBRX_HOOK_RCVBUF_GROW:
		trace_bbrx_rcvbuf(sk, policy, decision, value);
		break;
	case BBRX_HOOK_DELACK:
		trace_bbrx_delack(sk, policy, decision, value);
		break;
	default:
		break;
	}
}
