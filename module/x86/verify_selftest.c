// SPDX-License-Identifier: GPL-2.0
/*
 * The verifiers' decoding against known code: verify_selftest=1 feeds the
 * TSQ prologue check, the autocork and rcvbuf body walks and the
 * delayed-ACK branch search instruction sequences that the kernels bbrx
 * boots show (6.1, 7.3 with gcc-14, 7.2 with gcc-16, stores reached past an
 * epilogue) and sequences no build shows but a future one could (a call
 * inside the prologue, the socket overwritten, a test of another TCP flag,
 * a tcp_push that reads a field bbrx's does not, a tcp_init_transfer that
 * writes sk_rcvbuf), and prints one line per case and a summary. The real
 * targets of the running kernel are checked at every load; these cases
 * cover the shapes a kernel does not offer. The load goes on whatever the
 * result.
 */
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/string.h>
#include <net/inet_connection_sock.h>
#include <net/tcp.h>
#include <asm/insn.h>

#include "bbrx.h"
#include "hook.h"
#include "verify.h"

static bool bbrx_verify_selftest_on;
module_param_named(verify_selftest, bbrx_verify_selftest_on, bool, 0444);
MODULE_PARM_DESC(verify_selftest,
		 "Test only: check the verifiers' decoding against known code at load, results in dmesg");

/* An instruction sequence under construction; int3 fills the rest. */
struct bbrx_code {
	u8 b[BBRX_TSQ_TEXT];
	size_t n;
};

static void bbrx_code_init(struct bbrx_code *c)
{
	memset(c->b, 0xcc, sizeof(c->b));
	c->n = 0;
}

static void bbrx_code_bytes(struct bbrx_code *c, const u8 *p, size_t len)
{
	if (WARN_ON_ONCE(c->n + len > sizeof(c->b)))
		return;
	memcpy(c->b + c->n, p, len);
	c->n += len;
}

#define BBRX_EMIT(c, ...) do {					\
	static const u8 __b[] = { __VA_ARGS__ };		\
	bbrx_code_bytes(c, __b, sizeof(__b));			\
} while (0)

static void bbrx_code_u32(struct bbrx_code *c, u32 v)
{
	__le32 le = cpu_to_le32(v);

	bbrx_code_bytes(c, (const u8 *)&le, sizeof(le));
}

enum bbrx_tsq_case { TSQ_61, TSQ_73, TSQ_COPY, TSQ_CALL, TSQ_SK_LOST,
		     TSQ_SK_TRUNC, TSQ_CASES };

static const char * const bbrx_tsq_case_name[TSQ_CASES] = {
	[TSQ_61] = "tsq: 6.1 prologue accepted",
	[TSQ_73] = "tsq: 7.3 frame setup (push, sub $imm,%rsp) accepted",
	[TSQ_COPY] = "tsq: sk_pacing_rate loaded through a copy of rdi accepted",
	[TSQ_CALL] = "tsq: a call before the load refused",
	[TSQ_SK_LOST] = "tsq: rdi overwritten before the load refused",
	[TSQ_SK_TRUNC] = "tsq: load through a 32-bit copy of rdi refused",
};

/* What each refused case's reason must say. */
static const char * const bbrx_tsq_case_why[TSQ_CASES] = {
	[TSQ_CALL] = "(e8 00 00 00 00)",
	[TSQ_SK_LOST] = "rdi (sk) overwritten",
	[TSQ_SK_TRUNC] = "before a load of sk_pacing_rate",
};

static void bbrx_tsq_case(struct bbrx_code *c, enum bbrx_tsq_case k, u32 rate)
{
	bbrx_code_init(c);
	switch (k) {
	case TSQ_61:	/* mov %rdi,%rax; mov rate(%rdi),%rdi; add %esi,%esi */
		BBRX_EMIT(c, 0x48, 0x89, 0xf8, 0x48, 0x8b, 0xbf);
		bbrx_code_u32(c, rate);
		BBRX_EMIT(c, 0x01, 0xf6);
		break;
	case TSQ_73:	/* push %r12; lea (%rsi,%rsi,1),%r12d; push %rbp;
			 * mov %edx,%ebp; push %rbx; mov %rdi,%rbx;
			 * sub $0x10,%rsp; movzbl 0x24c(%rdi),%ecx;
			 * mov rate(%rdi),%rax
			 */
		BBRX_EMIT(c, 0x41, 0x54, 0x44, 0x8d, 0x24, 0x36, 0x55, 0x89,
			  0xd5, 0x53, 0x48, 0x89, 0xfb, 0x48, 0x83, 0xec, 0x10,
			  0x0f, 0xb6, 0x8f, 0x4c, 0x02, 0x00, 0x00,
			  0x48, 0x8b, 0x87);
		bbrx_code_u32(c, rate);
		break;
	case TSQ_COPY:	/* sub $0x20,%rsp; mov %rdi,%rbx; mov rate(%rbx),%rax;
			 * lea (%rsi,%rsi,1),%eax
			 */
		BBRX_EMIT(c, 0x48, 0x83, 0xec, 0x20, 0x48, 0x89, 0xfb,
			  0x48, 0x8b, 0x83);
		bbrx_code_u32(c, rate);
		BBRX_EMIT(c, 0x8d, 0x04, 0x36);
		break;
	case TSQ_CALL:	/* sub $0x10,%rsp; call .+5; mov rate(%rdi),%rax */
		BBRX_EMIT(c, 0x48, 0x83, 0xec, 0x10, 0xe8, 0, 0, 0, 0,
			  0x48, 0x8b, 0x87);
		bbrx_code_u32(c, rate);
		BBRX_EMIT(c, 0x01, 0xf6);
		break;
	case TSQ_SK_LOST:	/* mov 8(%rdi),%rdi; mov rate(%rdi),%rax */
		BBRX_EMIT(c, 0x48, 0x8b, 0x7f, 0x08, 0x48, 0x8b, 0x87);
		bbrx_code_u32(c, rate);
		BBRX_EMIT(c, 0x01, 0xf6);
		break;
	case TSQ_SK_TRUNC:	/* mov %edi,%ebx; mov rate(%rbx),%rax; add %esi,%esi */
		BBRX_EMIT(c, 0x89, 0xfb, 0x48, 0x8b, 0x83);
		bbrx_code_u32(c, rate);
		BBRX_EMIT(c, 0x01, 0xf6);
		break;
	case TSQ_CASES:
		break;
	}
}

enum bbrx_delack_case { DA_JE_R12, DA_JE_R8, DA_JNE, DA_FIN, DA_NO_TEST,
			DA_TWO_MARKS, DA_CASES };

static const char * const bbrx_delack_case_name[DA_CASES] = {
	[DA_JE_R12] = "delack: PSH test of %r12 + je past the mark (6.12, 7.3) accepted",
	[DA_JE_R8] = "delack: PSH test of %r8 + je (gcc-16), sk in %r13, accepted",
	[DA_JNE] = "delack: jne to an out-of-line mark (6.1) accepted",
	[DA_FIN] = "delack: a test of FIN, not PSH, refused",
	[DA_NO_TEST] = "delack: a mark without a flag test refused",
	[DA_TWO_MARKS] = "delack: two marks refused",
};

static const char * const bbrx_delack_case_why[DA_CASES] = {
	[DA_FIN] = "tests bit 0x1 of tcp_flags, not PSH",
	[DA_NO_TEST] = "no \"testb $PSH",
	[DA_TWO_MARKS] = "ambiguous",
};

/* The register each accepted case must report holding the socket. */
static const int bbrx_delack_case_reg[DA_CASES] = {
	[DA_JE_R12] = 3, [DA_JE_R8] = 13, [DA_JNE] = 3,
};

static void bbrx_delack_case(struct bbrx_code *c, enum bbrx_delack_case k,
			     u32 pend, u32 flags)
{
	bbrx_code_init(c);
	switch (k) {
	case DA_JE_R12:	/* testb $PSH,flags(%r12); je +7; orb $4,pend(%rbx); ret */
	case DA_FIN:
		BBRX_EMIT(c, 0x41, 0xf6, 0x84, 0x24);
		bbrx_code_u32(c, flags);
		if (k == DA_FIN)
			BBRX_EMIT(c, TCPHDR_FIN);
		else
			BBRX_EMIT(c, TCPHDR_PSH);
		BBRX_EMIT(c, 0x74, 0x07, 0x80, 0x8b);
		bbrx_code_u32(c, pend);
		BBRX_EMIT(c, ICSK_ACK_PUSHED, 0xc3);
		break;
	case DA_JE_R8:	/* testb $PSH,flags(%r8); je +8; orb $4,pend(%r13); ret */
		BBRX_EMIT(c, 0x41, 0xf6, 0x80);
		bbrx_code_u32(c, flags);
		BBRX_EMIT(c, TCPHDR_PSH, 0x74, 0x08, 0x41, 0x80, 0x8d);
		bbrx_code_u32(c, pend);
		BBRX_EMIT(c, ICSK_ACK_PUSHED, 0xc3);
		break;
	case DA_JNE:	/* testb $PSH,flags(%r12); jne +1; ret; orb...; ret */
		BBRX_EMIT(c, 0x41, 0xf6, 0x84, 0x24);
		bbrx_code_u32(c, flags);
		BBRX_EMIT(c, TCPHDR_PSH, 0x75, 0x01, 0xc3, 0x80, 0x8b);
		bbrx_code_u32(c, pend);
		BBRX_EMIT(c, ICSK_ACK_PUSHED, 0xc3);
		break;
	case DA_NO_TEST:	/* orb $4,pend(%rbx); ret */
	case DA_TWO_MARKS:
		BBRX_EMIT(c, 0x80, 0x8b);
		bbrx_code_u32(c, pend);
		BBRX_EMIT(c, ICSK_ACK_PUSHED);
		if (k == DA_TWO_MARKS) {
			BBRX_EMIT(c, 0x80, 0x8b);
			bbrx_code_u32(c, pend);
			BBRX_EMIT(c, ICSK_ACK_PUSHED);
		}
		BBRX_EMIT(c, 0xc3);
		break;
	case DA_CASES:
		break;
	}
}

enum bbrx_ac_case { AC_SK_FIELD, AC_SKB_FIELD, AC_CALL, AC_JMP, AC_MISSING,
		    AC_INDIRECT, AC_PREFIX, AC_CASES };

static const char * const bbrx_ac_case_name[AC_CASES] = {
	[AC_SK_FIELD] = "autocork: a read of another sk field refused",
	[AC_SKB_FIELD] = "autocork: a read of another field of the tail skb refused",
	[AC_CALL] = "autocork: a call refused",
	[AC_JMP] = "autocork: a jump out, not to __tcp_push_pending_frames, refused",
	[AC_MISSING] = "autocork: a body without the MSG_MORE test refused",
	[AC_INDIRECT] = "autocork: an indirect call refused",
	[AC_PREFIX] = "autocork: an instruction with a repne prefix refused",
};

static const char * const bbrx_ac_case_why[AC_CASES] = {
	[AC_SK_FIELD] = "reads sk+0x8, which bbrx's tcp_push does not",
	[AC_SKB_FIELD] = "reads skb+0x8, which bbrx's tcp_push does not",
	[AC_CALL] = "(e8 00 00 00 00) calls",
	[AC_JMP] = "(e9 00 01 00 00) jumps out to",
	[AC_MISSING] = "tcp_push has no flags & MSG_MORE",
	[AC_INDIRECT] = "(ff d0) is an indirect call",
	[AC_PREFIX] = "(f2 ae) has a prefix this verifier does not know",
};

static void bbrx_ac_case(struct bbrx_code *c, enum bbrx_ac_case k, u32 tail)
{
	bbrx_code_init(c);
	/* nop; mov tail(%rdi),%rdx: the tail skb in %rdx */
	BBRX_EMIT(c, 0x90, 0x48, 0x8b, 0x97);
	bbrx_code_u32(c, tail);
	switch (k) {
	case AC_SK_FIELD:	/* mov 0x8(%rdi),%rax */
		BBRX_EMIT(c, 0x48, 0x8b, 0x47, 0x08);
		break;
	case AC_SKB_FIELD:	/* mov 0x8(%rdx),%eax */
		BBRX_EMIT(c, 0x8b, 0x42, 0x08);
		break;
	case AC_CALL:		/* call .+5 */
		BBRX_EMIT(c, 0xe8, 0, 0, 0, 0);
		break;
	case AC_JMP:		/* jmp .+0x105, past the end */
		BBRX_EMIT(c, 0xe9, 0, 1, 0, 0);
		break;
	case AC_INDIRECT:	/* call *%rax */
		BBRX_EMIT(c, 0xff, 0xd0);
		break;
	case AC_PREFIX:		/* repne scasb */
		BBRX_EMIT(c, 0xf2, 0xae);
		break;
	case AC_MISSING:
	case AC_CASES:
		break;
	}
	BBRX_EMIT(c, 0xc3);
}

enum bbrx_rb_case { RB_MERGED, RB_WRITES, RB_CASES };

static const char * const bbrx_rb_case_name[RB_CASES] = {
	[RB_MERGED] = "rcvbuf: stores reached by a jmp past pop %rbx; ret accepted",
	[RB_WRITES] = "rcvbuf: a write of sk_rcvbuf refused",
};

static const char * const bbrx_rb_case_why[RB_CASES] = {
	[RB_WRITES] = "writes sk_rcvbuf",
};

static void bbrx_rb_case(struct bbrx_code *c, enum bbrx_rb_case k)
{
	bbrx_code_init(c);
	switch (k) {
	case RB_MERGED:
		/* mov %rdi,%rbx; mov rcvbuf(%rbx),%eax; jmp T; pop %rbx; ret */
		BBRX_EMIT(c, 0x48, 0x89, 0xfb, 0x8b, 0x83);
		bbrx_code_u32(c, offsetof(struct sock, sk_rcvbuf));
		BBRX_EMIT(c, 0xeb, 0x02, 0x5b, 0xc3);
		/* T: mov %eax,clamp(%rbx); ...ssthresh; ...space; ret */
		BBRX_EMIT(c, 0x89, 0x83);
		bbrx_code_u32(c, offsetof(struct tcp_sock, window_clamp));
		BBRX_EMIT(c, 0x89, 0x83);
		bbrx_code_u32(c, offsetof(struct tcp_sock, rcv_ssthresh));
		BBRX_EMIT(c, 0x89, 0x83);
		bbrx_code_u32(c, offsetof(struct tcp_sock, rcvq_space.space));
		BBRX_EMIT(c, 0xc3);
		break;
	case RB_WRITES:		/* mov rcvbuf(%rdi),%eax; mov %eax,rcvbuf(%rdi) */
		BBRX_EMIT(c, 0x8b, 0x87);
		bbrx_code_u32(c, offsetof(struct sock, sk_rcvbuf));
		BBRX_EMIT(c, 0x89, 0x87);
		bbrx_code_u32(c, offsetof(struct sock, sk_rcvbuf));
		BBRX_EMIT(c, 0xc3);
		break;
	case RB_CASES:
		break;
	}
}

/*
 * An accepted case passes with 0 and @extra_ok; a refused one with
 * -ENOEXEC and @why in the reason.
 */
static bool bbrx_selftest_report(const char *name, const char *why, int err,
				 bool extra_ok, const char *reason)
{
	bool ok = !why ? !err && extra_ok :
		  err == -ENOEXEC && strstr(reason, why);

	pr_info("bbrx: verify_selftest: %s: %s%s%s\n", name,
		ok ? "ok" : "FAILED", err ? ": " : "", err ? reason : "");
	return ok;
}

/**
 * bbrx_verify_selftest() - run the verifiers on known code, if asked
 *
 * With the verify_selftest module parameter set, runs each case through
 * bbrx_tsq_prologue() or bbrx_delack_find() and prints "bbrx:
 * verify_selftest: CASE: ok" (or FAILED, with the verifier's reason) and
 * "bbrx: verify_selftest: N passed, M failed". Called at load, once the
 * kernel's decoder has been found; never fails the load.
 */
void bbrx_verify_selftest(void)
{
	const u32 rate = offsetof(struct sock, sk_pacing_rate);
	const u32 pend = offsetof(struct inet_connection_sock, icsk_ack) +
			 offsetof(typeof_member(struct inet_connection_sock,
						icsk_ack), pending);
	const u32 flags = offsetof(struct sk_buff, cb) +
			  offsetof(struct tcp_skb_cb, tcp_flags);
	struct bbrx_delack_site site;
	struct bbrx_autocork_shape shape;
	struct bbrx_autocork_found found;
	long at[RB_FACTS];
	static struct bbrx_code code;	/* load time, one caller */
	int pass = 0, fail = 0, k, err;
	char reason[160];

	if (!bbrx_verify_selftest_on)
		return;
	for (k = 0; k < TSQ_CASES; k++) {
		bbrx_tsq_case(&code, k, rate);
		reason[0] = '\0';
		err = bbrx_tsq_prologue(code.b, sizeof(code.b), 5, rate, reason,
					sizeof(reason));
		if (bbrx_selftest_report(bbrx_tsq_case_name[k],
					 bbrx_tsq_case_why[k], err, true, reason))
			pass++;
		else
			fail++;
	}
	for (k = 0; k < DA_CASES; k++) {
		bbrx_delack_case(&code, k, pend, flags);
		reason[0] = '\0';
		memset(&site, 0, sizeof(site));
		err = bbrx_delack_find(code.b, code.n, pend, &site, reason,
				       sizeof(reason));
		if (bbrx_selftest_report(bbrx_delack_case_name[k],
					 bbrx_delack_case_why[k], err,
					 site.orb_reg == bbrx_delack_case_reg[k],
					 reason))
			pass++;
		else
			fail++;
	}
	bbrx_autocork_shape(&shape, false);
	for (k = 0; k < AC_CASES; k++) {
		bbrx_ac_case(&code, k, shape.sk[BBRX_AC_SK_TAIL]);
		reason[0] = '\0';
		err = bbrx_autocork_body(code.b, code.n, (unsigned long)code.b,
					 0, &shape, &found, reason,
					 sizeof(reason));
		if (bbrx_selftest_report(bbrx_ac_case_name[k],
					 bbrx_ac_case_why[k], err, true, reason))
			pass++;
		else
			fail++;
	}
	for (k = 0; k < RB_CASES; k++) {
		bbrx_rb_case(&code, k);
		reason[0] = '\0';
		err = bbrx_rcvbuf_body(code.b, code.n, (unsigned long)code.b,
				       offsetof(struct sock, sk_rcvbuf), at,
				       reason, sizeof(reason));
		if (bbrx_selftest_report(bbrx_rb_case_name[k],
					 bbrx_rb_case_why[k], err, true, reason))
			pass++;
		else
			fail++;
	}
	pr_info("bbrx: verify_selftest: %d passed, %d failed\n", pass, fail);
}
