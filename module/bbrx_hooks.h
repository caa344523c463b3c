/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The hooks and what each adds to the module's shared lists: the one list
 * of hooks. A hook's row (target, mechanism, verifier, wants, handler) is
 * struct bbrx_hook bbrx_hook_NAME in its own file; the lines here give it
 * the names and numbers the other files need at build time. Each line is
 * one of:
 *
 *   BBRX_POLICY(ID, name, max)   the policy net.ipv4.bbrx.NAME, 0..max (0
 *                                always the kernel's rule): BBRX_POL_ID,
 *                                its slot in struct bbrx_net's policy[]
 *                                (bbrx.h), its sysctl (sysctl.c) and the
 *                                trace event bbrx_NAME its hooks emit
 *                                (bbrx_trace.h defines it, trace.c's
 *                                table calls it)
 *   BBRX_HOOK(ID, name, POL)     the hook BBRX_HOOK_ID (bbrx.h), NAME in
 *                                /proc/net/bbrx_hooks and the module
 *                                parameters, its row bbrx_hook_NAME
 *                                (hook.c's table), armed by the policy
 *                                BBRX_POL_POL
 *   BBRX_HOOK_STAT(ID, "Name")   the counter BBRX_STAT_ID, Name in
 *                                /proc/net/bbrx_stat (bbrx.h, stats.c)
 *
 * An includer defines the kinds it needs, the others expand to nothing;
 * this file undefines all three at its end and has no include guard on
 * purpose. Includers build positional tables from it, so the order of
 * each kind is its enum's: the hooks that of the hook table, the counters
 * their place in /proc/net/bbrx_stat. A hook's trace decisions are in
 * enum bbrx_trace_decision, beside its event (bbrx_trace.h).
 */
#ifndef BBRX_POLICY
#define BBRX_POLICY(id, name, max)
#endif
#ifndef BBRX_HOOK
#define BBRX_HOOK(id, name, pol)
#endif
#ifndef BBRX_HOOK_STAT
#define BBRX_HOOK_STAT(id, name)
#endif

/* autocork.c: 0 kernel, 1 post-114f39feab36, 2 pre (4.15), 3 never cork */
BBRX_POLICY(AUTOCORK, autocork, 3)
BBRX_HOOK(AUTOCORK, autocork, AUTOCORK)
/* tcp_push corked by the policy */
BBRX_HOOK_STAT(AUTOCORK_CORKED, "AutocorkCorked")
/* 6.1 would cork, the policy did not */
BBRX_HOOK_STAT(AUTOCORK_DECLINED, "AutocorkDeclined")

/* tsq.c: 0 kernel, 1 single-skb shortcut (Oct 2023), 2 without it */
BBRX_POLICY(TSQ, tsq, 2)
BBRX_HOOK(TSQ, tsq, TSQ)
/* TSQ throttled the socket */
BBRX_HOOK_STAT(TSQ_THROTTLED, "TsqThrottled")
/* sent: the rtx queue held one skb */
BBRX_HOOK_STAT(TSQ_SINGLE_SKB, "TsqSingleSkb")
/* the single-skb shortcut refused */
BBRX_HOOK_STAT(TSQ_WITHHELD, "TsqWithheld")

/* rcvbuf.c: 0 kernel, 1 per-MSS initial size and growth (2013 proposal) */
BBRX_POLICY(RCVBUF, rcvbuf, 1)
BBRX_HOOK(RCVBUF, rcvbuf, RCVBUF)
BBRX_HOOK(RCVBUF_GROW, rcvbuf_grow, RCVBUF)
/* sk_rcvbuf raised at establishment */
BBRX_HOOK_STAT(RCVBUF_SIZED, "RcvbufSized")
/* growth re-sized with per_mss */
BBRX_HOOK_STAT(RCVBUF_GROWN, "RcvbufGrown")
/* of those: for out-of-order data (7.x) */
BBRX_HOOK_STAT(RCVBUF_GROWN_OFO, "RcvbufGrownOfo")

/*
 * delack.c: 0 kernel, 1 post-4720852ed9af (Oct 2023: a PSH segment of
 * at least rcv_mss is ACKed at read), 2 pre
 */
BBRX_POLICY(DELACK, delack, 2)
BBRX_HOOK(DELACK, delack, DELACK)
/* a >= rcv_mss PSH segment marked (policy 1) */
BBRX_HOOK_STAT(DELACK_PUSH_MARKED, "DelackPushMarked")
/* a >= rcv_mss PSH segment left unmarked (policy 2) */
BBRX_HOOK_STAT(DELACK_PUSH_SUPPRESSED, "DelackPushSuppressed")

#undef BBRX_POLICY
#undef BBRX_HOOK
#undef BBRX_HOOK_STAT
