// SPDX-License-Identifier: GPL-2.0
/*
 * Delayed-ACK policy: net.ipv4.bbrx.delack, a kprobe on one instruction of
 * tcp_measure_rcv_mss() (6.12), or of tcp_event_data_recv() where that is
 * inlined (6.1).
 *
 * Upstream 4720852ed9af ("tcp: fix delayed ACKs for MSS boundary condition",
 * 5.19, in 6.1) makes a receiver mark ICSK_ACK_PUSHED for a PSH segment of at
 * least rcv_mss bytes, so tcp_cleanup_rbuf() ACKs as soon as the application
 * reads it instead of waiting for the delayed-ACK timer. A user with an
 * embedded lwIP peer reported 27% less throughput (11% on a radio link)
 * from the extra ACKs and got it back only by reverting the change.
 *
 *   0 kernel        the running kernel (which has the change)
 *   1 post-change   the same: bbrx relies on 6.1's own code, only counts
 *                   the PUSHED marks it sees (DelackPushMarked)
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
#include <linux/stddef.h>
#include <linux/string.h>
#include <net/inet_connection_sock.h>
#include <net/tcp.h>

#include "bbrx.h"
#include "bbrx_trace.h"

/*
 * orb $ICSK_ACK_PUSHED, pending(%reg): 80 /1 with mod 10 (disp32); reg is
 * any base register without REX or SIB (ModRM 0x88 | rm, rm != 4).
 */
#define BBRX_ORB_OPCODE		0x80
#define BBRX_ORB_MODRM_BASE	0x88
#define BBRX_ORB_LEN		7
/* testb $TCPHDR_PSH, disp8(%r12) */
#define BBRX_TESTB_R12_LEN	6
/* The function scanned: about 0x310 bytes in 6.1, 0x1d0 in 6.12. */
#define BBRX_DELACK_SCAN	0x600

/* The orb's base register (ModRM rm): it holds the socket. */
static u8 bbrx_delack_rm;

/* Find the one "orb $PUSHED, pending(%reg)"; its offset, sets the rm. */
static long bbrx_delack_find_orb(unsigned long addr, size_t pend, bool fault)
{
	u8 orb[BBRX_ORB_LEN] = { BBRX_ORB_OPCODE };
	__le32 disp = cpu_to_le32(pend);
	long o, found = -ENOENT;
	u8 rm;

	memcpy(orb + 2, &disp, sizeof(disp));
	orb[6] = ICSK_ACK_PUSHED;
	for (rm = 0; rm < 8; rm++) {
		if (rm == 4)	/* SIB form */
			continue;
		orb[1] = BBRX_ORB_MODRM_BASE | rm;
		o = bbrx_hook_find(addr, 0, BBRX_DELACK_SCAN, orb, sizeof(orb),
				   fault);
		if (o == -ENOENT)
			continue;
		if (o < 0 || found >= 0)
			return -E2BIG;
		found = o;
		bbrx_delack_rm = rm;
	}
	return found;
}

/*
 * The branch right after the PSH test at @t that makes the orb at @o run
 * only when PSH is set: "jne <orb>" (6.1: the orb sits out of line) or
 * "je <past the orb>" with the orb right after it (6.12). Its offset, or
 * -1.
 */
static long bbrx_delack_psh_branch(unsigned long addr, long t, long o)
{
	long j = t + BBRX_TESTB_R12_LEN;
	u8 insn[6];
	s32 rel32;
	s8 rel8;

	if (copy_from_kernel_nofault(insn, (void *)(addr + j), sizeof(insn)))
		return -1;
	rel8 = (s8)insn[1];
	memcpy(&rel32, insn + 2, sizeof(rel32));
	if (insn[0] == 0x75 && j + 2 + rel8 == o)			/* jne rel8 */
		return j;
	if (insn[0] == 0x0f && insn[1] == 0x85 && j + 6 + rel32 == o)	/* jne rel32 */
		return j;
	if (insn[0] == 0x74 && j + 2 == o && j + 2 + rel8 >= o + BBRX_ORB_LEN)
		return j;						/* je rel8 */
	if (insn[0] == 0x0f && insn[1] == 0x84 && j + 6 == o &&
	    j + 6 + rel32 >= o + BBRX_ORB_LEN)				/* je rel32 */
		return j;
	return -1;
}

/**
 * bbrx_delack_verify() - check the target has the PSH branch
 * @addr: address of tcp_measure_rcv_mss (6.12) or, where that is inlined,
 *	tcp_event_data_recv (6.1)
 * @reason: set to why the shape does not match
 * @len: size of @reason
 *
 * Looks for the one instruction "orb $ICSK_ACK_PUSHED, pending(%reg)" (the
 * offset of icsk_ack.pending taken from the headers this module was built
 * with; the register holds the socket), for "testb $TCPHDR_PSH,
 * <tcp_skb_cb tcp_flags>(%r12)" before it, followed by the branch that
 * runs the orb only for PSH (bbrx_delack_psh_branch()), and for that
 * branch being the orb's only way in (bbrx_hook_sole_entry()); sets
 * bbrx_delack_kp.offset to the instruction.
 *
 * Return: 0, or -ENOEXEC (-ENOENT without the kernel's decoder) with
 * @reason when any of these is missing or ambiguous.
 */
int bbrx_delack_verify(unsigned long addr, char *reason, size_t len)
{
	const bool fault = bbrx_hook_fault(BBRX_HOOK_DELACK);
	const size_t pend = offsetof(struct inet_connection_sock, icsk_ack) +
			    offsetof(typeof_member(struct inet_connection_sock,
						   icsk_ack), pending);
	const size_t flags = offsetof(struct sk_buff, cb) +
			     offsetof(struct tcp_skb_cb, tcp_flags);
	const u8 test[BBRX_TESTB_R12_LEN] = {
		0x41, 0xf6, 0x44, 0x24, (u8)flags, TCPHDR_PSH,
	};
	long o, t, j;
	int err;

	BUILD_BUG_ON(ICSK_ACK_PUSHED != 4);
	if (flags > 0x7f) {
		snprintf(reason, len, "tcp_flags at skb+%zu: no disp8 form", flags);
		return -ENOEXEC;
	}

	o = bbrx_delack_find_orb(addr, pend, fault);
	if (o < 0) {
		snprintf(reason, len,
			 "PSH mark (orb $%#x,%#zx(%%reg)) %s in the first %#x bytes",
			 ICSK_ACK_PUSHED, pend,
			 o == -E2BIG ? "ambiguous" : "not found", BBRX_DELACK_SCAN);
		return -ENOEXEC;
	}
	t = bbrx_hook_find(addr, 0, o, test, sizeof(test), false);
	j = t < 0 ? -1 : bbrx_delack_psh_branch(addr, t, o);
	if (j < 0) {
		snprintf(reason, len,
			 "no \"testb $PSH,%#zx(%%r12)\" + branch running the PSH mark at +%#lx",
			 flags, o);
		return -ENOEXEC;
	}
	/*
	 * The sub-MSS heuristic also sets PUSHED: a build that merged its
	 * path into this instruction would make policy 2 suppress it too.
	 */
	err = bbrx_hook_sole_entry(addr, o, j, reason, len);
	if (err)
		return err;
	bbrx_delack_kp.offset = o;
	pr_info("bbrx: delack: this kernel marks PUSHED for PSH >= rcv_mss (4720852ed9af), only after the PSH test at +%#lx; policy 1 relies on it, policy 2 skips +%#lx\n",
		t, o);
	return 0;
}

/* The socket: the orb's base register (it addresses icsk_ack.pending). */
static struct sock *bbrx_delack_sk(const struct pt_regs *regs)
{
	switch (bbrx_delack_rm) {
	case 0: return (struct sock *)regs->ax;
	case 1: return (struct sock *)regs->cx;
	case 2: return (struct sock *)regs->dx;
	case 3: return (struct sock *)regs->bx;
	case 5: return (struct sock *)regs->bp;
	case 6: return (struct sock *)regs->si;
	default: return (struct sock *)regs->di;
	}
}

/*
 * At the "orb". Returning 1 after moving the IP tells kprobes we changed
 * the flow: the instruction is not single-stepped.
 */
static int bbrx_delack_pre(struct kprobe *p, struct pt_regs *regs)
{
	struct sock *sk = bbrx_delack_sk(regs);
	struct bbrx_net *bn = bbrx_pernet(sock_net(sk));
	int policy = READ_ONCE(bn->delack);

	if (policy == BBRX_POLICY_KERNEL || !bbrx_sk_in_scope(sk, bn))
		return 0;
	if (policy == BBRX_POLICY_POST) {
		bbrx_stat_inc(bn, BBRX_STAT_DELACK_PUSH_MARKED);
		if (trace_bbrx_delack_enabled())
			bbrx_trace_hook(sk, BBRX_HOOK_DELACK, policy,
					BBRX_TRACE_PUSH_MARKED,
					inet_csk(sk)->icsk_ack.rcv_mss);
		return 0;
	}
	bbrx_stat_inc(bn, BBRX_STAT_DELACK_PUSH_SUPPRESSED);
	if (trace_bbrx_delack_enabled())
		bbrx_trace_hook(sk, BBRX_HOOK_DELACK, policy,
				BBRX_TRACE_PUSH_SUPPRESSED,
				inet_csk(sk)->icsk_ack.rcv_mss);
	instruction_pointer_set(regs, (unsigned long)p->addr + BBRX_ORB_LEN);
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

struct kprobe bbrx_delack_kp = {
	.pre_handler = bbrx_delack_pre,
	.post_handler = bbrx_delack_post,
};
