// SPDX-License-Identifier: GPL-2.0
/*
 * bbrx_kern_sock: selftest helper for bbrx_kern_sock.sh.
 *
 * Holds a connected pair of kernel TCP sockets (kern=1) in one netns, the
 * client's congestion control set to bbrx, the way SUNRPC, CIFS or iSCSI
 * hold theirs: without a netns reference, closed only by the owner's own
 * pernet .exit. Load it before tcp_bbrx: pernet exits run in reverse order
 * of registration, so this module's .exit runs after bbrx's has retired the
 * netns' counters. There it keeps the client sending and switches its
 * congestion control to reno and back to bbrx, so that bbrx's .init runs
 * (and counts) on a netns whose counters are gone; then it closes the pair
 * and reports in dmesg.
 *
 * Writing anything to /sys/module/bbrx_kern_sock/parameters/open opens the
 * pair in the writer's netns over 127.0.0.1 (lo must be up).
 */
#include <linux/in.h>
#include <linux/inet.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/net.h>
#include <linux/slab.h>
#include <linux/tcp.h>
#include <net/inet_connection_sock.h>
#include <net/net_namespace.h>
#include <net/netns/generic.h>
#include <net/sock.h>
#include <net/tcp.h>

#define KSO_CC		"bbrx"
#define KSO_CHUNK	4096	/* bytes per send */
#define KSO_SENDS	16	/* sends at open and again at .exit */

struct kso_net {
	struct socket *lsock, *csock, *asock;
};

static unsigned int kso_net_id __read_mostly;
static DEFINE_MUTEX(kso_mutex);

static int kso_set_cc(struct socket *sock, const char *name)
{
	char buf[TCP_CA_NAME_MAX];

	strscpy(buf, name, sizeof(buf));
	return sock->ops->setsockopt(sock, SOL_TCP, TCP_CONGESTION,
				     KERNEL_SOCKPTR(buf), strlen(buf));
}

static const char *kso_cc(struct socket *sock)
{
	return inet_csk(sock->sk)->icsk_ca_ops->name;
}

/* Non-blocking sends: the number of bytes queued, or the first error. */
static int kso_send(struct socket *sock)
{
	struct msghdr msg = { .msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL };
	struct kvec vec;
	int i, n, total = 0;
	void *buf;

	buf = kzalloc(KSO_CHUNK, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	for (i = 0; i < KSO_SENDS; i++) {
		vec.iov_base = buf;
		vec.iov_len = KSO_CHUNK;
		n = kernel_sendmsg(sock, &msg, &vec, 1, KSO_CHUNK);
		if (n < 0) {
			if (!total)
				total = n;
			break;
		}
		total += n;
	}
	kfree(buf);
	return total;
}

static void kso_close(struct kso_net *kn)
{
	struct socket **s[] = { &kn->csock, &kn->asock, &kn->lsock };
	int i;

	for (i = 0; i < ARRAY_SIZE(s); i++) {
		if (!*s[i])
			continue;
		/* reset and free at once: no orphan outlives the netns */
		sock_no_linger((*s[i])->sk);
		sock_release(*s[i]);
		*s[i] = NULL;
	}
}

/* The address type kernel_bind() and kernel_connect() take (Kbuild). */
#ifdef KSO_HAVE_SOCKADDR_UNSIZED
#define KSO_SA(a)	((struct sockaddr_unsized *)(a))
#else
#define KSO_SA(a)	((struct sockaddr *)(a))
#endif

static int kso_open(struct net *net, struct kso_net *kn)
{
	struct sockaddr_in addr = {
		.sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	int err;

	err = sock_create_kern(net, AF_INET, SOCK_STREAM, IPPROTO_TCP,
			       &kn->lsock);
	if (err)
		return err;
	err = kernel_bind(kn->lsock, KSO_SA(&addr), sizeof(addr));
	if (!err)
		err = kernel_listen(kn->lsock, 1);
	if (!err)
		err = kernel_getsockname(kn->lsock, (struct sockaddr *)&addr) < 0;
	if (!err)
		err = sock_create_kern(net, AF_INET, SOCK_STREAM, IPPROTO_TCP,
				       &kn->csock);
	if (!err)
		err = kso_set_cc(kn->csock, KSO_CC);
	if (!err)
		err = kernel_connect(kn->csock, KSO_SA(&addr),
				     sizeof(addr), 0);
	if (!err)
		err = kernel_accept(kn->lsock, &kn->asock, 0);
	if (!err && strcmp(kso_cc(kn->csock), KSO_CC))
		err = -ENOENT;
	if (err) {
		kso_close(kn);
		return err;
	}
	err = kso_send(kn->csock);
	pr_info("bbrx_kern_sock: opened a kern=1 pair on port %u, congestion control %s, sent %d\n",
		ntohs(addr.sin_port), kso_cc(kn->csock), err);
	return err < 0 ? err : 0;
}

static int kso_param_open(const char *val, const struct kernel_param *kp)
{
	struct net *net = current->nsproxy->net_ns;
	struct kso_net *kn = net_generic(net, kso_net_id);
	int err = -EBUSY;

	mutex_lock(&kso_mutex);
	if (!kn->csock)
		err = kso_open(net, kn);
	mutex_unlock(&kso_mutex);
	return err;
}

static const struct kernel_param_ops kso_open_ops = {
	.set = kso_param_open,
};
module_param_cb(open, &kso_open_ops, NULL, 0200);
MODULE_PARM_DESC(open, "Write anything: open the socket pair in the writer's netns");

static void __net_exit kso_net_exit(struct net *net)
{
	struct kso_net *kn = net_generic(net, kso_net_id);
	int sent, reno, back;

	mutex_lock(&kso_mutex);
	if (kn->csock) {
		sent = kso_send(kn->csock);
		reno = kso_set_cc(kn->csock, "reno");
		back = kso_set_cc(kn->csock, KSO_CC);
		pr_info("bbrx_kern_sock: netns exit: sent %d, reno %d, back to %s %d (now %s)\n",
			sent, reno, KSO_CC, back, kso_cc(kn->csock));
		kso_close(kn);
	}
	mutex_unlock(&kso_mutex);
}

static struct pernet_operations kso_net_ops = {
	.exit = kso_net_exit,
	.id = &kso_net_id,
	.size = sizeof(struct kso_net),
};

static int __init kso_init(void)
{
	return register_pernet_subsys(&kso_net_ops);
}

static void __exit kso_exit(void)
{
	unregister_pernet_subsys(&kso_net_ops);
}

module_init(kso_init);
module_exit(kso_exit);
MODULE_DESCRIPTION("bbrx selftest helper: kernel TCP sockets that outlive bbrx's pernet exit");
MODULE_LICENSE("GPL");
