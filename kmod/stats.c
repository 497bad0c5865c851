// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem stats: /proc/driver/pinmem/stats and the STATS ioctl numbers.
 *
 * The file is line-oriented: each line is a record type followed by
 * "key value" pairs, sizes in bytes, so people can read it and tools can
 * parse it with one split per line.  Version PINMEM_STATS_VERSION (1):
 *
 *   pinmem_stats_version 1
 *   abi MAJOR.MINOR
 *   global pinned_bytes N limit_bytes N peak_bytes N regions N pins N
 *          unpins N refused_global N refused_user N refused_rlimit N
 *          refused_fault N                              (one line)
 *   default_user_limit_bytes N
 *   enforce_rlimit 0|1
 *   user uid N pinned_bytes N limit_bytes N peak_bytes N regions N pins N
 *        unpins N refused_global N refused_user N refused_rlimit N
 *        refused_fault N overridden 0|1                 (one line per user)
 *   process pid N uid N comm NAME regions N pinned_bytes N
 *        mm_pinned_bytes N                              (one line per open file)
 *
 * limit_bytes is 18446744073709551615 (PINMEM_UNLIMITED) for no limit.  NAME
 * is the opener's comm with every blank or non-printable byte turned into
 * '_' ("_" if empty), so it is always one token.  pid and uid are as seen
 * from the reader's namespaces (pid 0 when not visible, or once the opener
 * has exited: its number may already name another process).  Fields are only
 * ever added at the end of a line; any other change bumps the version.
 */
#include <linux/cred.h>
#include <linux/mm_types.h>
#include <linux/pid.h>
#include <linux/proc_fs.h>
#include <linux/seq_file.h>
#include <linux/uidgid.h>
#include <linux/user_namespace.h>

#include "budget.h"
#include "pinmem.h"

static struct proc_dir_entry *pinmem_proc_dir;

static void pinmem_show_acct(struct seq_file *m, const struct pinmem_acct *a,
			     u64 limit)
{
	seq_printf(m, " pinned_bytes %llu limit_bytes %llu peak_bytes %llu",
		   a->pinned_bytes, limit, a->peak_bytes);
	seq_printf(m, " regions %llu pins %llu unpins %llu", a->regions,
		   a->pins, a->unpins);
	seq_printf(m,
		   " refused_global %llu refused_user %llu refused_rlimit %llu refused_fault %llu",
		   a->refused_global, a->refused_user, a->refused_rlimit,
		   a->refused_fault);
}

static void pinmem_show_user(struct seq_file *m, const struct pinmem_user_view *v)
{
	seq_printf(m, "user uid %u", from_kuid_munged(seq_user_ns(m), v->uid));
	pinmem_show_acct(m, &v->acct, v->limit);
	seq_printf(m, " overridden %d\n", v->overridden);
}

static u64 pinmem_mm_pinned_bytes(struct mm_struct *mm)
{
	return (u64)atomic64_read(&mm->pinned_vm) << PAGE_SHIFT;
}

static void pinmem_show_process(struct pinmem_file *f, void *arg)
{
	char comm[TASK_COMM_LEN];
	struct seq_file *m = arg;
	struct pinmem_acct a;
	pid_t pid = 0;
	size_t i;

	strscpy(comm, f->comm, sizeof(comm));
	for (i = 0; comm[i]; i++)
		if (comm[i] <= ' ' || comm[i] >= 0x7f)
			comm[i] = '_';
	if (!comm[0])
		strscpy(comm, "_", sizeof(comm));

	if (pid_has_task(f->tgid, PIDTYPE_TGID))
		pid = pid_vnr(f->tgid);
	pinmem_budget_file(f, &a);
	seq_printf(m, "process pid %d uid %u comm %s regions %llu", pid,
		   from_kuid_munged(seq_user_ns(m), f->uid), comm, a.regions);
	seq_printf(m, " pinned_bytes %llu mm_pinned_bytes %llu\n",
		   a.pinned_bytes, pinmem_mm_pinned_bytes(f->mm));
}

static int pinmem_stats_show(struct seq_file *m, void *v)
{
	struct pinmem_global_view g;
	struct pinmem_user_view u;
	bool more;

	pinmem_budget_global(&g);
	seq_printf(m, "pinmem_stats_version %d\n", PINMEM_STATS_VERSION);
	seq_printf(m, "abi %d.%d\n", PINMEM_ABI_MAJOR, PINMEM_ABI_MINOR);
	seq_puts(m, "global");
	pinmem_show_acct(m, &g.acct, g.limit);
	seq_putc(m, '\n');
	seq_printf(m, "default_user_limit_bytes %llu\n", g.default_user_limit);
	seq_printf(m, "enforce_rlimit %d\n", g.enforce_rlimit);
	for (more = pinmem_budget_user_next(&u, true); more;
	     more = pinmem_budget_user_next(&u, false))
		pinmem_show_user(m, &u);
	pinmem_files_for_each(pinmem_show_process, m);
	return 0;
}

static void pinmem_counters_fill(struct pinmem_counters *c,
				 const struct pinmem_acct *a, u64 limit)
{
	memset(c, 0, sizeof(*c));
	c->pinned_bytes = a->pinned_bytes;
	c->limit_bytes = limit;
	c->peak_bytes = a->peak_bytes;
	c->regions = a->regions;
	c->pins = a->pins;
	c->unpins = a->unpins;
	c->refused_global = a->refused_global;
	c->refused_user = a->refused_user;
	c->refused_rlimit = a->refused_rlimit;
	c->refused_fault = a->refused_fault;
}

/**
 * pinmem_stats_fill() - PINMEM_IOC_STATS: the numbers of the stats file
 * @f: the file asked
 * @st: filled in except @st->flags: global, the calling user's budget and
 *	@f's counters, with the RLIMIT_MEMLOCK of @f's owner as
 *	@st->file.limit_bytes
 */
void pinmem_stats_fill(struct pinmem_file *f, struct pinmem_stats *st)
{
	struct pinmem_global_view g;
	struct pinmem_user_view u;
	struct pinmem_acct a;
	kuid_t uid = current_uid();

	pinmem_budget_global(&g);
	pinmem_budget_user(uid, &u);
	pinmem_budget_file(f, &a);

	st->uid = from_kuid_munged(current_user_ns(), uid);
	pinmem_counters_fill(&st->global, &g.acct, g.limit);
	pinmem_counters_fill(&st->user, &u.acct, u.limit);
	pinmem_counters_fill(&st->file, &a, pinmem_budget_rlimit(f));
	st->mm_pinned_bytes = pinmem_mm_pinned_bytes(f->mm);
	memset(st->reserved, 0, sizeof(st->reserved));
}

/**
 * pinmem_stats_init() - create /proc/driver/pinmem/stats
 *
 * Return: 0 or -ENOMEM.
 */
int pinmem_stats_init(void)
{
	pinmem_proc_dir = proc_mkdir("driver/pinmem", NULL);
	if (!pinmem_proc_dir)
		return -ENOMEM;
	if (!proc_create_single("stats", 0444, pinmem_proc_dir,
				pinmem_stats_show)) {
		proc_remove(pinmem_proc_dir);
		return -ENOMEM;
	}
	return 0;
}

/**
 * pinmem_stats_exit() - remove /proc/driver/pinmem, waiting for readers
 */
void pinmem_stats_exit(void)
{
	proc_remove(pinmem_proc_dir);
}
