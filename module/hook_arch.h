/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the architecture's verifier files give the rest of the module:
 * x86/ on x86-64, arm64/ on arm64 (Kbuild picks the directory). They
 * verify each hook's target (struct bbrx_hook's .verify), check that a
 * redirect's replacement cannot block, test their own decoding
 * (verify_selftest=1) and read a register of a kprobe's saved set by the
 * number their verifier found. A verifier sets, before its hook is
 * installed, the handler state declared last. Included by hook.h.
 */
#ifndef _BBRX_HOOK_ARCH_H
#define _BBRX_HOOK_ARCH_H

#include <linux/types.h>

struct pt_regs;
struct sock;

void bbrx_verify_init(void);
int bbrx_hook_calls_check(unsigned long addr, bool fault, char *reason,
			  size_t rlen);
void bbrx_verify_selftest(void);
unsigned long bbrx_insn_reg_value(const struct pt_regs *regs, int reg);

/*
 * The verifiers of the hook rows: 0 when the target at @addr is the code
 * the hook's handler was written against, else a negative errno and why
 * in @reason (@len bytes).
 */
int bbrx_autocork_verify(unsigned long addr, char *reason, size_t len);
int bbrx_tsq_verify(unsigned long addr, char *reason, size_t len);
int bbrx_rcvbuf_verify(unsigned long addr, char *reason, size_t len);
int bbrx_rcvbuf_grow_verify(unsigned long addr, char *reason, size_t len);
int bbrx_delack_verify(unsigned long addr, char *reason, size_t len);

/* autocork.c: __tcp_push_pending_frames(), not exported */
extern void (*bbrx_push_pending_frames)(struct sock *sk, unsigned int cur_mss,
					int nonagle);
/* tsq.c: the kernel caps every socket, not only unpaced ones (7.x) */
extern bool bbrx_tsq_clamp_all;
/* autocork.c: the kernel's tcp_push() declines EOR skbs (6.1; not 5.10) */
extern bool bbrx_autocork_eor;
/* delack.c: the socket's register at the probed mark, the mark's bytes */
extern int bbrx_delack_reg;
extern int bbrx_delack_len;

#endif /* _BBRX_HOOK_ARCH_H */
