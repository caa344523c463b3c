/* SPDX-License-Identifier: GPL-2.0 */
/*
 * bbrx trace events (system "bbrx" in tracefs), defined in trace.c.
 *
 * Per round per flow (a packet-timed round, as each model counts them):
 *   bbrx_round    the v1 model (cc_bbrx.c)
 *   bbrx3_round   the v3 model (cc_bbrx3.c)
 * Per change of state per flow:
 *   bbrx3_state   mode, PROBE_BW phase or loss recovery (cc_bbrx3.c)
 * Per hook decision, one event per hook policy (bbrx_hooks.h; trace.c
 * calls each as bbrx_<policy>):
 *   bbrx_autocork corked / declined         (autocork.c)
 *   bbrx_tsq      single_skb / withheld     (tsq.c)
 *   bbrx_rcvbuf   sized / grown             (rcvbuf.c)
 *   bbrx_delack   push_marked / suppressed  (delack.c)
 * Each hook event fires exactly where the /proc/net/bbrx_stat counter of
 * the same decision counts, so with tracing on the two agree.
 *
 * Disabled, an event is a static-key NOP in the code path (the kernel's
 * tracepoint jump labels); the callers also fill their arguments only
 * under trace_*_enabled(), so a disabled event costs no loads either.
 */
#ifndef _BBRX_TRACE_DECISION_H
#define _BBRX_TRACE_DECISION_H
/*
 * Hook decisions as the hook events below report them (decision=NAME,
 * bbrx_hook_class); each is counted by the /proc/net/bbrx_stat counter of
 * the same name. Outside the multi-read part: defined once.
 */
enum bbrx_trace_decision {
	BBRX_TRACE_CORKED,		/* autocork: tail skb left queued */
	BBRX_TRACE_DECLINED,		/* autocork: kernel corks, policy sends */
	BBRX_TRACE_SINGLE_SKB,		/* TSQ: sent, rtx queue held one skb */
	BBRX_TRACE_WITHHELD,		/* TSQ: single-skb shortcut refused */
	BBRX_TRACE_SIZED,		/* rcvbuf: raised at establishment */
	BBRX_TRACE_GROWN,		/* rcvbuf: grown by the per_mss rule */
	BBRX_TRACE_PUSH_MARKED,		/* delack: PSH >= rcv_mss marked */
	BBRX_TRACE_PUSH_SUPPRESSED,	/* delack: left to the timer (pre) */
};
#endif /* _BBRX_TRACE_DECISION_H */

#undef TRACE_SYSTEM
#define TRACE_SYSTEM bbrx

#if !defined(_BBRX_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _BBRX_TRACE_H

#include <linux/tracepoint.h>
#include <net/inet_sock.h>
#include <net/tcp.h>

#include "bbrx.h"

TRACE_DEFINE_ENUM(TCP_CA_Open);
TRACE_DEFINE_ENUM(TCP_CA_Disorder);
TRACE_DEFINE_ENUM(TCP_CA_CWR);
TRACE_DEFINE_ENUM(TCP_CA_Recovery);
TRACE_DEFINE_ENUM(TCP_CA_Loss);
TRACE_DEFINE_ENUM(BBRX_TRACE_CORKED);
TRACE_DEFINE_ENUM(BBRX_TRACE_DECLINED);
TRACE_DEFINE_ENUM(BBRX_TRACE_SINGLE_SKB);
TRACE_DEFINE_ENUM(BBRX_TRACE_WITHHELD);
TRACE_DEFINE_ENUM(BBRX_TRACE_SIZED);
TRACE_DEFINE_ENUM(BBRX_TRACE_GROWN);
TRACE_DEFINE_ENUM(BBRX_TRACE_PUSH_MARKED);
TRACE_DEFINE_ENUM(BBRX_TRACE_PUSH_SUPPRESSED);

/* The socket's identity in an event that takes it from @sk itself. */
#define BBRX_TRACE_ASSIGN_SK(sk)					\
	do {								\
		const struct sock *__sk = (sk);				\
									\
		__entry->skaddr = __sk;					\
		__entry->netns = sock_net(__sk)->ns.inum;		\
		__entry->sport = ntohs(inet_sk(__sk)->inet_sport);	\
		__entry->dport = ntohs(inet_sk(__sk)->inet_dport);	\
	} while (0)

/* Names of the numbers the events carry, for their text form. */
#define BBRX_PRINT_MODE(m)						\
	__print_symbolic(m, { 0, "STARTUP" }, { 1, "DRAIN" },		\
			 { 2, "PROBE_BW" }, { 3, "PROBE_RTT" })
#define BBRX_PRINT_PHASE(p)						\
	__print_symbolic(p, { 0, "DOWN" }, { 1, "CRUISE" },		\
			 { 2, "REFILL" }, { 3, "UP" }, { 4, "-" })
#define BBRX_PRINT_CA_STATE(c)						\
	__print_symbolic(c, { TCP_CA_Open, "Open" },			\
			 { TCP_CA_Disorder, "Disorder" },		\
			 { TCP_CA_CWR, "CWR" },				\
			 { TCP_CA_Recovery, "Recovery" },		\
			 { TCP_CA_Loss, "Loss" })

/*
 * Round fields (struct bbrx_trace_round, filled by bbrx_trace_round_fill()):
 * bw and pacing_rate in bytes/s, min_rtt in usec, cwnd and inflight_hi/lo
 * in packets (0: no bound; bbrx has none), gains in 1/256,
 * delivered/lost/ce in packets during the round that just ended, and
 * loss_pm/ce_pm the round's loss rate (lost / (delivered + lost)) and CE
 * fraction (ce / delivered) in per-mille, as bbrx3 compares them with its
 * thresholds, and ca_state the connection's congestion state. bbrx3_round
 * also prints bw's two terms, max_bw and bw_lo (bytes/s, 0 = no bound),
 * and tx_in_flight, the packets in flight when the round-ending ACK's data
 * was sent (0 = not known).
 */
DECLARE_EVENT_CLASS(bbrx_round_class,
		    TP_PROTO(const struct sock *sk,
			     const struct bbrx_trace_round *r),
		    TP_ARGS(sk, r),
		    TP_STRUCT__entry(__field(const void *, skaddr)
				     __field(u32, netns)
				     __field(u16, sport)
				     __field(u16, dport)
				     __field(u8, mode)
				     __field(u8, phase)
				     __field(u8, ca_state)
				     __field(u64, bw)
				     __field(u64, max_bw)
				     __field(u64, bw_lo)
				     __field(u64, pacing_rate)
				     __field(u32, min_rtt_us)
				     __field(u32, cwnd)
				     __field(u32, pacing_gain)
				     __field(u32, cwnd_gain)
				     __field(u32, inflight_hi)
				     __field(u32, inflight_lo)
				     __field(u32, delivered)
				     __field(u32, lost)
				     __field(u32, ce)
				     __field(u32, loss_pm)
				     __field(u32, ce_pm)
				     __field(u32, tx_in_flight)),
		    TP_fast_assign(__entry->skaddr = sk;
				   __entry->netns = r->netns;
				   __entry->sport = r->sport;
				   __entry->dport = r->dport;
				   __entry->mode = r->mode;
				   __entry->phase = r->phase;
				   __entry->ca_state = r->ca_state;
				   __entry->bw = r->bw_bytes;
				   __entry->max_bw = r->max_bw_bytes;
				   __entry->bw_lo = r->bw_lo_bytes;
				   __entry->pacing_rate = r->pacing_rate;
				   __entry->min_rtt_us = r->min_rtt_us;
				   __entry->cwnd = r->cwnd;
				   __entry->pacing_gain = r->pacing_gain;
				   __entry->cwnd_gain = r->cwnd_gain;
				   __entry->inflight_hi = r->inflight_hi;
				   __entry->inflight_lo = r->inflight_lo;
				   __entry->delivered = r->delivered;
				   __entry->lost = r->lost;
				   __entry->ce = r->ce;
				   __entry->loss_pm = r->loss_pm;
				   __entry->ce_pm = r->ce_pm;
				   __entry->tx_in_flight = r->tx_in_flight;),
		    TP_printk("netns=%u sport=%u dport=%u mode=%s phase=%u bw=%llu pacing_rate=%llu min_rtt_us=%u cwnd=%u pacing_gain=%u cwnd_gain=%u inflight_hi=%u inflight_lo=%u delivered=%u lost=%u ce=%u loss_pm=%u ce_pm=%u ca_state=%s",
			      __entry->netns, __entry->sport, __entry->dport,
			      BBRX_PRINT_MODE(__entry->mode),
			      __entry->phase, __entry->bw, __entry->pacing_rate,
			      __entry->min_rtt_us, __entry->cwnd,
			      __entry->pacing_gain, __entry->cwnd_gain,
			      __entry->inflight_hi, __entry->inflight_lo,
			      __entry->delivered, __entry->lost, __entry->ce,
			      __entry->loss_pm, __entry->ce_pm,
			      BBRX_PRINT_CA_STATE(__entry->ca_state))
);

/* bbrx: phase is PROBE_BW's cycle index, 0 = probe up, 1 = down. */
DEFINE_EVENT(bbrx_round_class, bbrx_round,
	     TP_PROTO(const struct sock *sk,
		      const struct bbrx_trace_round *r),
	     TP_ARGS(sk, r)
);

/* bbrx3: phase is PROBE_BW's state, printed by name; "-" in other modes. */
DEFINE_EVENT_PRINT(bbrx_round_class, bbrx3_round,
		   TP_PROTO(const struct sock *sk,
			    const struct bbrx_trace_round *r),
		   TP_ARGS(sk, r),
		   TP_printk("netns=%u sport=%u dport=%u mode=%s phase=%s bw=%llu pacing_rate=%llu min_rtt_us=%u cwnd=%u pacing_gain=%u cwnd_gain=%u inflight_hi=%u inflight_lo=%u delivered=%u lost=%u ce=%u loss_pm=%u ce_pm=%u ca_state=%s max_bw=%llu bw_lo=%llu tx_in_flight=%u",
			     __entry->netns, __entry->sport, __entry->dport,
			     BBRX_PRINT_MODE(__entry->mode),
			     BBRX_PRINT_PHASE(__entry->phase),
			     __entry->bw, __entry->pacing_rate,
			     __entry->min_rtt_us, __entry->cwnd,
			     __entry->pacing_gain, __entry->cwnd_gain,
			     __entry->inflight_hi, __entry->inflight_lo,
			     __entry->delivered, __entry->lost, __entry->ce,
			     __entry->loss_pm, __entry->ce_pm,
			     BBRX_PRINT_CA_STATE(__entry->ca_state),
			     __entry->max_bw, __entry->bw_lo,
			     __entry->tx_in_flight)
);

/*
 * bbrx3_state: bbrx3's mode, PROBE_BW phase or recovery changed on an ACK
 * (RTO's TCP_CA_Loss shows on the first ACK after it). delivered and lost
 * are the connection's totals, so that the packets lost between two events
 * belong to the state the first one entered.
 */
TRACE_EVENT(bbrx3_state,
	    TP_PROTO(const struct sock *sk, const struct bbrx_trace_state *s),
	    TP_ARGS(sk, s),
	    TP_STRUCT__entry(__field(const void *, skaddr)
			     __field(u32, netns)
			     __field(u16, sport)
			     __field(u16, dport)
			     __field(u8, mode)
			     __field(u8, phase)
			     __field(u8, ca_state)
			     __field(u8, prev_mode)
			     __field(u8, prev_phase)
			     __field(u8, prev_ca_state)
			     __field(u32, inflight_hi)
			     __field(u32, inflight_lo)
			     __field(u32, delivered)
			     __field(u32, lost)
			     __field(u32, cwnd)),
	    TP_fast_assign(BBRX_TRACE_ASSIGN_SK(sk);
			   __entry->mode = s->mode;
			   __entry->phase = s->phase;
			   __entry->ca_state = s->ca_state;
			   __entry->prev_mode = s->prev_mode;
			   __entry->prev_phase = s->prev_phase;
			   __entry->prev_ca_state = s->prev_ca_state;
			   __entry->inflight_hi = s->inflight_hi;
			   __entry->inflight_lo = s->inflight_lo;
			   __entry->delivered = s->delivered;
			   __entry->lost = s->lost;
			   __entry->cwnd = s->cwnd;),
	    TP_printk("netns=%u sport=%u dport=%u mode=%s phase=%s ca_state=%s prev_mode=%s prev_phase=%s prev_ca_state=%s inflight_hi=%u inflight_lo=%u delivered=%u lost=%u cwnd=%u",
		      __entry->netns, __entry->sport, __entry->dport,
		      BBRX_PRINT_MODE(__entry->mode),
		      BBRX_PRINT_PHASE(__entry->phase),
		      BBRX_PRINT_CA_STATE(__entry->ca_state),
		      BBRX_PRINT_MODE(__entry->prev_mode),
		      BBRX_PRINT_PHASE(__entry->prev_phase),
		      BBRX_PRINT_CA_STATE(__entry->prev_ca_state),
		      __entry->inflight_hi, __entry->inflight_lo,
		      __entry->delivered, __entry->lost, __entry->cwnd)
);

/*
 * Hook fields: policy is the netns' net.ipv4.bbrx.<hook> value the decision
 * was taken under; value is, per hook: autocork the tail skb's length
 * (bytes), tsq the small-queue limit (bytes of sk_wmem_alloc), rcvbuf the
 * new sk_rcvbuf (bytes), delack the receiver's rcv_mss (bytes).
 */
DECLARE_EVENT_CLASS(bbrx_hook_class,
		    TP_PROTO(const struct sock *sk, int policy, int decision,
			     u32 value),
		    TP_ARGS(sk, policy, decision, value),
		    TP_STRUCT__entry(__field(const void *, skaddr)
				     __field(u32, netns)
				     __field(u16, sport)
				     __field(u16, dport)
				     __field(int, policy)
				     __field(int, decision)
				     __field(u32, value)),
		    TP_fast_assign(BBRX_TRACE_ASSIGN_SK(sk);
				   __entry->policy = policy;
				   __entry->decision = decision;
				   __entry->value = value;),
		    TP_printk("netns=%u sport=%u dport=%u policy=%d decision=%s value=%u",
			      __entry->netns, __entry->sport, __entry->dport,
			      __entry->policy,
			      __print_symbolic(__entry->decision,
					       { BBRX_TRACE_CORKED, "corked" },
					       { BBRX_TRACE_DECLINED, "declined" },
					       { BBRX_TRACE_SINGLE_SKB, "single_skb" },
					       { BBRX_TRACE_WITHHELD, "withheld" },
					       { BBRX_TRACE_SIZED, "sized" },
					       { BBRX_TRACE_GROWN, "grown" },
					       { BBRX_TRACE_PUSH_MARKED, "push_marked" },
					       { BBRX_TRACE_PUSH_SUPPRESSED, "suppressed" }),
			      __entry->value)
);

DEFINE_EVENT(bbrx_hook_class, bbrx_autocork,
	     TP_PROTO(const struct sock *sk, int policy, int decision,
		      u32 value),
	     TP_ARGS(sk, policy, decision, value)
);

DEFINE_EVENT(bbrx_hook_class, bbrx_tsq,
	     TP_PROTO(const struct sock *sk, int policy, int decision,
		      u32 value),
	     TP_ARGS(sk, policy, decision, value)
);

DEFINE_EVENT(bbrx_hook_class, bbrx_rcvbuf,
	     TP_PROTO(const struct sock *sk, int policy, int decision,
		      u32 value),
	     TP_ARGS(sk, policy, decision, value)
);

DEFINE_EVENT(bbrx_hook_class, bbrx_delack,
	     TP_PROTO(const struct sock *sk, int policy, int decision,
		      u32 value),
	     TP_ARGS(sk, policy, decision, value)
);

#endif /* _BBRX_TRACE_H */

/* Out of tree: define_trace.h finds this file through trace.o's -I. */
#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE bbrx_trace
#include <trace/define_trace.h>
