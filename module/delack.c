// SPDX-License-Identifier: GPL-2.0
/*
 * Delayed-ACK policy: net.ipv4.bbrx.delack, a kprobe on one instruction of
 * tcp_event_data_recv().
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
 * The change is one instruction in the inlined tcp_measure_rcv_mss(), "set
 * PUSHED in icsk_ack.pending", reached only through "PSH set?" in the
 * len >= rcv_mss branch. The verifier finds exactly that instruction and the
 * test-and-branch that leads to it; the kprobe's pre-handler skips it (moves
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

/* orb $ICSK_ACK_PUSHED, pending(%rbx): 80 /1 with mod 10, rm 011, disp32 */
#define BBRX_ORB_OPCODE		0x80
#define BBRX_ORB_MODRM_RBX	0x8b
#define BBRX_ORB_LEN		7
/* testb $TCPHDR_PSH, disp8(%r12) then jne rel32 */
#define BBRX_TESTB_R12_LEN	6
#define BBRX_JNE_REL32_LEN	6
/* tcp_event_data_recv is about 0x310 bytes in 6.1 builds. */
#define BBRX_DELACK_SCAN	0x600

/**
 * bbrx_delack_verify() - check tcp_event_data_recv() has the PSH branch
 * @addr: address of tcp_event_data_recv
 * @reason: set to why the shape does not match
 * @len: size of @reason
 *
 * Looks for the one instruction "orb $ICSK_ACK_PUSHED, pending(%rbx)" (the
 * offset of icsk_ack.pending taken from the headers this module was built
 * with) and for "testb $TCPHDR_PSH, <tcp_skb_cb tcp_flags>(%r12); jne" that
 * jumps to it, and that this jump is the instruction's only way in
 * (bbrx_hook_sole_entry()); sets bbrx_delack_kp.offset to the instruction.
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
	u8 orb[BBRX_ORB_LEN] = { BBRX_ORB_OPCODE, BBRX_ORB_MODRM_RBX };
	__le32 disp = cpu_to_le32(pend);
	u8 test[BBRX_TESTB_R12_LEN + 2] = {
		0x41, 0xf6, 0x44, 0x24, (u8)flags, TCPHDR_PSH, 0x0f, 0x85,
	};
	long o, t;
	s32 rel;
	int err;

	BUILD_BUG_ON(ICSK_ACK_PUSHED != 4);
	if (flags > 0x7f) {
		snprintf(reason, len, "tcp_flags at skb+%zu: no disp8 form", flags);
		return -ENOEXEC;
	}
	memcpy(orb + 2, &disp, sizeof(disp));
	orb[6] = ICSK_ACK_PUSHED;

	o = bbrx_hook_find(addr, 0, BBRX_DELACK_SCAN, orb, sizeof(orb), fault);
	if (o < 0) {
		snprintf(reason, len,
			 "PSH mark (orb $%#x,%#zx(%%rbx)) %s in the first %#x bytes",
			 ICSK_ACK_PUSHED, pend,
			 o == -E2BIG ? "ambiguous" : "not found", BBRX_DELACK_SCAN);
		return -ENOEXEC;
	}
	t = bbrx_hook_find(addr, 0, o, test, sizeof(test), false);
	if (t < 0 ||
	    copy_from_kernel_nofault(&rel, (void *)(addr + t + sizeof(test)),
				     sizeof(rel)) ||
	    t + BBRX_TESTB_R12_LEN + BBRX_JNE_REL32_LEN + rel != o) {
		snprintf(reason, len,
			 "no \"testb $PSH,%#zx(%%r12); jne +%#lx\" before the PSH mark",
			 flags, o);
		return -ENOEXEC;
	}
	/*
	 * The sub-MSS heuristic also sets PUSHED: a build that merged its
	 * path into this instruction would make policy 2 suppress it too.
	 */
	err = bbrx_hook_sole_entry(addr, o, t + BBRX_TESTB_R12_LEN, reason, len);
	if (err)
		return err;
	bbrx_delack_kp.offset = o;
	pr_info("bbrx: delack: this kernel marks PUSHED for PSH >= rcv_mss (4720852ed9af), only after the PSH test at +%#lx; policy 1 relies on it, policy 2 skips +%#lx\n",
		t, o);
	return 0;
}

/*
 * At the "orb": rbx is the socket (the instruction addresses its
 * icsk_ack.pending). Returning 1 after moving the IP tells kprobes we
 * changed the flow: the instruction is not single-stepped.
 */
static int bbrx_delack_pre(struct kprobe *p, struct pt_regs *regs)
{
	struct sock *sk = (struct sock *)regs->bx;
	struct bbrx_net *bn = bbrx_pernet(sock_net(sk));
	int policy = READ_ONCE(bn->delack);

	if (policy == BBRX_POLICY_KERNEL || !bbrx_sk_in_scope(sk, bn))
		return 0;
	if (policy == BBRX_POLICY_POST) {
		bbrx_stat_inc(bn, BBRX_STAT_DELACK_PUSH_MARKED);
		return 0;
	}
	bbrx_stat_inc(bn, BBRX_STAT_DELACK_PUSH_SUPPRESSED);
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
