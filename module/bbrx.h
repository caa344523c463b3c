/* SPDX-License-Identifier: GPL-2.0 */
/*
 * bbrx internal interfaces: per-netns settings, per-netns counters and the
 * congestion control registration, shared by the files in module/.
 */
#ifndef _BBRX_H
#define _BBRX_H

#include <linux/types.h>
#include <linux/percpu.h>
#include <linux/rcupdate.h>
#include <net/inet_connection_sock.h>
#include <net/net_namespace.h>
#include <net/netns/generic.h>
#include <net/mptcp.h>
#include <net/sock.h>

#include "uapi/bbrx.h"

/* Also PACKAGE_VERSION in dkms.conf; the Makefile checks they agree. */
#define BBRX_VERSION "0.4.0"

/* Counters of /proc/net/bbrx_stat, in file order (names in stats.c). */
enum bbrx_stat_item {
	BBRX_STAT_SOCKETS_INIT,		/* sockets that chose bbrx */
	BBRX_STAT_STARTUP_EXIT,		/* STARTUP found full bw */
	BBRX_STAT_DRAIN_EXIT,		/* DRAIN reached the BDP */
	BBRX_STAT_PROBE_RTT_ENTER,	/* min_rtt expired */
	BBRX_STAT_RECOVERY_ENTER,	/* fast recovery entered */
	BBRX_STAT_LOSS_ENTER,		/* RTO loss state entered */
	BBRX_STAT_UNDO,			/* spurious loss episode undone */
	BBRX_STAT_APP_LIMITED,		/* app-limited bw samples */
	/* the hooks' counters (bbrx_hooks.h) */
#define BBRX_HOOK_STAT(id, name) BBRX_STAT_##id,
#include "bbrx_hooks.h"
	BBRX_STAT_LT_BW_USED,		/* policer found: pacing at lt_bw */
	BBRX_STAT_PROBE_RTT_IDLE_EXIT,	/* PROBE_RTT ended on restart from idle */
	BBRX_STAT_IDLE_RESTART,		/* sending restarted after idle */
	BBRX3_STAT_SOCKETS_INIT,	/* sockets that chose bbrx3 */
	BBRX3_STAT_STARTUP_EXIT,	/* bbrx3 STARTUP ended: plateau */
	BBRX3_STAT_STARTUP_EXIT_CONG,	/* bbrx3 STARTUP ended: loss or ECN */
	BBRX3_STAT_BW_PROBE,		/* bbrx3 PROBE_BW UP entered */
	BBRX3_STAT_INFLIGHT_HI_LOSS,	/* inflight_hi set: probe lost too much */
	BBRX3_STAT_INFLIGHT_HI_ECN,	/* inflight_hi set: probe CE-marked */
	BBRX3_STAT_LOSS_ROUNDS,		/* loss rounds that saw a loss */
	BBRX3_STAT_INFLIGHT_LO_LOSS,	/* bw_lo/inflight_lo cut: lossy loss round */
	BBRX3_STAT_INFLIGHT_LO_ECN,	/* inflight_lo cut: CE-marked round */
	BBRX3_STAT_PROBE_RTT_ENTER,	/* bbrx3 PROBE_RTT entered */
	BBRX3_STAT_IDLE_RESTART,	/* bbrx3 sending restarted after idle */
	BBRX3_STAT_NO_BLOCK,		/* bbrx3 sockets that ran without a block */
	BBRX3_STAT_BLOCKS,		/* gauge: bbrx3 blocks in use */
	BBRX_STAT_MAX
};

struct bbrx_mib {
	unsigned long mibs[BBRX_STAT_MAX];
};

/*
 * A netns' counters, reached through an RCU pointer: kernel sockets (kern=1,
 * no netns reference) of other subsystems may still run bbrx after bbrx's
 * pernet .exit; from then on the pointer is NULL and their events are
 * dropped, and the memory goes after a grace period (stats.c).
 */
struct bbrx_stats {
	struct bbrx_mib __percpu *mib;
	struct rcu_head rcu;
};

/* The hook policies (bbrx_hooks.h), their slots in bbrx_net's policy[]. */
enum bbrx_policy_id {
#define BBRX_POLICY(id, name, max) BBRX_POL_##id,
#include "bbrx_hooks.h"
	BBRX_POL_MAX
};

/*
 * Per-netns settings, written through net.ipv4.bbrx.* (module/sysctl.c has
 * the units, ranges and defaults). Readers on the fast path use READ_ONCE().
 */
struct bbrx_net {
	int scope;
	int high_gain;
	int drain_gain;
	int cwnd_gain;
	int probe_bw_up_gain;
	int probe_bw_down_gain;
	int extra_acked_gain;
	int min_rtt_win_ms;
	int probe_rtt_ms;
	int tso_margin;
	int gso_cap;
	int pacing_shift;
	int lt_bw;		/* 1 long-term (policer) bw sampling, 0 off */
	int bbrx3_loss_thresh;	/* per-mille of inflight lost per round */
	int bbrx3_beta;		/* per-mille kept by a multiplicative cut */
	int bbrx3_headroom;	/* per-mille of inflight_hi left free */
	int bbrx3_ecn;		/* 1 react to CE, 0 ignore it */
	int bbrx3_ecn_thresh;	/* per-mille of delivered CE-marked */
	int bbrx3_ecn_max_rtt_us; /* ECN only at min_rtt <= this, 0 any */
	int bbrx3_probe_rtt_win_ms; /* PROBE_RTT interval, ms */
	int policy[BBRX_POL_MAX]; /* by enum bbrx_policy_id: enum bbrx_policy */
	bool dying;		/* pre_exit ran: policies stay 0 (hook lock) */

	struct bbrx_stats __rcu *stats;
	struct ctl_table_header *sysctl_hdr;
	struct ctl_table *sysctl_table;
};

extern unsigned int bbrx_net_id;

static inline struct bbrx_net *bbrx_pernet(const struct net *net)
{
	return net_generic(net, bbrx_net_id);
}

/**
 * bbrx_policy() - a netns' value of a hook policy
 * @bn: the netns' settings
 * @id: the policy
 *
 * Return: its net.ipv4.bbrx.<policy> value, enum bbrx_policy (0 the
 * kernel's rule), read once.
 */
static inline int bbrx_policy(const struct bbrx_net *bn,
			      enum bbrx_policy_id id)
{
	return READ_ONCE(bn->policy[id]);
}

/* The settings of a socket's netns. */
static inline struct bbrx_net *bbrx_sk_net(const struct sock *sk)
{
	return bbrx_pernet(sock_net(sk));
}

void bbrx_stats_late(void);

/**
 * bbrx_stat_inc() - count one event in a netns
 * @bn: the netns' bbrx state (valid until every pernet .exit has run)
 * @item: the counter
 *
 * Any context. After bbrx's pernet .exit the netns has no counters left:
 * the event is dropped (and counted module-wide, see bbrx_stats_late()).
 */
static inline void bbrx_stat_inc(struct bbrx_net *bn, enum bbrx_stat_item item)
{
	struct bbrx_stats *st;

	rcu_read_lock();
	st = rcu_dereference(bn->stats);
	if (likely(st))
		this_cpu_inc(st->mib->mibs[item]);
	else
		bbrx_stats_late();
	rcu_read_unlock();
}

/**
 * bbrx_stat_dec() - take one back from a gauge of a netns
 * @bn: the netns' bbrx state
 * @item: a counter used as a gauge (incremented when a thing is taken,
 *	decremented when it is given back, in the same netns)
 *
 * Any context. The per-cpu values wrap, their sum on read does not.
 */
static inline void bbrx_stat_dec(struct bbrx_net *bn, enum bbrx_stat_item item)
{
	struct bbrx_stats *st;

	rcu_read_lock();
	st = rcu_dereference(bn->stats);
	if (likely(st))
		this_cpu_dec(st->mib->mibs[item]);
	else
		bbrx_stats_late();
	rcu_read_unlock();
}

/* Units of both models: bw in packets per usec << 24, gains in 1/256. */
#define BBRX_BW_SCALE	24
#define BBRX_GAIN_SCALE	8

struct rate_sample;
union tcp_cc_info;

/**
 * bbrx_gain() - a per-mille sysctl gain in 1/256, rounded to nearest
 * @permille: the sysctl's value (1000 = 1.0)
 *
 * The defaults give in-tree BBR's exact fixed-point gains (high_gain 2885
 * -> 739, drain 344 -> 88, 1250 -> 320, 750 -> 192, 2000 -> 512).
 *
 * Return: the gain in 1/256.
 */
static inline u32 bbrx_gain(int permille)
{
	return DIV_ROUND_CLOSEST((u32)permille << BBRX_GAIN_SCALE, 1000);
}

/*
 * One packet-timed round of a model, for the bbrx_round and bbrx3_round
 * trace events; filled only while the event is enabled: the model sets
 * the fields down to tx_in_flight, bbrx_trace_round_fill() the rest.
 */
struct bbrx_trace_round {
	u32 mode;		/* STARTUP, DRAIN, PROBE_BW, PROBE_RTT: 0-3 */
	u32 phase;		/* bbrx cycle index; bbrx3 DOWN..UP: 0-3 */
	u32 bw;			/* packets per usec << BBRX_BW_SCALE */
	u32 min_rtt_us;		/* usec */
	u32 pacing_gain;	/* 1/256 */
	u32 cwnd_gain;		/* 1/256 */
	u32 inflight_hi;	/* packets, 0 = no bound */
	u32 inflight_lo;	/* packets, 0 = no bound */
	u32 delivered;		/* packets delivered in the round */
	u32 lost;		/* packets marked lost in the round */
	u32 ce;			/* packets delivered CE-marked in the round */
	u32 max_bw;		/* bbrx3: max_bw before bw_lo; bbrx: bw */
	u32 bw_lo;		/* bbrx3: bw_lo, 0 = no bound; bbrx: 0 */
	u32 tx_in_flight;	/* bbrx3: packets in flight when the acked
				 * data was sent, 0 = not known; bbrx: 0
				 */
	u64 bw_bytes;		/* bw in bytes/s */
	u64 max_bw_bytes;	/* max_bw in bytes/s */
	u64 bw_lo_bytes;	/* bw_lo in bytes/s, 0 = no bound */
	u64 pacing_rate;	/* sk_pacing_rate, bytes/s */
	u32 netns;		/* the netns' inode number */
	u32 cwnd;		/* packets */
	u32 loss_pm;		/* lost / (delivered + lost), per-mille */
	u32 ce_pm;		/* ce / delivered, per-mille */
	u16 sport;		/* local port */
	u16 dport;		/* remote port */
	u8 ca_state;		/* icsk_ca_state: TCP_CA_Open .. TCP_CA_Loss */
};

void bbrx_trace_round_fill(const struct sock *sk, struct bbrx_trace_round *r);

/*
 * A change of bbrx3's state on an ACK (the bbrx3_state event): mode, PROBE_BW
 * phase and whether the connection is in loss recovery, before and after,
 * with the connection's running totals, so that time and losses can be
 * charged to the state they happened in.
 */
struct bbrx_trace_state {
	u32 mode;		/* after the ACK: 0-3, as bbrx_trace_round */
	u32 phase;		/* after the ACK: DOWN..UP 0-3, 4 = none */
	u32 prev_mode;		/* before the ACK */
	u32 prev_phase;		/* before the ACK */
	u32 inflight_hi;	/* packets, 0 = no bound */
	u32 inflight_lo;	/* packets, 0 = no bound */
	u32 delivered;		/* tp->delivered: packets since the start */
	u32 lost;		/* tp->lost: packets since the start */
	u32 cwnd;		/* packets */
	u8 ca_state;		/* icsk_ca_state after the ACK */
	u8 prev_ca_state;	/* icsk_ca_state the model saw last */
};

/* cc_common.c: the steps both models compute the same way */
u64 bbrx_rate_bytes(const struct sock *sk, u64 bw, int gain);
bool bbrx_init_pacing(struct sock *sk, u32 gain);
void bbrx_update_pacing(struct sock *sk, u32 bw, u32 gain,
			bool full_bw_reached);
u32 bbrx_min_tso_segs(struct sock *sk);
u32 bbrx_tso_segs_goal_extra(struct sock *sk, const struct bbrx_net *bn,
			     u32 extra);
u32 bbrx_tso_segs_goal(struct sock *sk, const struct bbrx_net *bn);
u32 bbrx_inflight_at_edt(struct sock *sk, u32 inflight, u32 bw);
size_t bbrx_fill_bbr_info(struct sock *sk, u32 ext, int *attr,
			  union tcp_cc_info *info, u32 bw, u32 min_rtt_us,
			  u32 pacing_gain, u32 cwnd_gain);
u32 bbrx_sndbuf_expand(struct sock *sk);
void bbrx_release(struct sock *sk);
u32 bbrx_bdp_packets(u32 bw, u32 min_rtt_us, u32 gain);
struct tcp_sock;
u32 bbrx_prior_cwnd(const struct tcp_sock *tp, u32 prior, bool cut);
bool bbrx_set_pacing(struct sock *sk, bool has_seen_rtt, u32 startup_gain,
		     u32 bw, u32 gain, bool full_bw_reached);
bool bbrx_rtt_sample_wins(const struct rate_sample *rs, u32 min_us,
			  bool expired);
u32 bbrx_stamp_after_ms(u32 ms);

/* The congestion controls (cc_bbrx.c, cc_bbrx3.c), registered by main.c. */
struct tcp_congestion_ops;
extern struct tcp_congestion_ops bbrx_cong_ops;
extern struct tcp_congestion_ops bbrx3_cong_ops;
/* bbrx3's per-socket blocks (cc_bbrx3.c); bench_base.c tests the name */
#define BBRX3_BLOCK_CACHE
int bbrx3_block_cache_create(void);
void bbrx3_block_cache_destroy(void);

/* extra_acked.c: ACK-aggregation estimate, 12 bytes of a model's state */
struct bbrx_extra_acked {
	u32 epoch_stamp;	/* usec, low 32 bits: epoch start */
	u32 epoch_acked:20,	/* packets (s)acked in this epoch */
	    rounds:3,		/* rounds in the current window half */
	    idx:1,		/* current half of extra[] */
	    unused:8;
	u16 extra[2];		/* packets beyond bw, per window half */
};

void bbrx_extra_acked_restart(struct bbrx_extra_acked *ea, u64 mstamp);
/* rounds per half of the max filter's window, in steady state */
#define BBRX_EXTRA_ACKED_ROUNDS	5
void bbrx_extra_acked_update(struct bbrx_extra_acked *ea, struct sock *sk,
			     const struct rate_sample *rs, u32 bw,
			     bool round_start, u32 win_rounds);
u32 bbrx_extra_acked_cwnd(const struct bbrx_extra_acked *ea, u32 bw, u32 gain);

/* Hooks, in the order of the hook table (hook.c; the list: bbrx_hooks.h). */
enum bbrx_hook_id {
#define BBRX_HOOK(id, name, pol) BBRX_HOOK_##id,
#include "bbrx_hooks.h"
	BBRX_HOOK_MAX
};

/* hook_install.c */
int bbrx_hooks_install(void);
void bbrx_hooks_remove(void);
int bbrx_hooks_net_init(struct net *net);
void bbrx_hooks_net_exit(struct net *net);

/* hook.c; bbrx_trace_hook() is trace.c's */
bool bbrx_hook_installed(enum bbrx_hook_id id);
void bbrx_trace_hook(const struct sock *sk, enum bbrx_policy_id id,
		     int policy, int decision, u32 value);
const char *bbrx_hook_name(enum bbrx_hook_id id);
void bbrx_hook_lock(void);
void bbrx_hook_unlock(void);
int bbrx_hook_users(unsigned long mask, int delta);
bool bbrx_hook_fault(enum bbrx_hook_id id);

/**
 * bbrx_sk_in_scope() - does a hook act on this socket at all?
 * @sk: a TCP socket
 * @bn: its netns settings
 *
 * MPTCP subflows are left alone: the MPTCP layer drives their sends.
 *
 * Return: true for sockets of bbrx or bbrx3, or every TCP socket with
 * scope 1.
 */
static inline bool bbrx_sk_in_scope(const struct sock *sk,
				    const struct bbrx_net *bn)
{
	const void *ops;

	if (sk_is_mptcp(sk))
		return false;
	if (READ_ONCE(bn->scope) == BBRX_SCOPE_ALL)
		return true;
	ops = READ_ONCE(inet_csk(sk)->icsk_ca_ops);
	return ops == &bbrx_cong_ops || ops == &bbrx3_cong_ops;
}

/* sysctl.c */
void bbrx_sysctl_defaults(struct bbrx_net *bn);
void bbrx_sysctl_policies_off(struct bbrx_net *bn);
int bbrx_sysctl_net_init(struct net *net, struct bbrx_net *bn);
void bbrx_sysctl_net_exit(struct bbrx_net *bn);

/* stats.c */
int bbrx_stats_net_init(struct net *net, struct bbrx_net *bn);
void bbrx_stats_net_exit(struct net *net, struct bbrx_net *bn);
unsigned long bbrx_stats_late_count(void);

#endif /* _BBRX_H */
