// SPDX-License-Identifier: GPL-2.0
/*
 * Delayed-ACK policy: net.ipv4.bbrx.delack, a kprobe on one instruction of
 * tcp_measure_rcv_mss() (6.12), or of tcp_event_data_recv() where that is
 * inlined (6.1).
 *
 * Upstream 4720852ed9af ("tcp: fix delayed ACKs for MSS boundary condition",
 * 6.6, October 2023; stable carried it to 6.1, 5.15, 5.10 and 4.19 that
 * month) makes a receiver mark ICSK_ACK_PUSHED for a PSH segment of at least
 * rcv_mss bytes, so tcp_cleanup_rbuf() ACKs as soon as the application
 * reads it instead of waiting for the delayed-ACK timer. A user with an
 * embedded lwIP peer reported 27% less throughput (11% on a radio link)
 * from the extra ACKs and got it back only by reverting the change.
 *
 *   0 kernel        the running kernel (6.1 and later have the change)
 *   1 post-change   the same: bbrx relies on the kernel's own code, only
 *                   counts the PUSHED marks it sees (DelackPushMarked)
 *   2 pre-change    a PSH segment of >= rcv_mss does not mark PUSHED
 *
 * The change is one instruction in tcp_measure_rcv_mss(), "set PUSHED in
 * icsk_ack.pending", reached only through "PSH set?" in the len >= rcv_mss
 * branch. In 6.12 tcp_measure_rcv_mss() is also called for out-of-order
 * segments; policy 2 applies there too, as the pre-change rule would. The
 * verifier finds exactly that instruction and the test-and-branch that
 * leads to it; the kprobe's pre-handler skips it (moves
 * the IP past it) for in-scope sockets with policy 2. Everything else the
 * kernel does stays: the sub-MSS heuristic (PUSHED/PUSHED2), TCP_QUICKACK
 * (which sets PUSHED from setsockopt) and the delayed-ACK timer.
 */
#include <linux/kernel.h>
#include <linux/kprobes.h>
#include <net/inet_connection_sock.h>
#include <net/tcp.h>

#include "bbrx.h"
#include "bbrx_trace.h"
#include "hook.h"

/* Set by the verifier: the socket's register and the mark's length, bytes. */
int bbrx_delack_reg;
int bbrx_delack_len;

/* The socket: the orb's base register (it addresses icsk_ack.pending). */
static struct sock *bbrx_delack_sk(const struct pt_regs *regs)
{
	return (struct sock *)bbrx_insn_reg_value(regs, bbrx_delack_reg);
}

/*
 * At the "orb". Returning 1 after moving the IP tells kprobes we changed
 * the flow: the instruction is not single-stepped.
 */
static int bbrx_delack_pre(struct kprobe *p, struct pt_regs *regs)
{
	struct sock *sk = bbrx_delack_sk(regs);
	struct bbrx_net *bn = bbrx_pernet(sock_net(sk));
	int policy = bbrx_policy(bn, BBRX_POL_DELACK);

	if (policy == BBRX_POLICY_KERNEL || !bbrx_sk_in_scope(sk, bn))
		return 0;
	if (policy == BBRX_POLICY_POST) {
		bbrx_stat_inc(bn, BBRX_STAT_DELACK_PUSH_MARKED);
		if (trace_bbrx_delack_enabled())
			bbrx_trace_hook(sk, BBRX_POL_DELACK, policy,
					BBRX_TRACE_PUSH_MARKED,
					inet_csk(sk)->icsk_ack.rcv_mss);
		return 0;
	}
	bbrx_stat_inc(bn, BBRX_STAT_DELACK_PUSH_SUPPRESSED);
	if (trace_bbrx_delack_enabled())
		bbrx_trace_hook(sk, BBRX_POL_DELACK, policy,
				BBRX_TRACE_PUSH_SUPPRESSED,
				inet_csk(sk)->icsk_ack.rcv_mss);
	instruction_pointer_set(regs, (unsigned long)p->addr + bbrx_delack_len);
	return 1;
}

/*
 * Present only so the probe is never optimized into a jump: an optimized
 * probe ignores an IP changed by the pre-handler.
 */
static void bbrx_delack_post(struct kprobe *p, struct pt_regs *regs,
			     unsigned long flags)
{
}

static struct kprobe bbrx_delack_kp = {
	.pre_handler = bbrx_delack_pre,
	.post_handler = bbrx_delack_post,
};

struct bbrx_hook bbrx_hook_delack = {
	/* out of line in 6.12; inlined into its caller in 6.1 */
	.symbol = "tcp_measure_rcv_mss",
	.inlined_into = "tcp_event_data_recv",
	.kind = BBRX_HOOK_KPROBE,
	.verify = bbrx_delack_verify,
	.kp = &bbrx_delack_kp,
	/* an int3 per >= MSS PSH segment host-wide: not at policy 0 */
	.lazy = true,
};
