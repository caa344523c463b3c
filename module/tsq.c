// SPDX-License-Identifier: GPL-2.0
/*
 * TSQ policy: net.ipv4.bbrx.tsq, a redirect of tcp_small_queue_check().
 *
 * TCP Small Queues stop a socket from queueing more than about 1 ms of data
 * (pacing_rate >> sk_pacing_shift, at least two skbs) below it; the TX
 * completion of a queued skb wakes the socket up again. When TX completions
 * come late (NIC interrupt mitigation, some virtual NICs), a socket with a
 * single skb in flight waits for nothing useful. Upstream "tcp: tsq: relax
 * tcp_small_queue_check() when rtx queue contains a single skb" (Oct 2023,
 * in 6.1 stable) sends anyway when the rtx queue is empty or holds one skb
 * (81.5 -> 94.4 Mbit/s on a 100 Mbit link in its report).
 *
 *   0 kernel        no redirect: the running kernel's check
 *   1 post-change   send when the rtx queue is empty or holds a single skb
 *                   (6.1's own rule, counted)
 *   2 pre-change    send only when it is empty (the regression)
 *
 * The limit is the kernel's: max(2 * truesize, pacing_rate >> pacing_shift),
 * capped by tcp_limit_output_bytes (for unpaced sockets only in 6.1 and
 * 6.12; for every socket in 7.x, whose function no longer reads
 * sk_pacing_status: bbrx_tsq_verify() tells them apart), shifted by factor
 * (1 for retransmits), plus the tcp_tx_delay allowance.
 */
#include <linux/kernel.h>
#include <linux/uaccess.h>
#include <net/tcp.h>

#include "bbrx.h"
#include "bbrx_trace.h"
#include "compat.h"
#include "hook.h"

/**
 * bbrx_tsq_wants() - does the TSQ hook act on this socket?
 * @sk: the socket tcp_small_queue_check() was called for
 *
 * Return: true when the netns policy is not 0 and @sk is in scope.
 */
static bool bbrx_tsq_wants(struct sock *sk)
{
	struct bbrx_net *bn = bbrx_pernet(sock_net(sk));

	return bbrx_policy(bn, BBRX_POL_TSQ) != BBRX_POLICY_KERNEL &&
	       bbrx_sk_in_scope(sk, bn);
}

/*
 * Does the kernel's function clamp every flow to tcp_limit_output_bytes
 * (7.x), not only unpaced ones (6.1, 6.12)? Set by bbrx_tsq_verify() from
 * the function's code, before the hook is installed.
 */
bool bbrx_tsq_clamp_all;

static unsigned long bbrx_tsq_limit(struct sock *sk, unsigned int truesize,
				    unsigned int factor)
{
	unsigned long pacing_rate = READ_ONCE(sk->sk_pacing_rate);
	unsigned long limit;

	limit = max_t(unsigned long, 2UL * truesize,
		      pacing_rate >> READ_ONCE(sk->sk_pacing_shift));
	if (bbrx_tsq_clamp_all ||
	    READ_ONCE(sk->sk_pacing_status) == SK_PACING_NONE)
		limit = min_t(unsigned long, limit,
			      READ_ONCE(sock_net(sk)->ipv4.sysctl_tcp_limit_output_bytes));
	limit <<= factor;

	/*
	 * tcp_tx_delay: queue the delayed data too (truesize ~2x payload).
	 * The kernel guards this with the tcp_tx_delay_enabled static key,
	 * which 6.12 no longer exports; a non-zero tcp_tx_delay implies it.
	 */
	if (tcp_sk(sk)->tcp_tx_delay)
		limit += ((u64)pacing_rate * tcp_sk(sk)->tcp_tx_delay) >> 19;
	return limit;
}

/**
 * bbrx_tsq_small_queue_check() - tcp_small_queue_check() with the TSQ policy
 * @sk: the socket, locked or in its TX softirq path
 * @truesize: truesize of the skb about to be sent, bytes (GCC's isra clone
 *	passes it instead of the skb)
 * @factor: limit shift, 0 for new data, 1 for retransmits
 *
 * Return: true if the socket must wait for a TX completion (TSQ_THROTTLED
 * is set then), false to send now.
 */
static bool bbrx_tsq_small_queue_check(struct sock *sk,
				       unsigned int truesize,
				       unsigned int factor)
{
	struct bbrx_net *bn = bbrx_pernet(sock_net(sk));
	unsigned long limit = bbrx_tsq_limit(sk, truesize, factor);
	const struct rb_node *node;

	if (refcount_read(&sk->sk_wmem_alloc) <= limit)
		return false;

	/* Nothing in flight: no completion would wake us up. */
	node = sk->tcp_rtx_queue.rb_node;
	if (!node)
		return false;
	if (!node->rb_left && !node->rb_right) {
		int policy = bbrx_policy(bn, BBRX_POL_TSQ);

		if (policy != BBRX_POLICY_PRE) {
			bbrx_stat_inc(bn, BBRX_STAT_TSQ_SINGLE_SKB);
			if (trace_bbrx_tsq_enabled())
				bbrx_trace_hook(sk, BBRX_POL_TSQ, policy,
						BBRX_TRACE_SINGLE_SKB, limit);
			return false;
		}
		bbrx_stat_inc(bn, BBRX_STAT_TSQ_WITHHELD);
		if (trace_bbrx_tsq_enabled())
			bbrx_trace_hook(sk, BBRX_POL_TSQ, policy,
					BBRX_TRACE_WITHHELD, limit);
	}

	set_bit(TSQ_THROTTLED, &sk->sk_tsq_flags);
	/* The completion may have come before the bit was set: test again. */
	smp_mb__after_atomic();
	if (refcount_read(&sk->sk_wmem_alloc) > limit) {
		bbrx_stat_inc(bn, BBRX_STAT_TSQ_THROTTLED);
		return true;
	}
	return false;
}

struct bbrx_hook bbrx_hook_tsq = {
	.symbol = "tcp_small_queue_check.isra.0",
	.kind = BBRX_HOOK_REDIRECT,
	.verify = bbrx_tsq_verify,
	.wants = bbrx_tsq_wants,
	.redirect = bbrx_tsq_small_queue_check,
};
