// SPDX-License-Identifier: GPL-2.0
/*
 * tx_delay - model a NIC whose TX completions come after the ACK.
 *
 *   tx_delay wire PIN_PATH WIRE_IFINDEX HOLD_IFINDEX
 *   tx_delay hold PIN_PATH DELAY_US
 *
 * Loads one of two small tc BPF programs (SCHED_CLS, direct-action) and
 * pins it at PIN_PATH (a file on a mounted bpffs) for
 *   tc filter add dev DEV {ingress|egress} bpf object-pinned PIN_PATH da
 *
 * The model (selftests/lib_shape.sh, late_completion_setup): the sender's route
 * leaves through a veth pair whose egress qdisc is the NIC's line rate
 * (tbf); skbs keep their socket charge (sk_wmem_alloc) through a veth in
 * the same netns.
 *   wire  on the pair's far end (ingress): sends a clone, which owns no
 *         socket memory, out of WIRE_IFINDEX (the packet on the wire, at
 *         the end of its serialization) and redirects the original, still
 *         charged, to the egress of HOLD_IFINDEX (a dummy);
 *   hold  on that dummy (egress): sets the original's delivery time
 *         (EDT, mono clock) to now + DELAY_US, so that an fq root qdisc
 *         holds it until then; the dummy then frees it: the TX completion,
 *         DELAY_US after the wire.
 * Why not netem: netem calls skb_orphan_partial() on enqueue, which gives
 * the socket its memory back at once, so TSQ and autocorking never see a
 * netem delay.  Late completions are what the report behind upstream "tcp:
 * tsq: relax tcp_small_queue_check() when rtx queue contains a single skb"
 * had (fec NIC, 100 Mbit/s).
 *
 * hold sets the delivery time with bpf_skb_set_tstamp() (5.18+), else
 * by writing skb->tstamp (5.10).  Exits 0 when the program is pinned;
 * prints the verifier log and exits 1 otherwise; 2 on bad arguments.
 * DELAY_US: 0..2000000.
 */
#include <errno.h>
#include <linux/bpf.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define TC_ACT_OK 0
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define INSN(c, d, s, o, i) ((struct bpf_insn){ .code = (c), .dst_reg = (d), \
	.src_reg = (s), .off = (o), .imm = (i) })

static long sys_bpf(int cmd, union bpf_attr *attr)
{
	return syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

static int parse(const char *s, long min, long max, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(s, &end, 10);
	return errno || *s == '\0' || *end != '\0' || *out < min || *out > max;
}

static char log[65536];		/* the verifier's log of the last load */

/* Loads @prog; on failure, prints the verifier's log if @report. */
static int prog_load(struct bpf_insn *prog, unsigned int n, int report)
{
	union bpf_attr attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_SCHED_CLS;
	attr.insns = (uintptr_t)prog;
	attr.insn_cnt = n;
	attr.license = (uintptr_t)"GPL";
	attr.log_buf = (uintptr_t)log;
	attr.log_size = sizeof(log);
	attr.log_level = 1;
	fd = sys_bpf(BPF_PROG_LOAD, &attr);
	if (fd < 0 && report)
		fprintf(stderr, "tx_delay: BPF_PROG_LOAD: %s\n%s\n", strerror(errno), log);
	return fd;
}

static int pin(const char *path, int fd)
{
	union bpf_attr attr;

	if (fd < 0)
		return 1;
	memset(&attr, 0, sizeof(attr));
	attr.pathname = (uintptr_t)path;
	attr.bpf_fd = fd;
	if (sys_bpf(BPF_OBJ_PIN, &attr)) {
		fprintf(stderr, "tx_delay: pin %s: %s\n", path, strerror(errno));
		return 1;
	}
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: tx_delay wire PIN_PATH WIRE_IFINDEX HOLD_IFINDEX\n"
			"       tx_delay hold PIN_PATH DELAY_US (0..2000000)\n");
	return 2;
}

int main(int argc, char **argv)
{
	long a, b;

	if (argc == 5 && !strcmp(argv[1], "wire")) {
		if (parse(argv[3], 1, INT32_MAX, &a) || parse(argv[4], 1, INT32_MAX, &b))
			return usage();

		struct bpf_insn prog[] = {
			/* r6 = skb (calls clobber r1-r5) */
			INSN(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_6, BPF_REG_1, 0, 0),
			/* bpf_clone_redirect(skb, WIRE, 0 = egress) */
			INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_2, 0, 0, (int32_t)a),
			INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_3, 0, 0, 0),
			INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_clone_redirect),
			/* return bpf_redirect(HOLD, 0 = egress) */
			INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_1, 0, 0, (int32_t)b),
			INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_2, 0, 0, 0),
			INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_redirect),
			INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
		};
		return pin(argv[2], prog_load(prog, ARRAY_SIZE(prog), 1));
	}
	if (argc == 4 && !strcmp(argv[1], "hold")) {
		if (parse(argv[3], 0, 2000000, &a))
			return usage();

		struct bpf_insn prog[] = {
			INSN(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_6, BPF_REG_1, 0, 0),
			INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_ktime_get_ns),
			/* bpf_skb_set_tstamp(skb, now + delay, DELIVERY_MONO) */
			INSN(BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_0, 0, 0, (int32_t)(a * 1000)),
			INSN(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_1, BPF_REG_6, 0, 0),
			INSN(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_2, BPF_REG_0, 0, 0),
			INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_3, 0, 0,
			     BPF_SKB_TSTAMP_DELIVERY_MONO),
			INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_skb_set_tstamp),
			INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, TC_ACT_OK),
			INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
		};
		/*
		 * Before 5.18 (no bpf_skb_set_tstamp()): skb->tstamp, which
		 * a tc program may write since 5.0, holds the EDT in the
		 * mono clock that fq reads.
		 */
		struct bpf_insn old[] = {
			INSN(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_6, BPF_REG_1, 0, 0),
			INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_ktime_get_ns),
			INSN(BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_0, 0, 0, (int32_t)(a * 1000)),
			INSN(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_6, BPF_REG_0,
			     offsetof(struct __sk_buff, tstamp), 0),
			INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, TC_ACT_OK),
			INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
		};
		int fd = prog_load(prog, ARRAY_SIZE(prog), 0);

		/* only for a kernel that lacks the helper, any other error shown */
		if (fd < 0 && errno == EINVAL && strstr(log, "invalid func unknown#")) {
			fprintf(stderr, "tx_delay: no bpf_skb_set_tstamp(): hold writes skb->tstamp\n");
			fd = prog_load(old, ARRAY_SIZE(old), 1);
		} else if (fd < 0) {
			fprintf(stderr, "tx_delay: BPF_PROG_LOAD: %s\n%s\n", strerror(errno), log);
		}
		return pin(argv[2], fd);
	}
	return usage();
}
