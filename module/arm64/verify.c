// SPDX-License-Identifier: GPL-2.0
/*
 * The hook verifiers on arm64: not written yet, so each one refuses its
 * hook with the same reason, which /proc/net/bbrx_hooks and dmesg show.
 * Both congestion controls, the sysctls, the counters and the trace events
 * do not depend on the hooks and work as on x86-64. The x86-64 verifiers
 * (module/x86/) decode x86 instructions; arm64 needs its own reading of
 * fixed 4-byte instructions, PC-relative immediates and its entry forms
 * (BTI, PAC, patchable NOPs) before any hook may be installed here.
 */
#include <linux/errno.h>
#include <linux/kernel.h>
#include <linux/moduleparam.h>
#include <asm/ptrace.h>

#include "hook.h"

/* What every hook's status says on arm64. */
#define BBRX_ARM64_REASON	"arm64: verifier not implemented"

static bool bbrx_verify_selftest_on;
module_param_named(verify_selftest, bbrx_verify_selftest_on, bool, 0444);
MODULE_PARM_DESC(verify_selftest,
		 "Test only: check the verifiers' decoding against known code at load (x86-64; arm64 has no verifier)");

/**
 * bbrx_verify_init() - find what the verifiers call in the kernel
 *
 * arm64's verifiers need nothing yet; says once that every hook will be
 * refused.
 */
void bbrx_verify_init(void)
{
	pr_info("bbrx: %s: every hook is refused; bbrx and bbrx3 work without them\n",
		BBRX_ARM64_REASON);
}

static int bbrx_arm64_refuse(char *reason, size_t len)
{
	snprintf(reason, len, "%s", BBRX_ARM64_REASON);
	return -EOPNOTSUPP;
}

/**
 * bbrx_autocork_verify() - refuse the autocork hook on arm64
 * @addr: address of tcp_push (unused)
 * @reason: set to "arm64: verifier not implemented"
 * @len: size of @reason
 *
 * Return: -EOPNOTSUPP.
 */
int bbrx_autocork_verify(unsigned long addr, char *reason, size_t len)
{
	return bbrx_arm64_refuse(reason, len);
}

/**
 * bbrx_tsq_verify() - refuse the TSQ hook on arm64
 * @addr: address of tcp_small_queue_check's clone (unused)
 * @reason: set to "arm64: verifier not implemented"
 * @len: size of @reason
 *
 * Return: -EOPNOTSUPP.
 */
int bbrx_tsq_verify(unsigned long addr, char *reason, size_t len)
{
	return bbrx_arm64_refuse(reason, len);
}

/**
 * bbrx_rcvbuf_verify() - refuse the rcvbuf hook on arm64
 * @addr: address of tcp_init_transfer (unused)
 * @reason: set to "arm64: verifier not implemented"
 * @len: size of @reason
 *
 * Return: -EOPNOTSUPP.
 */
int bbrx_rcvbuf_verify(unsigned long addr, char *reason, size_t len)
{
	return bbrx_arm64_refuse(reason, len);
}

/**
 * bbrx_rcvbuf_grow_verify() - refuse the rcvbuf_grow hook on arm64
 * @addr: address of the growth function (unused)
 * @reason: set to "arm64: verifier not implemented"
 * @len: size of @reason
 *
 * Return: -EOPNOTSUPP.
 */
int bbrx_rcvbuf_grow_verify(unsigned long addr, char *reason, size_t len)
{
	return bbrx_arm64_refuse(reason, len);
}

/**
 * bbrx_delack_verify() - refuse the delack hook on arm64
 * @addr: address of tcp_measure_rcv_mss or its caller (unused)
 * @reason: set to "arm64: verifier not implemented"
 * @len: size of @reason
 *
 * Return: -EOPNOTSUPP.
 */
int bbrx_delack_verify(unsigned long addr, char *reason, size_t len)
{
	return bbrx_arm64_refuse(reason, len);
}

/**
 * bbrx_hook_calls_check() - refuse: no decoder proves a replacement safe
 * @addr: the replacement (unused)
 * @fault: fault_calls= (unused)
 * @reason: set to "arm64: verifier not implemented"
 * @rlen: size of @reason
 *
 * Return: -EOPNOTSUPP.
 */
int bbrx_hook_calls_check(unsigned long addr, bool fault, char *reason,
			  size_t rlen)
{
	return bbrx_arm64_refuse(reason, rlen);
}

/**
 * bbrx_verify_selftest() - say that arm64 has no decoding to test
 */
void bbrx_verify_selftest(void)
{
	if (bbrx_verify_selftest_on)
		pr_info("bbrx: verify_selftest: %s, nothing to test\n",
			BBRX_ARM64_REASON);
}

/**
 * bbrx_insn_reg_value() - a register of a kprobe's saved set
 * @regs: the registers at the probed instruction
 * @reg: x0-x30 by number
 *
 * Return: the register's content (0 for an invalid @reg).
 */
unsigned long bbrx_insn_reg_value(const struct pt_regs *regs, int reg)
{
	return reg >= 0 && reg < ARRAY_SIZE(regs->regs) ? regs->regs[reg] : 0;
}
