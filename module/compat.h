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
#include <linux/uaccess.h>
#include <net/net_namespace.h>
#include <net/tcp.h>

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
 * The hooks redirect x86-64 functions whose arguments they read from the
 * ftrace registers (SysV ABI: first argument in rdi).
 */
#ifndef CONFIG_X86_64
#error "bbrx hooks support x86-64 only"
#endif

static __always_inline unsigned long bbrx_fregs_arg0(struct ftrace_regs *fregs)
{
	return ftrace_get_regs(fregs)->di;
}

/*
 * With IBT (CONFIG_X86_KERNEL_IBT, not in Debian 6.1) an indirect call must
 * land on ENDBR64, and objtool seals functions never called indirectly; a
 * pointer to such a function must not be called.
 */
static inline bool bbrx_indirect_call_ok(unsigned long addr)
{
#ifdef CONFIG_X86_KERNEL_IBT
	static const u8 endbr64[] = { 0xf3, 0x0f, 0x1e, 0xfa };
	u8 insn[4];

	if (copy_from_kernel_nofault(insn, (void *)addr, sizeof(insn)))
		return false;
	return !memcmp(insn, endbr64, sizeof(insn));
#else
	return true;
#endif
}

#endif /* _BBRX_COMPAT_H */
