// SPDX-License-Identifier: GPL-2.0
/*
 * klp_tcp_push: a livepatch that replaces tcp_push() with a function of the
 * same behaviour, for hook_coexist.sh. It takes tcp_push() the way a
 * distribution's livepatch would (an ftrace IPMODIFY ops, FL_PERMANENT), so
 * the test can check that bbrx's autocork redirect and this patch refuse
 * each other cleanly, in either load order, and that unloading both leaves
 * the kernel's own tcp_push() running.
 *
 * What tcp_push() does in 6.1: mark PSH on the tail skb unless MSG_MORE
 * (or half the peer's largest window was written since the last push), set
 * the urgent pointer for MSG_OOB, autocork a small tail skb while earlier
 * data is still queued below the socket (and the rtx queue is not empty,
 * and the skb may take more data), otherwise push the pending frames, with
 * TCP_NAGLE_CORK for MSG_MORE.
 *
 * __tcp_push_pending_frames() is not exported: its address comes from
 * kallsyms_lookup_name(), which is not exported either and is found with a
 * kprobe (the kprobe API resolves names). The module parameter "calls"
 * (read-only) counts calls of the replacement so the test can see it run.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/kprobes.h>
#include <linux/livepatch.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/uaccess.h>
#include <net/tcp.h>
#ifdef KLP_HAVE_ASM_IBT_H
#include <asm/ibt.h>		/* 5.18+ */
#endif

static void (*klp_push_pending_frames)(struct sock *sk, unsigned int cur_mss,
				       int nonagle);
static atomic_long_t klp_calls = ATOMIC_LONG_INIT(0);

static int klp_calls_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%ld\n", atomic_long_read(&klp_calls));
}

static const struct kernel_param_ops klp_calls_ops = {
	.get = klp_calls_get,
};

module_param_cb(calls, &klp_calls_ops, NULL, 0444);
MODULE_PARM_DESC(calls, "Calls of the replacement tcp_push() so far");

/* May a small tail skb wait for the TX completion of earlier data? */
static bool klp_should_cork(struct sock *sk, struct sk_buff *skb,
			    int size_goal)
{
	if (skb->len >= size_goal)
		return false;
	if (!READ_ONCE(sock_net(sk)->ipv4.sysctl_tcp_autocorking))
		return false;
	if (tcp_rtx_queue_empty(sk))
		return false;
	if (refcount_read(&sk->sk_wmem_alloc) <= skb->truesize)
		return false;
	return tcp_skb_can_collapse_to(skb);
}

static void klp_tcp_push(struct sock *sk, int flags, int mss_now, int nonagle,
			 int size_goal)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct sk_buff *skb;

	atomic_long_inc(&klp_calls);
	skb = tcp_write_queue_tail(sk);
	if (!skb)
		return;

	/* PSH on the data written so far, unless more follows soon. */
	if (!(flags & MSG_MORE) ||
	    after(tp->write_seq, tp->pushed_seq + (tp->max_window >> 1))) {
		TCP_SKB_CB(skb)->tcp_flags |= TCPHDR_PSH;
		tp->pushed_seq = tp->write_seq;
	}
	if (unlikely(flags & MSG_OOB))
		tp->snd_up = tp->write_seq;

	if (klp_should_cork(sk, skb, size_goal)) {
		/* The TX completion pushes the queue once the bit is set. */
		if (!test_bit(TSQ_THROTTLED, &sk->sk_tsq_flags)) {
			NET_INC_STATS(sock_net(sk), LINUX_MIB_TCPAUTOCORKING);
			set_bit(TSQ_THROTTLED, &sk->sk_tsq_flags);
			/* the bit before the second look at sk_wmem_alloc */
			smp_mb__after_atomic();
		}
		/* Unless that completion came before the bit was set. */
		if (refcount_read(&sk->sk_wmem_alloc) > skb->truesize)
			return;
	}

	klp_push_pending_frames(sk, mss_now,
				(flags & MSG_MORE) ? TCP_NAGLE_CORK : nonagle);
}

static struct klp_func klp_tcp_push_funcs[] = {
	{
		.old_name = "tcp_push",
		.new_func = klp_tcp_push,
	}, { }
};

static struct klp_object klp_tcp_push_objs[] = {
	{
		/* name NULL: vmlinux */
		.funcs = klp_tcp_push_funcs,
	}, { }
};

static struct klp_patch klp_tcp_push_patch = {
	.mod = THIS_MODULE,
	.objs = klp_tcp_push_objs,
};

/* The word test: __is_endbr(u32) where is_endbr() takes a pointer (Kbuild). */
#ifdef KLP_HAVE___IS_ENDBR
#define KLP_IS_ENDBR(insn)	__is_endbr(insn)
#else
#define KLP_IS_ENDBR(insn)	is_endbr(insn)
#endif

/*
 * IBT kernels (6.12) start functions with ENDBR64, and a kprobe at a
 * function sits past it; where the CPU enforces IBT an indirect call must
 * land on a live ENDBR64.
 */
static unsigned long klp_func_start(unsigned long kp_addr)
{
#ifdef CONFIG_X86_KERNEL_IBT
	u32 insn;

	if (!copy_from_kernel_nofault(&insn, (void *)(kp_addr - 4), sizeof(insn)) &&
	    KLP_IS_ENDBR(insn))
		return kp_addr - 4;
#endif
	return kp_addr;
}

static bool klp_callable(unsigned long addr)
{
#ifdef CONFIG_X86_KERNEL_IBT
	u32 insn;

	if (!cpu_feature_enabled(X86_FEATURE_IBT))
		return true;
	return !copy_from_kernel_nofault(&insn, (void *)addr, sizeof(insn)) &&
	       insn == gen_endbr();
#else
	return true;
#endif
}

static unsigned long klp_lookup(const char *name)
{
	struct kprobe kp = { .symbol_name = "kallsyms_lookup_name" };
	unsigned long (*lookup)(const char *name);
	int err;

	err = register_kprobe(&kp);
	if (err < 0) {
		pr_err("cannot find kallsyms_lookup_name: %d\n", err);
		return 0;
	}
	unregister_kprobe(&kp);
	lookup = (void *)klp_func_start((unsigned long)kp.addr);
	if (!klp_callable((unsigned long)lookup)) {
		pr_err("kallsyms_lookup_name not callable through a pointer (IBT)\n");
		return 0;
	}
	return lookup(name);
}

static int __init klp_tcp_push_init(void)
{
	unsigned long addr;

	addr = klp_lookup("__tcp_push_pending_frames");
	if (!addr) {
		pr_err("__tcp_push_pending_frames not found\n");
		return -ENOENT;
	}
	if (!klp_callable(addr)) {
		pr_err("IBT enforced and __tcp_push_pending_frames has no ENDBR64: not callable through a pointer\n");
		return -EOPNOTSUPP;
	}
	klp_push_pending_frames = (void *)addr;
	return klp_enable_patch(&klp_tcp_push_patch);
}

static void __exit klp_tcp_push_exit(void)
{
}

module_init(klp_tcp_push_init);
module_exit(klp_tcp_push_exit);
MODULE_DESCRIPTION("bbrx selftest: livepatch of tcp_push() with the same behaviour");
MODULE_LICENSE("GPL");
MODULE_INFO(livepatch, "Y");
