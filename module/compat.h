/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every kernel-version difference bbrx depends on, in one place.
 *
 * Reference kernel: Debian 6.1 (6.1.0-5x, cloud and rt flavours). Differences
 * are detected by feature probes on the headers (Kbuild sets BBRX_HAVE_*),
 * not by version numbers, because distributions backport API changes.
 */
#ifndef _BBRX_COMPAT_H
#define _BBRX_COMPAT_H

#include <linux/ftrace.h>
#include <linux/string.h>
#include <asm/cpufeature.h>
#include <asm/ptrace.h>
#ifdef BBRX_HAVE_ASM_IBT_H
#include <asm/ibt.h>		/* IBT's ENDBR64: x86 5.18+ */
#endif
#include <linux/uaccess.h>
#include <net/net_namespace.h>
#include <net/tcp.h>

/*
 * The x86-64 verifiers decode with insn_decode() (upstream "x86/insn: Add
 * an insn_decode() API", 5.12; Debian's 5.10.0-32 carries it through
 * stable). Headers without it cannot build the verifiers.
 */
#if defined(CONFIG_X86_64) && !defined(BBRX_HAVE_INSN_DECODE)
#error "bbrx: no insn_decode() in these headers (5.12+, some 5.10 stable)"
#endif

/*
 * 5.18 added accessors for tp->snd_cwnd (upstream 40570375356c, "tcp: add
 * accessors to read/set tp->snd_cwnd"); older kernels get the same names.
 */
#ifndef BBRX_HAVE_TCP_SND_CWND
static inline u32 tcp_snd_cwnd(const struct tcp_sock *tp)
{
	return tp->snd_cwnd;
}

static inline void tcp_snd_cwnd_set(struct tcp_sock *tp, u32 val)
{
	tp->snd_cwnd = val;
}
#endif

/*
 * 6.2 named the bounded random number get_random_u32_below() (upstream
 * e8a533cbeb79, "treewide: use get_random_u32_below() instead of
 * deprecated function"); before, prandom_u32_max() gave the same range.
 */
#ifndef BBRX_HAVE_GET_RANDOM_U32_BELOW
static inline u32 get_random_u32_below(u32 ceil)
{
	return prandom_u32_max(ceil);
}
#endif

/*
 * The CE-marked packets a rate sample delivered: rs->delivered_ce, from
 * the per-skb snapshot of tp->delivered_ce that 6.1's tcp_rate.c keeps.
 * 5.10 keeps neither, so a sample reads no CE there: bbrx3's ECN rule for
 * inflight_hi does not fire, while its per-round ECN signals (ecn_alpha,
 * STARTUP's ECN exit, the lower bounds' cut) read tp->delivered_ce, which
 * 5.10 has.
 */
#ifdef BBRX_HAVE_RS_DELIVERED_CE
static inline s32 bbrx_rs_delivered_ce(const struct rate_sample *rs)
{
	return rs->delivered_ce;
}
#else
static inline s32 bbrx_rs_delivered_ce(const struct rate_sample *rs)
{
	return 0;
}
#endif

/*
 * 5.19 let gso_max_size exceed 64 KB and kept the old limit as
 * GSO_LEGACY_MAX_SIZE (upstream 7c4e983c4f3c, "net: allow gso_max_size to
 * exceed 65536"); before, GSO_MAX_SIZE was that limit.
 */
#ifndef GSO_LEGACY_MAX_SIZE
#define GSO_LEGACY_MAX_SIZE	((unsigned int)GSO_MAX_SIZE)
#endif

/*
 * .cong_control gained (ack, flag) in 6.10 (upstream 57bfc7605ca5, "tcp: add
 * ack and flag to cong_control"); bbrx uses neither, so wrap the 2-argument
 * handler.
 */
#ifdef BBRX_HAVE_CONG_CONTROL_ACK_FLAG
#define BBRX_CONG_CONTROL(fn)	fn##_ack_flag
#define BBRX_DEFINE_CONG_CONTROL_WRAPPER(fn)				\
static void fn##_ack_flag(struct sock *sk, u32 ack, int flag,		\
			  const struct rate_sample *rs)			\
{									\
	fn(sk, rs);							\
}
#else
#define BBRX_CONG_CONTROL(fn)	fn
#define BBRX_DEFINE_CONG_CONTROL_WRAPPER(fn)
#endif

/*
 * 7.1 hands CA_EVENT_TX_START (sending starts with nothing in flight) only
 * to a new op, .cwnd_event_tx_start, and no longer to .cwnd_event
 * (upstream d1e59a469737, "tcp: add cwnd_event_tx_start to
 * tcp_congestion_ops"). The models act on no other event, so they give the
 * kernel one handler, @fn(sk), through whichever op it calls.
 */
#ifdef BBRX_HAVE_CWND_EVENT_TX_START
#define BBRX_TX_START_OP(fn)	.cwnd_event_tx_start = fn
#define BBRX_DEFINE_TX_START_WRAPPER(fn)
#else
#define BBRX_TX_START_OP(fn)	.cwnd_event = fn##_event
#define BBRX_DEFINE_TX_START_WRAPPER(fn)				\
static void fn##_event(struct sock *sk, enum tcp_ca_event event)	\
{									\
	if (event == CA_EVENT_TX_START)					\
		fn(sk);							\
}
#endif

/*
 * Is ECN in use on the connection? Kernels with AccECN (seen in 7.2 and
 * 7.3 headers) replaced the TCP_ECN_OK flag by ECN modes, RFC 3168 or
 * AccECN (tcp_ecn_mode_any()); a CE mark reaches tp->delivered_ce in
 * either mode.
 */
static inline bool bbrx_ecn_ok(const struct tcp_sock *tp)
{
#ifdef BBRX_HAVE_TCP_ECN_MODE
	return tcp_ecn_mode_any(tp);
#else
	return tp->ecn_flags & TCP_ECN_OK;
#endif
}

/*
 * 6.6 added register_net_sysctl_sz() (upstream 3ae6c6bbc8a4) and later
 * kernels stopped needing the empty sentinel entry; our tables keep the
 * sentinel and pass the real count where the size is asked for.
 */
static inline struct ctl_table_header *
bbrx_register_net_sysctl(struct net *net, const char *path,
			 struct ctl_table *table, size_t count)
{
#ifdef BBRX_HAVE_NET_SYSCTL_SZ
	return register_net_sysctl_sz(net, path, table, count);
#else
	return register_net_sysctl(net, path, table);
#endif
}

/*
 * 6.11 made ctl_table handlers take a const table (upstream 78eb4ea25cd5).
 */
#ifdef BBRX_HAVE_CONST_CTL_TABLE
#define BBRX_CTL_TABLE const struct ctl_table
#else
#define BBRX_CTL_TABLE struct ctl_table
#endif

/*
 * 5.11 gave ftrace callbacks a struct ftrace_regs in place of the pt_regs
 * (upstream d19ad0775dcd, "ftrace: Have the callbacks receive a struct
 * ftrace_regs instead of pt_regs"). Older kernels get the type, wrapping
 * the pt_regs ftrace saves for FTRACE_OPS_FL_SAVE_REGS, its accessors, and
 * for each callback a wrapper of the older signature.
 */
#ifdef BBRX_HAVE_FTRACE_REGS
#define BBRX_FTRACE_FUNC(fn)	fn
#define BBRX_DEFINE_FTRACE_WRAPPER(fn)
#else
struct ftrace_regs {
	struct pt_regs regs;
};

static __always_inline struct pt_regs *ftrace_get_regs(struct ftrace_regs *fregs)
{
	return &fregs->regs;
}

static __always_inline void
ftrace_instruction_pointer_set(struct ftrace_regs *fregs, unsigned long ip)
{
	instruction_pointer_set(&fregs->regs, ip);
}

#define BBRX_FTRACE_FUNC(fn)	fn##_pt_regs
#define BBRX_DEFINE_FTRACE_WRAPPER(fn)					\
static void notrace fn##_pt_regs(unsigned long ip,			\
				 unsigned long parent_ip,		\
				 struct ftrace_ops *ops,		\
				 struct pt_regs *regs)			\
{									\
	fn(ip, parent_ip, ops,						\
	   container_of(regs, struct ftrace_regs, regs));		\
}
#endif

/*
 * A hooked function's first argument, from the registers ftrace saved
 * (FTRACE_OPS_FL_SAVE_REGS): rdi on x86-64, x0 on arm64, as the
 * architecture's regs_get_kernel_argument() knows.
 */
static __always_inline unsigned long bbrx_fregs_arg0(struct ftrace_regs *fregs)
{
	return regs_get_kernel_argument(ftrace_get_regs(fregs), 0);
}

/*
 * 6.2 renamed ftrace_instruction_pointer_set() (upstream "ftrace: rename
 * ftrace_instruction_pointer_set() -> ftrace_regs_set_instruction_pointer()",
 * Mark Rutland, Nov 2022); the probe reads include/linux/ftrace.h, whose
 * fallback (for architectures without it) has the name of its time.
 * arm64's 6.1 headers have only that fallback, which does nothing: no
 * hook is installed on arm64 (arm64/verify.c).
 */
static __always_inline void bbrx_fregs_set_ip(struct ftrace_regs *fregs,
					      unsigned long ip)
{
#ifdef BBRX_HAVE_FTRACE_REGS_SET_IP
	ftrace_regs_set_instruction_pointer(fregs, ip);
#else
	ftrace_instruction_pointer_set(fregs, ip);
#endif
}

/*
 * IBT (CONFIG_X86_KERNEL_IBT: not in Debian 6.1, in 6.12) starts functions
 * with ENDBR64 before their ftrace site; the kernel overwrites the ENDBR of
 * functions it seals (never called indirectly) with a 4-byte poison NOP
 * (seen on 6.12's kallsyms_lookup_name under QEMU). The kernel's test of an
 * instruction word accepts both: is_endbr(u32) until the kernel made
 * is_endbr() take a pointer, out of line and unexported, and kept the
 * word test inline as __is_endbr(u32) (seen in 7.2 and 7.3 headers).
 */
static inline bool bbrx_is_endbr(u32 insn)
{
#ifndef CONFIG_X86_KERNEL_IBT
	return false;	/* no ENDBR64 to find (arm64, x86 without IBT) */
#elif defined(BBRX_HAVE___IS_ENDBR)
	return __is_endbr(insn);
#else
	return is_endbr(insn);
#endif
}

static inline size_t bbrx_endbr_len(unsigned long func)
{
	u32 insn;

	if (!IS_ENABLED(CONFIG_X86_KERNEL_IBT) ||
	    copy_from_kernel_nofault(&insn, (void *)func, sizeof(insn)))
		return 0;
	return bbrx_is_endbr(insn) ? sizeof(insn) : 0;
}

/*
 * A function's start from a kprobe registered at its entry: kprobes put
 * such a probe after the ENDBR (arch_adjust_kprobe_addr()).
 */
static inline unsigned long bbrx_kprobe_func_start(unsigned long kp_addr)
{
	return bbrx_endbr_len(kp_addr - 4) ? kp_addr - 4 : kp_addr;
}

/*
 * Where IBT is enforced (the kernel's and the CPU's), an indirect call must
 * land on a live ENDBR64; a sealed (poisoned) function must not be called
 * through a pointer.
 */
static inline bool bbrx_indirect_call_ok(unsigned long addr)
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

/*
 * Bytes before a function that a direct call may land in instead of the
 * function itself: with call depth tracking (CONFIG_CALL_THUNKS, 6.2+) the
 * kernel moves calls to an accounting thunk in the function's padding
 * (CONFIG_FUNCTION_PADDING_BYTES) when retbleed=stuff is in force.
 */
#ifdef CONFIG_CALL_THUNKS
#define BBRX_CALL_PAD	CONFIG_FUNCTION_PADDING_BYTES
#else
#define BBRX_CALL_PAD	0
#endif

/*
 * Bytes the application read in the last receive RTT, as
 * tcp_rcv_space_adjust() counts them. 6.6 moved receive-buffer sizing to
 * the measured scaling_ratio (tcp_space_from_win(), upstream "tcp: add
 * scaling_ratio to tcp_sock" and follow-ups); Debian's 6.12 (6.12.117) also
 * subtracts what still waits in the receive queue, in a signed int. Both
 * come with the header probe BBRX_HAVE_TCP_SPACE_FROM_WIN; a 6.6+ build
 * without the subtraction would differ from bbrx's mode 1 there: the
 * rcvbuf_grow verifier refuses it (no read of rcv_nxt), and a build
 * without the probe that reads rcv_nxt. 6.1 counts in a u32, 6.12 in an
 * int: the s64 keeps either value.
 */
static inline s64 bbrx_rcvq_copied(const struct tcp_sock *tp)
{
#ifdef BBRX_HAVE_TCP_SPACE_FROM_WIN
	int copied = tp->copied_seq - tp->rcvq_space.seq;

	return copied - (int)(tp->rcv_nxt - tp->copied_seq);
#else
	return (u32)(tp->copied_seq - tp->rcvq_space.seq);
#endif
}

/*
 * Where the receive buffer grows. Through 6.12 tcp_rcv_space_adjust()
 * measures and grows, and bbrx's rcvbuf_grow replaces it whole. 7.x moved
 * the growth into the exported tcp_rcvbuf_grow(sk, newval), called from
 * tcp_rcv_space_adjust() and from tcp_data_queue_ofo(), with rules of its
 * own (rcvwin = 2 * newval, tcp_rcvbuf_low_rtt, the out-of-order span):
 * there bbrx replaces tcp_rcvbuf_grow(), so both callers are covered.
 */
#ifdef BBRX_HAVE_TCP_RCVBUF_GROW
#define BBRX_RCVBUF_GROW_SYMBOL "tcp_rcvbuf_grow"
#else
#define BBRX_RCVBUF_GROW_SYMBOL "tcp_rcv_space_adjust"
#endif

/*
 * bbrx's tcp_rcvbuf_grow() follows the rule of the kernels that have
 * tcp_rcvbuf_low_rtt (7.2, 7.3); a tcp_rcvbuf_grow() without it has
 * another rule, which the replacement would change.
 *
 * Return: why the rcvbuf_grow redirect does not fit this kernel (short:
 * the hook's reason holds 95 characters), or NULL.
 */
static inline const char *bbrx_rcvbuf_grow_misfit(void)
{
#if defined(BBRX_HAVE_TCP_RCVBUF_GROW) && !defined(BBRX_HAVE_TCP_RCVBUF_LOW_RTT)
	return "tcp_rcvbuf_grow() without tcp_rcvbuf_low_rtt: its rule is not bbrx's";
#else
	return NULL;
#endif
}

/* net.ipv4.tcp_rcvbuf_low_rtt, microseconds; 0 where the kernel has none. */
static inline u32 bbrx_rcvbuf_low_rtt(const struct net *net)
{
#ifdef BBRX_HAVE_TCP_RCVBUF_LOW_RTT
	return READ_ONCE(net->ipv4.sysctl_tcp_rcvbuf_low_rtt);
#else
	return 0;
#endif
}

#endif /* _BBRX_COMPAT_H */
