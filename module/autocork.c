// SPDX-License-Identifier: GPL-2.0
/*
 * Autocork policy: net.ipv4.bbrx.autocork, a redirect of tcp_push().
 *
 * Autocorking (3.14) holds a small write back while earlier data still sits
 * in the qdisc or NIC, so that later writes join it in one bigger segment.
 * In 4.15 the retransmit queue moved to an rb-tree; tcp_should_autocork()'s
 * test "skb != tcp_write_queue_head(sk)" then held for the last unsent skb
 * almost never, and autocorking stopped. Upstream 114f39feab36 ("tcp:
 * restore autocorking", 4.17) made the test "the rtx queue is not empty"
 * (500-byte writes: 2682 -> 5472 Mbit/s in its report).
 *
 *   0 kernel        no redirect: the running kernel's tcp_push()
 *   1 post-change   cork when the rtx queue is not empty (6.1's own rule)
 *   2 pre-change    cork when the skb is not the head of the write queue
 *                   (the 4.15 test; since sent skbs left sk_write_queue for
 *                   the rb-tree its head is the first unsent skb,
 *                   tcp_send_head(), usually the tail skb itself: in
 *                   practice never)
 *   3 never         never cork in-scope sockets
 *
 * Everything else tcp_push() does stays the kernel's: PSH marking (unless
 * MSG_MORE, or half the peer's max window written since the last push),
 * the urgent pointer for MSG_OOB, the EOR rule (no corking onto an skb that
 * ends a record) where the kernel has it, TcpExtTCPAutoCorking, and
 * MSG_MORE as TCP_NAGLE_CORK.
 */
#include <linux/kernel.h>
#include <linux/snmp.h>
#include <net/tcp.h>

#include "bbrx.h"
#include "bbrx_trace.h"
#include "compat.h"
#include "hook.h"

/*
 * Does the kernel's tcp_push() decline to cork onto an skb that ends a
 * record (tcp_skb_can_collapse_to(), in 6.1's tcp_should_autocork(); not in
 * 5.10's)? Set by the verifier from the function's code, before the hook is
 * installed.
 */
bool bbrx_autocork_eor = true;

/* Not exported; resolved at load and called with tcp_push()'s arguments. */
void (*bbrx_push_pending_frames)(struct sock *sk, unsigned int cur_mss,
				 int nonagle);

/**
 * bbrx_autocork_wants() - does the autocork hook act on this socket?
 * @sk: the socket tcp_push() was called for
 *
 * Return: true when the netns policy is not 0 and @sk is in scope.
 */
static bool bbrx_autocork_wants(struct sock *sk)
{
	struct bbrx_net *bn = bbrx_pernet(sock_net(sk));

	return bbrx_policy(bn, BBRX_POL_AUTOCORK) != BBRX_POLICY_KERNEL &&
	       bbrx_sk_in_scope(sk, bn);
}

/* The policy's part of the corking decision. */
static bool bbrx_autocork_rule(struct sock *sk, struct sk_buff *skb, int policy)
{
	switch (policy) {
	case BBRX_POLICY_PRE:
		return skb != tcp_send_head(sk);
	case BBRX_AUTOCORK_NEVER:
		return false;
	default:
		return !tcp_rtx_queue_empty(sk);
	}
}

/**
 * bbrx_autocork_tcp_push() - tcp_push() with the autocork policy
 * @sk: the socket, locked by the caller
 * @flags: sendmsg flags (MSG_MORE, MSG_OOB)
 * @mss_now: current MSS, bytes
 * @nonagle: TCP_NAGLE_* of the socket
 * @size_goal: bytes the tail skb may grow to
 *
 * Same ABI and effects as the kernel's tcp_push() except the corking rule.
 */
static void bbrx_autocork_tcp_push(struct sock *sk, int flags,
				   int mss_now, int nonagle, int size_goal)
{
	struct bbrx_net *bn = bbrx_pernet(sock_net(sk));
	struct tcp_sock *tp = tcp_sk(sk);
	struct sk_buff *skb;
	int policy = 0;
	bool cork;

	/* The replacement takes the headers' prototype of tcp_push(). */
	BUILD_BUG_ON(!__same_type(&tcp_push, &bbrx_autocork_tcp_push));
	skb = tcp_write_queue_tail(sk);
	if (!skb)
		return;

	if (!(flags & MSG_MORE) ||
	    after(tp->write_seq, tp->pushed_seq + (tp->max_window >> 1))) {
		TCP_SKB_CB(skb)->tcp_flags |= TCPHDR_PSH;
		tp->pushed_seq = tp->write_seq;
	}
	if (unlikely(flags & MSG_OOB))
		tp->snd_up = tp->write_seq;

	/* The kernel's conditions that do not depend on the policy. */
	cork = skb->len < size_goal &&
	       READ_ONCE(sock_net(sk)->ipv4.sysctl_tcp_autocorking) &&
	       refcount_read(&sk->sk_wmem_alloc) > skb->truesize &&
	       (!bbrx_autocork_eor || tcp_skb_can_collapse_to(skb));
	if (cork) {
		bool kernel_corks = !tcp_rtx_queue_empty(sk);

		policy = bbrx_policy(bn, BBRX_POL_AUTOCORK);
		cork = bbrx_autocork_rule(sk, skb, policy);
		if (kernel_corks && !cork) {
			bbrx_stat_inc(bn, BBRX_STAT_AUTOCORK_DECLINED);
			if (trace_bbrx_autocork_enabled())
				bbrx_trace_hook(sk, BBRX_POL_AUTOCORK, policy,
						BBRX_TRACE_DECLINED, skb->len);
		}
	}
	if (cork) {
		/* TSQ_THROTTLED makes the TX completion push the queue. */
		if (!test_bit(TSQ_THROTTLED, &sk->sk_tsq_flags)) {
			NET_INC_STATS(sock_net(sk), LINUX_MIB_TCPAUTOCORKING);
			set_bit(TSQ_THROTTLED, &sk->sk_tsq_flags);
			/* order the bit before re-reading sk_wmem_alloc */
			smp_mb__after_atomic();
		}
		/* Unless the completion came before the bit was set. */
		if (refcount_read(&sk->sk_wmem_alloc) > skb->truesize) {
			bbrx_stat_inc(bn, BBRX_STAT_AUTOCORK_CORKED);
			if (trace_bbrx_autocork_enabled())
				bbrx_trace_hook(sk, BBRX_POL_AUTOCORK, policy,
						BBRX_TRACE_CORKED, skb->len);
			return;
		}
	}

	if (flags & MSG_MORE)
		nonagle = TCP_NAGLE_CORK;
	bbrx_push_pending_frames(sk, mss_now, nonagle);
}

struct bbrx_hook bbrx_hook_autocork = {
	.symbol = "tcp_push",
	.kind = BBRX_HOOK_REDIRECT,
	.verify = bbrx_autocork_verify,
	.wants = bbrx_autocork_wants,
	.redirect = bbrx_autocork_tcp_push,
};
