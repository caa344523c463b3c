// SPDX-License-Identifier: GPL-2.0
/*
 * bbrx trace events: the one object their code is generated in (the
 * events and their fields are in bbrx_trace.h).
 */
#define CREATE_TRACE_POINTS
#include "bbrx_trace.h"

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
