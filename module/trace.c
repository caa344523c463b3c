// SPDX-License-Identifier: GPL-2.0
/*
 * bbrx trace events: the one object their code is generated in (the
 * events and their fields are in bbrx_trace.h).
 */
#include "compat.h"
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

/* Each hook policy's event, by enum bbrx_policy_id: bbrx_<policy>. */
static void (*const bbrx_trace_hook_event[BBRX_POL_MAX])(const struct sock *sk,
							  int policy,
							  int decision,
							  u32 value) = {
#define BBRX_POLICY(id, name, max) trace_bbrx_##name,
#include "bbrx_hooks.h"
};

/**
 * bbrx_trace_hook() - emit the trace event of one hook decision
 * @sk: the socket the decision was taken for
 * @id: the hook's policy, whose event it emits (bbrx_autocork, bbrx_tsq,
 *	bbrx_rcvbuf for both rcvbuf hooks, bbrx_delack)
 * @policy: the netns value of that policy the decision was taken under
 * @decision: enum bbrx_trace_decision
 * @value: bytes; what it is depends on the hook (bbrx_trace.h)
 *
 * Callers test trace_<event>_enabled() first, so a disabled event costs a
 * static-key NOP. The event is called through the const table above, an
 * indirect call to the tracepoint's inline wrapper. Out of line on
 * purpose: the redirects' call check (bbrx_hook_calls_check()) accepts a
 * call to this function as a leaf, because a tracepoint runs its probes
 * with preemption disabled, where nothing can block (on PREEMPT_RT
 * either), while the tracepoint's own call site is a static call that the
 * kernel re-targets at run time to whatever probe is attached, which no
 * load-time check could follow.
 */
void bbrx_trace_hook(const struct sock *sk, enum bbrx_policy_id id,
		     int policy, int decision, u32 value)
{
	if (id < BBRX_POL_MAX)
		bbrx_trace_hook_event[id](sk, policy, decision, value);
}
