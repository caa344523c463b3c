// SPDX-License-Identifier: GPL-2.0
/*
 * What the x86-64 hook verifiers read kernel text with, and the checks
 * every hook shares: the kernel's x86 instruction decoder found at load,
 * byte-pattern and ftrace-site checks, ModRM register helpers, a walk over
 * a function's instructions, the sole-entry check of one instruction and
 * the check that a redirect's replacement cannot block
 * (bbrx_hook_calls_check()). Each hook's verifier beside this file
 * (autocork_verify.c, tsq_verify.c, rcvbuf_verify.c, delack_verify.c)
 * proves with these the shape its handler in module/ depends on;
 * hook_install.c installs what they accept. Nothing here installs or
 * changes anything.
 */
#include <linux/kallsyms.h>
#include <linux/kprobes.h>
#include <linux/module.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <asm/insn.h>

#include "bbrx.h"
#include "compat.h"
#include "hook.h"
#include "verify.h"

/* For bbrx_hook_walk(): the kernel's own decoder and symbol sizes. */
static int (*bbrx_insn_decode)(struct insn *insn, const void *kaddr,
			       int buf_len, enum insn_mode m);
static int (*bbrx_kallsyms_size)(unsigned long addr, unsigned long *symbolsize,
				 unsigned long *offset);

/*
 * Kernel functions a redirect's replacement may call (bbrx_hook_calls_check()),
 * none of which can block, on PREEMPT_RT either:
 *   __rcu_read_lock, __rcu_read_unlock  preemptible RCU's read side (a
 *	per-task counter; the unlock's slow path takes raw spinlocks only)
 *   ktime_get                          a seqcount retry loop, no lock
 *   rcu_is_watching                    reads a per-cpu counter
 * on debug kernels also the instrumentation the compiler adds to our code,
 * none of which sleeps (make check-debug):
 *   lockdep (PROVE_LOCKING/PROVE_RCU): debug_lockdep_rcu_enabled,
 *	lock_acquire, lock_release, rcu_read_lock_held, lockdep_rcu_suspicious
 *	(irqs off, lockdep's raw lock)
 *   KASAN: __kasan_check_read/write and __asan_report_*_noabort (a shadow
 *	lookup; a report prints under a raw spinlock and returns)
 * and module functions (bbrx_stats_late(), helpers the compiler did not
 * inline), which are decoded and checked in turn, except bbrx_trace_hook():
 * it only fires a tracepoint, through a const table of the events'
 * inline wrappers (an indirect call), whose probes run with preemption
 * disabled and whose call site the kernel re-targets at run time
 * (trace.c).
 */
static const char * const bbrx_leaf_calls[] = {
	"__rcu_read_lock", "__rcu_read_unlock", "ktime_get", "rcu_is_watching",
	"debug_lockdep_rcu_enabled", "lock_acquire", "lock_release",
	"rcu_read_lock_held", "lockdep_rcu_suspicious",
#ifndef CONFIG_RCU_STRICT_GRACE_PERIOD
	/*
	 * 5.10's rcu_read_unlock() without PREEMPT_RCU: returns at once.
	 * With the debug option it reports a quiescent state, which could
	 * let unload pass a CPU still in the replacement: not a leaf there.
	 */
	"rcu_read_unlock_strict",
#endif
	"__kasan_check_read", "__kasan_check_write",
	"__asan_report_load1_noabort", "__asan_report_load2_noabort",
	"__asan_report_load4_noabort", "__asan_report_load8_noabort",
	"__asan_report_load16_noabort", "__asan_report_load_n_noabort",
	"__asan_report_store1_noabort", "__asan_report_store2_noabort",
	"__asan_report_store4_noabort", "__asan_report_store8_noabort",
	"__asan_report_store16_noabort", "__asan_report_store_n_noabort",
};

static unsigned long bbrx_leaf_addr[ARRAY_SIZE(bbrx_leaf_calls)];

/**
 * bbrx_verify_init() - find what the x86-64 verifiers call in the kernel
 *
 * The kernel's instruction decoder insn_decode(), the symbol sizes and the
 * addresses of bbrx_leaf_calls[]; a helper whose part is missing refuses
 * with its reason. After the resolver is set up; process context.
 */
void bbrx_verify_init(void)
{
	int i;

	BUILD_BUG_ON(!__same_type(&insn_decode, bbrx_insn_decode));
	BUILD_BUG_ON(!__same_type(&kallsyms_lookup_size_offset,
				  bbrx_kallsyms_size));
	bbrx_insn_decode = (void *)bbrx_hook_resolve("insn_decode");
	if (bbrx_insn_decode && !bbrx_indirect_call_ok((unsigned long)bbrx_insn_decode))
		bbrx_insn_decode = NULL;
	bbrx_kallsyms_size = (void *)bbrx_hook_resolve("kallsyms_lookup_size_offset");
	if (bbrx_kallsyms_size && !bbrx_indirect_call_ok((unsigned long)bbrx_kallsyms_size))
		bbrx_kallsyms_size = NULL;

	for (i = 0; i < ARRAY_SIZE(bbrx_leaf_calls); i++)
		bbrx_leaf_addr[i] = bbrx_hook_resolve(bbrx_leaf_calls[i]);
}

/**
 * bbrx_hook_find() - find a byte pattern in kernel text
 * @addr: function address
 * @start: first offset searched, bytes
 * @end: offset where the search stops (the pattern lies before it), bytes
 * @pat: expected bytes
 * @len: pattern length, at most 32
 * @fault: expect a deliberately wrong pattern (fault_verify)
 *
 * For verifiers that must find one instruction in a function whose layout
 * varies between builds (the PSH branch of an inlined helper, for example).
 *
 * Return: the offset of the only occurrence, -ENOENT if none, -E2BIG if more
 * than one (the hook cannot know which one it would act on), -EFAULT if the
 * text is unreadable.
 */
long bbrx_hook_find(unsigned long addr, size_t start, size_t end,
		    const u8 *pat, size_t len, bool fault)
{
	u8 text[64];
	long found = -ENOENT;
	size_t off, i;

	if (WARN_ON_ONCE(len > 32 || !len))
		return -EINVAL;
	if (fault)
		return -ENOENT;	/* what a different build would show */
	/* Windows of 64 bytes overlapping by len - 1. */
	for (off = start; off + len <= end; off += sizeof(text) - (len - 1)) {
		size_t n = min(sizeof(text), end - off);

		if (copy_from_kernel_nofault(text, (void *)(addr + off), n))
			return -EFAULT;
		for (i = 0; i + len <= n; i++) {
			if (memcmp(text + i, pat, len))
				continue;
			if (found >= 0 && found != off + i)
				return -E2BIG;
			found = off + i;
		}
	}
	return found;
}

#define BBRX_FTRACE_NOP_LEN	5

/*
 * Is @p the 5-byte NOP ftrace writes over a function's site? 0f 1f 44 00 00
 * since 5.15 (upstream "x86: Remove dynamic NOP selection"); 5.10 picks its
 * NOP per CPU at boot, 66 66 66 66 90 (K8) on QEMU's default CPU, and
 * writes the same over jump labels.
 */
static bool bbrx_ftrace_nop(const u8 *p)
{
	static const u8 p6[BBRX_FTRACE_NOP_LEN] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };
	static const u8 k8[BBRX_FTRACE_NOP_LEN] = { 0x66, 0x66, 0x66, 0x66, 0x90 };

	return !memcmp(p, p6, sizeof(p6)) || !memcmp(p, k8, sizeof(k8));
}

/**
 * bbrx_hook_fentry() - does a function start with its ftrace site?
 * @addr: function address
 * @fault: expect a deliberately wrong pattern (fault_verify)
 * @reason: set to why not
 * @rlen: size of @reason
 *
 * The site (after ENDBR64 on IBT kernels) is "call __fentry__" while traced
 * and the 5-byte NOP ftrace writes over it otherwise (bbrx_ftrace_nop());
 * either means the compiler kept the function whole (not a clone with
 * another ABI) and ftrace manages its entry.
 *
 * Return: 0, or -ENOEXEC (-EFAULT if unreadable) with @reason.
 */
int bbrx_hook_fentry(unsigned long addr, bool fault, char *reason,
		     size_t rlen)
{
	u8 text[BBRX_FTRACE_NOP_LEN];

	addr += bbrx_endbr_len(addr);
	if (copy_from_kernel_nofault(text, (void *)addr, sizeof(text))) {
		snprintf(reason, rlen, "entry unreadable");
		return -EFAULT;
	}
	if (fault)
		text[0] ^= 0xff;
	if (text[0] == 0xe8 || bbrx_ftrace_nop(text))
		return 0;
	snprintf(reason, rlen, "no ftrace site at entry (%*ph)",
		 (int)sizeof(text), text);
	return -ENOEXEC;
}

static u8 bbrx_insn_rex(const struct insn *insn)
{
	return insn->rex_prefix.nbytes == 1 ? insn->rex_prefix.bytes[0] : 0;
}

/**
 * bbrx_insn_plain() - an instruction the register helpers describe fully?
 * @insn: a decoded instruction
 *
 * Legacy prefixes (segment, operand or address size, lock, rep), VEX/EVEX
 * and REX2 change what the ModRM fields mean (another segment, 16-bit
 * operands, registers 16-31): a verifier treats such an instruction as
 * unknown.
 *
 * Return: true with at most a one-byte REX prefix.
 */
bool bbrx_insn_plain(const struct insn *insn)
{
	return !insn->prefixes.nbytes && !insn->vex_prefix.nbytes &&
	       insn->rex_prefix.nbytes <= 1;
}

/**
 * bbrx_insn_reg() - the register in an instruction's ModRM reg field
 * @insn: a decoded instruction with a ModRM byte
 *
 * Return: 0-15 in x86 numbering (rax 0 .. rdi 7, r8 8 .. r15 15), REX.R
 * included.
 */
int bbrx_insn_reg(const struct insn *insn)
{
	return X86_MODRM_REG(insn->modrm.value) +
	       (X86_REX_R(bbrx_insn_rex(insn)) ? 8 : 0);
}

/**
 * bbrx_insn_rm() - the register in an instruction's ModRM rm field
 * @insn: a decoded instruction with a ModRM byte, mod 3 (register form)
 *
 * Return: 0-15, REX.B included.
 */
int bbrx_insn_rm(const struct insn *insn)
{
	return X86_MODRM_RM(insn->modrm.value) +
	       (X86_REX_B(bbrx_insn_rex(insn)) ? 8 : 0);
}

/**
 * bbrx_insn_wide() - does the instruction operate on 64 bits (REX.W)?
 * @insn: a decoded instruction
 *
 * Return: true with REX.W.
 */
bool bbrx_insn_wide(const struct insn *insn)
{
	return X86_REX_W(bbrx_insn_rex(insn));
}

/**
 * bbrx_insn_mem_base() - the base register of a "disp(%reg)" operand
 * @insn: a decoded instruction with a ModRM byte
 *
 * Only the form a field access takes: a base register and an 8- or 32-bit
 * displacement (insn->displacement), no index, not RIP-relative; the SIB
 * byte %rsp and %r12 need is allowed when it names no index.
 *
 * Return: 0-15, or -1 for any other operand.
 */
int bbrx_insn_mem_base(const struct insn *insn)
{
	const u8 mod = X86_MODRM_MOD(insn->modrm.value);
	const u8 rex = bbrx_insn_rex(insn);
	u8 base = X86_MODRM_RM(insn->modrm.value);

	if (mod != 1 && mod != 2)
		return -1;
	if (base == 4) {
		u8 sib = insn->sib.value;

		/* index 4 without REX.X means none */
		if (X86_SIB_INDEX(sib) != 4 || X86_REX_X(rex))
			return -1;
		base = X86_SIB_BASE(sib);
	}
	return base + (X86_REX_B(rex) ? 8 : 0);
}

/**
 * bbrx_insn_reg_name() - a register's AT&T name, for refusal reasons
 * @reg: 0-15
 *
 * Return: "rax" .. "r15", or "?" out of range.
 */
const char *bbrx_insn_reg_name(int reg)
{
	static const char * const names[] = {
		"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
		"r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
	};

	return reg >= 0 && reg < ARRAY_SIZE(names) ? names[reg] : "?";
}

/**
 * bbrx_insn_reg_value() - a register's value in a kprobe's saved registers
 * @regs: the registers at the probed instruction
 * @reg: 0-15, as a verifier found it with the helpers above
 *
 * Return: the register's content (0 for an invalid @reg).
 */
unsigned long bbrx_insn_reg_value(const struct pt_regs *regs, int reg)
{
	switch (reg) {
	case 0: return regs->ax;
	case 1: return regs->cx;
	case 2: return regs->dx;
	case 3: return regs->bx;
	case 4: return regs->sp;
	case 5: return regs->bp;
	case 6: return regs->si;
	case 7: return regs->di;
	case 8: return regs->r8;
	case 9: return regs->r9;
	case 10: return regs->r10;
	case 11: return regs->r11;
	case 12: return regs->r12;
	case 13: return regs->r13;
	case 14: return regs->r14;
	case 15: return regs->r15;
	}
	return 0;
}

/**
 * bbrx_hook_walk_buf() - decode a run of instructions, one by one
 * @buf: the instructions (kernel text, or a copy)
 * @size: bytes to decode
 * @fn: called for each instruction with its offset in bytes; a non-zero
 *	return stops the walk
 * @ctx: passed to @fn
 * @reason: set to why the walk failed
 * @rlen: size of @reason
 *
 * Decodes with the kernel's own insn_decode(), so a verifier can look for
 * what instructions do (operands, registers) rather than for their bytes,
 * which the compiler's register choice changes between builds.
 *
 * Return: 0 after the last instruction, @fn's non-zero return, -ENOENT
 * without the decoder, -ENOEXEC when the bytes do not decode (@reason set
 * for both).
 */
int bbrx_hook_walk_buf(const u8 *buf, size_t size,
		       int (*fn)(const struct insn *insn, size_t off, void *ctx),
		       void *ctx, char *reason, size_t rlen)
{
	size_t pos;
	int ret;

	if (!bbrx_insn_decode) {
		snprintf(reason, rlen, "insn_decode not found");
		return -ENOENT;
	}
	for (pos = 0; pos < size; ) {
		struct insn insn;

		if (bbrx_insn_decode(&insn, buf + pos,
				     min_t(size_t, MAX_INSN_SIZE, size - pos),
				     INSN_MODE_KERN) < 0 || !insn.length) {
			snprintf(reason, rlen, "text at +%#zx does not decode", pos);
			return -ENOEXEC;
		}
		ret = fn(&insn, pos, ctx);
		if (ret)
			return ret;
		pos += insn.length;
	}
	return 0;
}

/**
 * bbrx_hook_sized_entry() - a hook target's ftrace site and its size
 * @addr: the function's address
 * @size: set to the function's size in bytes (kallsyms)
 * @reason: buffer for why the target is refused
 * @rlen: size of @reason
 *
 * The first two steps of a verifier that walks a whole body:
 * bbrx_hook_fentry() without a fault, then bbrx_hook_func_size().
 *
 * Return: 0, bbrx_hook_fentry()'s error, or -ENOENT with @reason when the
 * size is unknown.
 */
int bbrx_hook_sized_entry(unsigned long addr, size_t *size, char *reason,
			  size_t rlen)
{
	int err = bbrx_hook_fentry(addr, false, reason, rlen);

	if (err)
		return err;
	*size = bbrx_hook_func_size(addr);
	if (!*size) {
		snprintf(reason, rlen, "the function's size not found");
		return -ENOENT;
	}
	return 0;
}

/**
 * bbrx_hook_func_size() - a kernel function's size
 * @addr: the function's address
 *
 * Return: its size in bytes from kallsyms, 0 when unknown or when @addr is
 * not the start of a symbol.
 */
size_t bbrx_hook_func_size(unsigned long addr)
{
	unsigned long size, soff;

	if (!bbrx_kallsyms_size || !bbrx_kallsyms_size(addr, &size, &soff) ||
	    soff)
		return 0;
	return size;
}

/**
 * bbrx_hook_walk() - decode a whole kernel function, instruction by instruction
 * @addr: function address (its size from bbrx_hook_func_size())
 * @fn: as for bbrx_hook_walk_buf()
 * @ctx: passed to @fn
 * @reason: set to why the walk failed
 * @rlen: size of @reason
 *
 * Return: as bbrx_hook_walk_buf(); -ENOENT also when the size is unknown.
 */
int bbrx_hook_walk(unsigned long addr,
		   int (*fn)(const struct insn *insn, size_t off, void *ctx),
		   void *ctx, char *reason, size_t rlen)
{
	size_t size = bbrx_hook_func_size(addr);

	if (!size) {
		snprintf(reason, rlen, "the function size not found");
		return -ENOENT;
	}
	return bbrx_hook_walk_buf((const u8 *)addr, size, fn, ctx, reason, rlen);
}

/* Is this a relative branch (jcc, jmp, loop/jcxz)? */
static bool bbrx_insn_rel_branch(const struct insn *insn)
{
	const u8 op = insn->opcode.bytes[0];

	return (op >= 0x70 && op <= 0x7f) || (op >= 0xe0 && op <= 0xe3) ||
	       op == 0xe9 || op == 0xeb ||
	       (op == 0x0f && insn->opcode.nbytes == 2 &&
		(insn->opcode.bytes[1] & 0xf0) == 0x80);
}

/* Relative branch (jcc, jmp, loop/jcxz): its target offset, else -1. */
static long bbrx_insn_branch_target(const struct insn *insn, size_t off)
{
	if (!bbrx_insn_rel_branch(insn))
		return -1;
	return off + insn->length + insn->immediate.value;
}

/* Is this a jmp, ret, int3 or ud2, after which control cannot continue? */
static bool bbrx_insn_ends_flow(const struct insn *insn)
{
	const u8 op = insn->opcode.bytes[0];

	return op == 0xe9 || op == 0xeb || op == 0xc3 || op == 0xc2 ||
	       op == 0xcc ||
	       (op == 0x0f && insn->opcode.nbytes == 2 &&
		insn->opcode.bytes[1] == 0x0b);		/* ud2 */
}

/* jmp *r/m (ff /4, /5): a jump table or tail call through a register. */
static bool bbrx_insn_indirect_jmp(const struct insn *insn)
{
	return insn->opcode.bytes[0] == 0xff &&
	       (X86_MODRM_REG(insn->modrm.value) == 4 ||
		X86_MODRM_REG(insn->modrm.value) == 5);
}

/* bbrx_hook_sole_entry()'s walk: the ways into @off seen so far. */
struct bbrx_sole_entry {
	size_t off, from, prev;
	bool prev_ends;
	int n;
	char *reason;
	size_t rlen;
};

static int bbrx_sole_entry_step(const struct insn *insn, size_t pos, void *ctx)
{
	struct bbrx_sole_entry *se = ctx;

	if (bbrx_insn_indirect_jmp(insn)) {
		snprintf(se->reason, se->rlen, "indirect jmp at +%#zx", pos);
		return -ENOEXEC;
	}
	if (pos + insn->length == se->off) {
		se->prev = pos;
		se->prev_ends = bbrx_insn_ends_flow(insn);
	}
	if (bbrx_insn_branch_target(insn, pos) == se->off) {
		if (pos != se->from) {
			snprintf(se->reason, se->rlen,
				 "+%#zx is also reached from +%#zx", se->off, pos);
			return -ENOEXEC;
		}
		se->n++;
	}
	return 0;
}

/**
 * bbrx_hook_sole_entry() - is an instruction reached from one place only?
 * @addr: function address
 * @off: offset of the instruction, bytes
 * @from: offset of the conditional branch that must be its only way in,
 *	bytes: either jumping to @off, or right before it and falling through
 * @reason: set to why not
 * @rlen: size of @reason
 *
 * For a hook that changes what one instruction does for one condition: it
 * must not also change it for another path merged into the same
 * instruction. Decodes the whole function (size from kallsyms) with the
 * kernel's own x86 decoder, insn_decode(), and checks that @off is an
 * instruction boundary, that its ways in (relative branches to it, and
 * falling through from the instruction before unless that is a jmp, ret,
 * int3 or ud2) are exactly one, from @from, and that the function has no
 * indirect jmp (a jump table could reach any instruction).
 *
 * Return: 0; -ENOENT when the decoder or the size cannot be found,
 * -ENOEXEC when the check fails or the text does not decode; @reason says
 * why.
 */
int bbrx_hook_sole_entry(unsigned long addr, size_t off, size_t from,
			 char *reason, size_t rlen)
{
	struct bbrx_sole_entry se = {
		.off = off, .from = from, .reason = reason, .rlen = rlen,
	};
	int err;

	err = bbrx_hook_walk(addr, bbrx_sole_entry_step, &se, reason, rlen);
	if (err)
		return err;
	if (!se.prev) {
		snprintf(reason, rlen, "+%#zx is not an instruction boundary", off);
		return -ENOEXEC;
	}
	/* Falling through from the instruction before is a way in too. */
	if (!se.prev_ends) {
		if (se.prev != from) {
			snprintf(reason, rlen,
				 "+%#zx is also reached by falling through from +%#zx",
				 off, se.prev);
			return -ENOEXEC;
		}
		se.n++;
	}
	if (se.n != 1) {
		snprintf(reason, rlen, "+%#zx is not reached from +%#zx", off, from);
		return -ENOEXEC;
	}
	return 0;
}

/**
 * bbrx_hook_leaf_call() - is a direct call one to a function that cannot block?
 * @target: the call's target
 *
 * For verifiers of kernel text too: the instrumentation of debug kernels
 * (lockdep, KASAN) calls these from functions that call nothing else.
 *
 * Return: true for a function of bbrx_leaf_calls[] (or its call thunk).
 */
bool bbrx_hook_leaf_call(unsigned long target)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(bbrx_leaf_addr); i++)
		if (bbrx_leaf_addr[i] && target <= bbrx_leaf_addr[i] &&
		    bbrx_leaf_addr[i] - target <= BBRX_CALL_PAD)
			return true;
	return false;
}

/**
 * bbrx_hook_ret_thunk() - is a jump target one of the kernel's return thunks?
 * @target: the address a jmp goes to
 *
 * With return-thunk mitigations the compiler ends functions in "jmp
 * __x86_return_thunk", which the kernel may rewrite into a plain ret (or
 * point at another thunk: srso, its, call depth) at boot.
 *
 * Return: true when @target starts a symbol whose name ends in
 * "return_thunk".
 */
bool bbrx_hook_ret_thunk(unsigned long target)
{
	char name[KSYM_SYMBOL_LEN];
	size_t n;

	if (!bbrx_hook_func_size(target))
		return false;
	n = snprintf(name, sizeof(name), "%ps", (void *)target);
	return n >= 12 && n < sizeof(name) &&
	       !strcmp(name + n - 12, "return_thunk");
}

/**
 * bbrx_insn_dest() - the general register an instruction writes
 * @insn: a decoded instruction (calls and prefixes are the caller's)
 *
 * For verifiers that follow which register holds what: the forms gcc
 * emits in the TCP paths bbrx verifies (ALU, mov, lea, movzx/movsx, cmov,
 * setcc, shifts, inc/dec, neg/not, pop, mov $imm), and those that write
 * none (cmp, test, stores, push, branches, nops, int3, ud2).
 *
 * Return: 0-15, -1 when it writes no general register, -3 for mul and
 * div (%rax and %rdx), -2 for an instruction this list does not describe.
 */
int bbrx_insn_dest(const struct insn *insn)
{
	const u8 op = insn->opcode.bytes[0], op2 = insn->opcode.bytes[1];
	const u8 ext = X86_MODRM_REG(insn->modrm.value);
	const bool reg = insn->modrm.nbytes && X86_MODRM_MOD(insn->modrm.value) == 3;
	const int rm = reg ? bbrx_insn_rm(insn) : -1;
	const int rexb = X86_REX_B(bbrx_insn_rex(insn)) ? 8 : 0;

	if (insn->opcode.nbytes == 2 && op == 0x0f) {
		if (op2 == 0x1e || op2 == 0x1f || op2 == 0x0b ||	/* nop, ud2 */
		    (op2 >= 0x80 && op2 <= 0x8f) || op2 == 0xa3)	/* jcc, bt */
			return -1;
		if ((op2 >= 0x40 && op2 <= 0x4f) || op2 == 0xaf ||	/* cmov, imul */
		    (op2 & 0xf6) == 0xb6)				/* movzx/movsx */
			return bbrx_insn_reg(insn);
		if (op2 >= 0x90 && op2 <= 0x9f)				/* setcc */
			return rm;
		return -2;
	}
	if (insn->opcode.nbytes != 1)
		return -2;
	if (op < 0x40 && (op & 7) < 4) {		/* add .. cmp, ModRM forms */
		if ((op & 0x38) == 0x38)
			return -1;			/* cmp */
		return op & 2 ? bbrx_insn_reg(insn) : rm;
	}
	if (op < 0x40 && (op & 7) < 6)			/* op $imm,%al/%eax */
		return (op & 0x38) == 0x38 ? -1 : 0;
	if (op >= 0x50 && op <= 0x57)
		return -1;				/* push */
	if (op >= 0x58 && op <= 0x5f)
		return (op & 7) + rexb;			/* pop */
	if (op >= 0xb0 && op <= 0xbf)
		return (op & 7) + rexb;			/* mov $imm,%reg */
	if ((op >= 0x70 && op <= 0x7f) || op == 0xe8 || op == 0xe9 ||
	    op == 0xeb || op == 0xc3 || op == 0xcc || op == 0x90 ||
	    op == 0x84 || op == 0x85 || op == 0xa8 || op == 0xa9)
		return -1;		/* branches, ret, int3, nop, test */
	switch (op) {
	case 0x63: case 0x8a: case 0x8b: case 0x8d:	/* movsxd, mov, lea */
		return bbrx_insn_reg(insn);
	case 0x88: case 0x89: case 0xc6: case 0xc7:	/* mov */
	case 0xc0: case 0xc1: case 0xd0: case 0xd1:	/* shifts */
	case 0xd2: case 0xd3:
		return rm;
	case 0x80: case 0x81: case 0x83:		/* op $imm,r/m */
		return ext == 7 ? -1 : rm;
	case 0xf6: case 0xf7:		/* test, not, neg; mul, div */
		return ext < 2 ? -1 : ext < 4 ? rm : -3;
	case 0xfe: case 0xff:		/* inc, dec; push; call, jmp: -2 */
		return ext < 2 ? rm : ext == 6 ? -1 : -2;
	case 0x98:
		return 0;			/* cltq */
	case 0x99:
		return 2;			/* cltd: %edx */
	}
	return -2;
}

/**
 * bbrx_insn_prefix() - has an instruction this legacy prefix?
 * @insn: a decoded instruction
 * @byte: the prefix (0xf0 lock, 0x65 %gs, ...)
 *
 * Return: true when @byte is among its prefixes.
 */
bool bbrx_insn_prefix(const struct insn *insn, u8 byte)
{
	int i;

	for (i = 0; i < insn->prefixes.nbytes; i++)
		if (insn->prefixes.bytes[i] == byte)
			return true;
	return false;
}

/**
 * bbrx_body_store() - does an instruction only write its memory operand?
 * @insn: a decoded instruction with a memory operand
 *
 * Return: true for mov to memory (88, 89, c6, c7).
 */
bool bbrx_body_store(const struct insn *insn)
{
	const u8 op = insn->opcode.bytes[0];

	return insn->opcode.nbytes == 1 &&
	       (op == 0x88 || op == 0x89 || op == 0xc6 || op == 0xc7);
}

/**
 * bbrx_body_lock() - has an instruction a lock prefix?
 * @insn: a decoded instruction
 *
 * Return: true with 0xf0 among its prefixes.
 */
bool bbrx_body_lock(const struct insn *insn)
{
	return bbrx_insn_prefix(insn, 0xf0);
}

/**
 * bbrx_body_named() - does a call or jump target start a symbol so named?
 * @target: the address
 * @prefix: the start of the name
 *
 * Return: true when @target is the start of a symbol whose name begins
 * with @prefix.
 */
bool bbrx_body_named(unsigned long target, const char *prefix)
{
	char name[KSYM_SYMBOL_LEN];

	if (!bbrx_hook_func_size(target))
		return false;
	snprintf(name, sizeof(name), "%ps", (void *)target);
	return !strncmp(name, prefix, strlen(prefix));
}

static int bbrx_body_refuse(struct bbrx_body *b, size_t off,
			    const struct insn *insn, const char *what)
{
	snprintf(b->reason, b->len, "%s+%#zx (%*ph) %s", b->spec->fn, off,
		 insn->length, b->text + off, what);
	return -EPERM;
}

/* Caller-saved registers: a call may change them. */
#define BBRX_CLOBBERED	(BIT(0) | BIT(1) | BIT(2) | BIT(6) | BIT(7) | \
			 BIT(8) | BIT(9) | BIT(10) | BIT(11))

static void bbrx_body_clobber(struct bbrx_body *b, unsigned long regs)
{
	int i;

	for (i = 0; i < ARRAY_SIZE(b->tag); i++)
		if (regs & BIT(i))
			b->tag[i] = 0;
}

/* Is @tag one whose fields the spec checks? */
static const char *bbrx_body_checked(const struct bbrx_body *b, u8 tag)
{
	return tag && tag < b->spec->ntags ? b->spec->tag_name[tag] : NULL;
}

/* Calls, indirect calls and jumps, branches out of the function. */
static int bbrx_body_flow(struct bbrx_body *b, const struct insn *insn,
			  size_t off)
{
	const u8 op = insn->opcode.bytes[0], ext = X86_MODRM_REG(insn->modrm.value);
	long target = off + insn->length + insn->immediate.value;
	unsigned long abs = b->addr + target;
	char what[96];

	if (op == 0xe8 && insn->opcode.nbytes == 1) {
		if (off == b->site)
			return 0;	/* the ftrace site keeps the arguments */
		if (!bbrx_hook_leaf_call(abs) &&
		    !(b->spec->call_ok && b->spec->call_ok(b, abs, off))) {
			snprintf(what, sizeof(what), "calls %ps", (void *)abs);
			return bbrx_body_refuse(b, off, insn, what);
		}
		bbrx_body_clobber(b, BBRX_CLOBBERED);
		return 0;
	}
	if (op == 0xff && insn->opcode.nbytes == 1 && (ext == 2 || ext == 3)) {
		if (!b->spec->indirect_calls)
			return bbrx_body_refuse(b, off, insn, "is an indirect call");
		bbrx_body_clobber(b, BBRX_CLOBBERED);
		return 0;
	}
	if (op == 0xff && insn->opcode.nbytes == 1 && (ext == 4 || ext == 5))
		return bbrx_body_refuse(b, off, insn, "is an indirect jmp");
	if (!bbrx_insn_rel_branch(insn) ||
	    (target >= 0 && target < (long)b->size))
		return 0;
	if (bbrx_hook_ret_thunk(abs) ||
	    (b->spec->exit_ok && b->spec->exit_ok(b, abs, off)))
		return 0;
	snprintf(what, sizeof(what), "jumps out to %ps", (void *)abs);
	return bbrx_body_refuse(b, off, insn, what);
}

/* A memory operand through a register whose fields the spec checks. */
static int bbrx_body_access(struct bbrx_body *b, const struct insn *insn,
			    size_t off, int base)
{
	const bool gs = bbrx_insn_prefix(insn, 0x65);
	const s32 disp = insn->displacement.value;
	const char *name;
	char what[96];

	if (gs) {
		if (base < 0 || (b->spec->percpu_tag &&
				 b->tag[base] == b->spec->percpu_tag))
			return 0;
		return bbrx_body_refuse(b, off, insn,
					"is a %gs access this verifier does not know");
	}
	name = base < 0 ? NULL : bbrx_body_checked(b, b->tag[base]);
	if (!name)
		return 0;
	if (disp >= 0 && b->spec->field(b, b->tag[base], disp))
		return 0;
	snprintf(what, sizeof(what), "%s %s%c%#x, which bbrx's %s does not",
		 insn->opcode.bytes[0] == 0x8d ? "takes the address of" :
		 bbrx_body_store(insn) ? "writes" : "reads",
		 name, disp < 0 ? '-' : '+', disp < 0 ? -disp : disp,
		 b->spec->fn);
	return bbrx_body_refuse(b, off, insn, what);
}

/*
 * Branches: the tags at an instruction are those every way in agrees on
 * (falling through, forward branches to it); after a jmp or ret, with no
 * forward branch to it (a backward target), the walk keeps what it had.
 */
static bool bbrx_body_merge(struct bbrx_body *b, size_t off)
{
	bool first = b->ended, merged = false;
	int i, r;

	for (i = 0; i < b->npending; ) {
		if (b->pending[i].target != off) {
			i++;
			continue;
		}
		for (r = 0; r < ARRAY_SIZE(b->tag); r++)
			if (first)
				b->tag[r] = b->pending[i].tag[r];
			else if (b->tag[r] != b->pending[i].tag[r])
				b->tag[r] = 0;
		first = false;
		merged = true;
		b->pending[i] = b->pending[--b->npending];
	}
	b->ended = false;
	return merged;
}

/* After a branch: carry the tags to a forward target; note a jmp or ret. */
static void bbrx_body_branch(struct bbrx_body *b, const struct insn *insn,
			     size_t off)
{
	const u8 op = insn->opcode.bytes[0];
	long target = bbrx_insn_branch_target(insn, off);

	if (target > (long)off && target < (long)b->size &&
	    b->npending < BBRX_BODY_PENDING) {
		b->pending[b->npending].target = target;
		memcpy(b->pending[b->npending].tag, b->tag, sizeof(b->tag));
		b->npending++;
	}
	b->ended = insn->opcode.nbytes == 1 &&
		   (op == 0xe9 || op == 0xeb || op == 0xc3 || op == 0xc2);
}

static int bbrx_body_step(const struct insn *insn, size_t off, void *ctx)
{
	struct bbrx_body *b = ctx;
	const u8 op = insn->opcode.bytes[0];
	const bool mem = insn->modrm.nbytes && X86_MODRM_MOD(insn->modrm.value) != 3;
	int i, base = -1, dst, src;
	bool ended = b->ended;
	u8 tag = 0;

	/*
	 * nops (endbr64, padding with prefixes, 5.10's 66 66 66 66 90 at the
	 * ftrace site and at jump labels; 0x90 without REX, as REX.B makes it
	 * xchg %r8) and int3: flow goes on
	 */
	if ((insn->opcode.nbytes == 2 && op == 0x0f &&
	     (insn->opcode.bytes[1] == 0x1e || insn->opcode.bytes[1] == 0x1f)) ||
	    (insn->opcode.nbytes == 1 && op == 0x90 && !insn->rex_prefix.nbytes) ||
	    (op == 0xcc && insn->opcode.nbytes == 1)) {
		if (!bbrx_body_merge(b, off))
			b->ended = ended;
		return 0;
	}
	bbrx_body_merge(b, off);
	/* rep stos (a struct zeroed on the stack): writes %rdi and %rcx */
	if (insn->opcode.nbytes == 1 && (op == 0xaa || op == 0xab) &&
	    bbrx_insn_prefix(insn, 0xf3)) {
		bbrx_body_clobber(b, BIT(1) | BIT(7));
		return 0;
	}
	/* prefixes: lock, %gs (per-cpu data), operand size */
	for (i = 0; i < insn->prefixes.nbytes; i++)
		if (insn->prefixes.bytes[i] != 0xf0 && insn->prefixes.bytes[i] != 0x65 &&
		    insn->prefixes.bytes[i] != 0x66)
			return bbrx_body_refuse(b, off, insn,
						"has a prefix this verifier does not know");
	if (insn->vex_prefix.nbytes || insn->rex_prefix.nbytes > 1)
		return bbrx_body_refuse(b, off, insn, "is not a plain instruction");
	if (bbrx_body_flow(b, insn, off))
		return -EPERM;
	bbrx_body_branch(b, insn, off);
	if (mem)
		base = bbrx_insn_mem_base(insn);
	if (mem && bbrx_body_access(b, insn, off, base))
		return -EPERM;
	if (b->spec->fact)
		b->spec->fact(b, insn, off, base);

	if ((op == 0xe8 || op == 0xff) && insn->opcode.nbytes == 1 &&
	    (op == 0xe8 || X86_MODRM_REG(insn->modrm.value) >= 2))
		return 0;		/* calls: done above */
	dst = bbrx_insn_dest(insn);
	if (dst == -3) {
		bbrx_body_clobber(b, BIT(0) | BIT(2));	/* mul, div */
		return 0;
	}
	if (dst == -2)
		return bbrx_body_refuse(b, off, insn,
					"is an instruction this verifier does not know");
	if (dst < 0)
		return 0;
	/* what the written register holds now */
	if ((op == 0x89 || op == 0x8b) && !mem) {		/* mov %reg,%reg */
		src = op == 0x89 ? bbrx_insn_reg(insn) : bbrx_insn_rm(insn);
		tag = b->tag[src];
		if (!bbrx_insn_wide(insn) && !(b->spec->value_tags & BIT(tag)))
			tag = 0;	/* a 32-bit copy of a pointer */
	} else if (op == 0x8b && base >= 0 && bbrx_insn_wide(insn) &&
		   b->tag[base] && b->spec->load &&
		   insn->displacement.value >= 0) {		/* a load */
		tag = b->spec->load(b, b->tag[base], insn->displacement.value);
	}
	b->tag[dst] = tag;
	return 0;
}

/**
 * bbrx_body_walk() - follow a whole function body against a spec
 * @b: the walk: spec, text, size, address, the ftrace site's offset and
 *	the argument registers' tags set by the caller
 *
 * Decodes every instruction in text order with insn_decode(). Registers
 * keep their tag through moves (a 32-bit move keeps only value tags) and
 * get one from the spec's load rule; any other write clears it, as a call
 * clears the caller-saved ones. Forward branches carry the tags to their
 * target, where they are merged with the way in from the instruction
 * before (a register keeps a tag every way in agrees on); code reached
 * only by a backward branch keeps the tags of the text before it. An
 * access through a register whose tag the walk lost is not checked.
 * Refused, naming the instruction: a memory access through a tagged
 * register to a field the spec does not allow; a %gs access through a
 * register (but the spec's per-cpu tag); a call other than the ftrace
 * site, bbrx_hook_leaf_call() or the spec's call_ok; an indirect jmp, or
 * an indirect call unless the spec allows them; a branch out of the
 * function but to a return thunk or the spec's exit_ok; a prefix other
 * than lock, %gs or operand size; an instruction bbrx_insn_dest() does not
 * describe. The spec's fact callback sees every instruction accepted.
 *
 * Return: 0, or -ENOEXEC (-ENOENT without the decoder) with @b->reason.
 */
int bbrx_body_walk(struct bbrx_body *b)
{
	int err = bbrx_hook_walk_buf(b->text, b->size, bbrx_body_step, b,
				     b->reason, b->len);

	return err == -EPERM ? -ENOEXEC : err;
}

/* A call to bbrx_trace_hook() (or its call-thunk padding)? */
static bool bbrx_trace_call(unsigned long target)
{
	unsigned long fn = (unsigned long)bbrx_trace_hook;

	return target <= fn && fn - target <= BBRX_CALL_PAD;
}

/* Module functions a replacement calls are checked in turn, this deep. */
#define BBRX_CALLS_DEPTH	4

static int bbrx_calls_check(unsigned long addr, int depth, bool fault,
			    char *reason, size_t rlen)
{
	unsigned long size, soff;
	size_t pos, site = bbrx_endbr_len(addr);
	int err;

	if (!bbrx_insn_decode || !bbrx_kallsyms_size ||
	    !bbrx_kallsyms_size(addr, &size, &soff)) {
		snprintf(reason, rlen, "%ps: insn_decode or its size not found",
			 (void *)addr);
		return -ENOENT;
	}
	/* A call into a function's padding (call thunks): the function. */
	if (soff && size - soff <= BBRX_CALL_PAD) {
		addr += size - soff;
		site = bbrx_endbr_len(addr);
		if (!bbrx_kallsyms_size(addr, &size, &soff))
			soff = 1;
	}
	if (soff) {
		snprintf(reason, rlen, "%ps is not a function start", (void *)addr);
		return -ENOEXEC;
	}
	for (pos = 0; pos < size; ) {
		struct insn insn;
		unsigned long target;
		u8 op;

		if (bbrx_insn_decode(&insn, (void *)(addr + pos),
				     min_t(unsigned long, MAX_INSN_SIZE, size - pos),
				     INSN_MODE_KERN) < 0 || !insn.length) {
			snprintf(reason, rlen, "%ps+%#zx does not decode",
				 (void *)addr, pos);
			return -ENOEXEC;
		}
		op = insn.opcode.bytes[0];
		if (op == 0xff && (X86_MODRM_REG(insn.modrm.value) == 2 ||
				   X86_MODRM_REG(insn.modrm.value) == 3)) {
			snprintf(reason, rlen,
				 "%ps+%#zx: indirect call (may block on RT)",
				 (void *)addr, pos);
			return -ENOEXEC;
		}
		if (op == 0xe8 && pos != site) {
			target = addr + pos + insn.length + insn.immediate.value;
			if (!fault && bbrx_trace_call(target)) {
				/* a tracepoint: preemption off (trace.c) */
			} else if (!fault && within_module(target, THIS_MODULE) &&
				   depth < BBRX_CALLS_DEPTH) {
				err = bbrx_calls_check(target, depth + 1, fault,
						       reason, rlen);
				if (err)
					return err;
			} else if (fault || !bbrx_hook_leaf_call(target)) {
				snprintf(reason, rlen,
					 "%ps+%#zx calls %ps (may block on RT)",
					 (void *)addr, pos, (void *)target);
				return -ENOEXEC;
			}
		}
		pos += insn.length;
	}
	return 0;
}

/**
 * bbrx_hook_calls_check() - can a replacement block with its frame live?
 * @addr: the replacement (module text)
 * @fault: test only: allow no call at all, so that the check refuses
 * @reason: set to why not
 * @rlen: size of @reason
 *
 * synchronize_rcu_tasks() counts a blocked task as quiescent, and on
 * PREEMPT_RT every spinlock_t can block: a replacement that called into the
 * kernel's transmit path (qdisc and driver locks) and returned afterwards
 * would leave a return address into module text that rmmod may free.
 * Decodes the replacement's live text (after the kernel applied
 * alternatives, retpolines and call thunks) with insn_decode() and refuses
 * it if it has an indirect call (call *reg, or a call into a retpoline
 * thunk) or a direct call to anything but the kernel functions of
 * bbrx_leaf_calls[] and module functions that pass the same check (up to
 * BBRX_CALLS_DEPTH deep). The compiler ends the autocork replacement with a
 * tail jump to __tcp_push_pending_frames(); this is what proves it. Each
 * function's ftrace site is skipped (a NOP unless someone traces it).
 *
 * Return: 0 if it cannot block with its frame on the stack; -ENOENT when
 * the decoder or a size cannot be found, -ENOEXEC otherwise; @reason says
 * why.
 */
int bbrx_hook_calls_check(unsigned long addr, bool fault, char *reason,
			  size_t rlen)
{
	return bbrx_calls_check(addr, 0, fault, reason, rlen);
}
