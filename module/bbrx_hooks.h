/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The hooks, one BBRX_HOOK(ID, "name") a line, in the order of the hook
 * table (hook.c); the name is the one of /proc/net/bbrx_hooks and of the
 * module parameters. The one list of hooks: bbrx.h builds enum
 * bbrx_hook_id from it, hook.c the names and what the hook parameters
 * accept (description and errors). Each includer defines BBRX_HOOK
 * first; this file undefines it, and has no include guard on purpose.
 */
BBRX_HOOK(AUTOCORK, "autocork")
BBRX_HOOK(TSQ, "tsq")
BBRX_HOOK(RCVBUF, "rcvbuf")
BBRX_HOOK(RCVBUF_GROW, "rcvbuf_grow")
BBRX_HOOK(DELACK, "delack")
#undef BBRX_HOOK
