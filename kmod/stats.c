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
 *          refused_fault N kmem_bytes N refused_regions N
 *          refused_cgroup N pinning N reserved_bytes N
 *          refused_refs N                                (one line)
 *   default_user_limit_bytes N
 *   enforce_rlimit 0|1
 *   max_regions_per_file N
 *   max_regions_per_user N
 *   max_idle_users N
 *   idle_users N
 *   user uid N pinned_bytes N limit_bytes N peak_bytes N regions N pins N
 *        unpins N refused_global N refused_user N refused_rlimit N
 *        refused_fault N overridden 0|1 kmem_bytes N refused_regions N
 *        refused_cgroup N pinning N reserved_bytes N refused_refs N
 *        (one line per user with a file open, an override, or, kept idle,
 *        pins or refusals since load)
 *   users_evicted users N pins N unpins N peak_bytes N refused_global N
 *        refused_user N refused_rlimit N refused_fault N
 *        refused_regions N refused_cgroup N refused_refs N
 *        (the users dropped to keep max_idle_users, their counters summed)
 *   cgroup id N pinned_bytes N limit_bytes N peak_bytes N refused N
 *        (one line per cgroup with pins or a limit; N is the cgroup's id,
 *        its inode number on the cgroup2 mount)
 *   hidden_processes N
 *   process pid N uid N comm NAME regions N pinned_bytes N
 *        mm_pinned_bytes N kmem_bytes N opener_uid N    (one line per open file)
 *
 * Every line is copied under the budget lock at once, so its numbers agree:
 * regions == pins - unpins always; a PIN in progress shows in pinning (it
 * holds a region of the caps) and in pinned_bytes with what it charged so
 * far, of which reserved_bytes is the worst case of the chunk it is
 * pinning, not pages known yet.  A user is the real user behind the
 * opener's user namespaces (the owner of the outermost one, see
 * include/uapi/pinmem.h); a process line's uid is that user, opener_uid
 * the uid the process opened /dev/pinmem as.
 *
 * refused_fault counts refused_refs too (PINs refused for too many
 * references to a folio or page), on every line, as it did before
 * refused_refs was added (ABI 1.5): a reader that knows refused_refs
 * subtracts it.  The
 * refusals of every user line plus users_evicted make the global ones.
 *
 * Privacy: a reader whose file was opened without CAP_SYS_ADMIN sees the
 * global line and every user's line, but process lines only of its own uid
 * (as uid or opener_uid),
 * and cgroup lines only of the cgroups its cgroup namespace shows (its root
 * and below; all of them in the initial namespace); processes outside the
 * pid namespace of the proc mount read are never listed.  hidden_processes
 * counts the process lines left out.
 *
 * The file is printed from a copy (users, then open files) taken in one pass
 * each with the locks held only while copying, so readers cost O(users +
 * files) and never hold up PIN, open or close while they format.
 *
 * limit_bytes is 18446744073709551615 (PINMEM_UNLIMITED) for no limit.  NAME
 * is the opener's comm with every blank or non-printable byte turned into
 * '_' ("_" if empty), so it is always one token.  pid and uid are as seen
 * from the reader's namespaces (pid 0 once the opener has exited: its number
 * may already name another process).  Fields are only ever added at the end
 * of a line and lines of new record types may appear (readers skip unknown
 * ones); any other change bumps the version.
 */
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/mm.h>
#include <linux/mm_types.h>
#include <linux/pid.h>
#include <linux/proc_fs.h>
#include <linux/sched.h>
#include <linux/seq_file.h>
#include <linux/uidgid.h>
#include <linux/user_namespace.h>

#include "budget.h"
#include "cgroup.h"
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
		   a->refused_fault + a->refused_refs);
}

/* The fields added since ABI 1.0, at the end of the global and user lines. */
static void pinmem_show_acct_more(struct seq_file *m,
				  const struct pinmem_acct *a)
{
	seq_printf(m, " kmem_bytes %llu refused_regions %llu refused_cgroup %llu",
		   a->kmem_bytes, a->refused_regions, a->refused_cgroup);
	seq_printf(m, " pinning %llu reserved_bytes %llu", a->pinning,
		   a->reserved_bytes);
	seq_printf(m, " refused_refs %llu", a->refused_refs);
}

static void pinmem_show_evicted(struct seq_file *m,
				const struct pinmem_global_view *g)
{
	const struct pinmem_acct *a = &g->evicted;

	seq_printf(m, "users_evicted users %llu pins %llu unpins %llu peak_bytes %llu",
		   g->evicted_users, a->pins, a->unpins, a->peak_bytes);
	seq_printf(m, " refused_global %llu refused_user %llu refused_rlimit %llu refused_fault %llu",
		   a->refused_global, a->refused_user, a->refused_rlimit,
		   a->refused_fault + a->refused_refs);
	seq_printf(m, " refused_regions %llu refused_cgroup %llu refused_refs %llu\n",
		   a->refused_regions, a->refused_cgroup, a->refused_refs);
}

static void pinmem_show_user(struct seq_file *m, const struct pinmem_user_view *v)
{
	seq_printf(m, "user uid %u", from_kuid_munged(seq_user_ns(m), v->uid));
	pinmem_show_acct(m, &v->acct, v->limit);
	seq_printf(m, " overridden %d", v->overridden);
	pinmem_show_acct_more(m, &v->acct);
	seq_putc(m, '\n');
}

static u64 pinmem_mm_pinned_bytes(struct mm_struct *mm)
{
	return (u64)atomic64_read(&mm->pinned_vm) << PAGE_SHIFT;
}

/**
 * struct pinmem_reader - who reads the stats file
 * @privileged: opened with CAP_SYS_ADMIN: every process line is shown
 * @uid: the reader's uid; its own processes are always shown
 * @pid_ns: the pid namespace of the proc mount read; other processes are not
 */
struct pinmem_reader {
	bool privileged;
	kuid_t uid;
	struct pid_namespace *pid_ns;
};

/*
 * The pid @v has for @rd, 0 once exited; false when @rd may not see @v: a
 * reader without privilege sees the processes it opened as (its uid) and
 * those charged to it (its own user namespaces' processes).
 */
static bool pinmem_process_visible(const struct pinmem_reader *rd,
				   const struct pinmem_file_view *v, pid_t *pid)
{
	pid_t nr = pid_nr_ns(v->tgid, rd->pid_ns);

	if (!nr)
		return false;
	if (!rd->privileged && !uid_eq(v->uid, rd->uid) &&
	    !uid_eq(v->budget_uid, rd->uid))
		return false;
	*pid = pid_has_task(v->tgid, PIDTYPE_TGID) ? nr : 0;
	return true;
}

static void pinmem_show_process(struct seq_file *m,
				const struct pinmem_file_view *v, pid_t pid)
{
	char comm[TASK_COMM_LEN];
	size_t i;

	strscpy(comm, v->comm, sizeof(comm));
	for (i = 0; comm[i]; i++)
		if (comm[i] <= ' ' || comm[i] >= 0x7f)
			comm[i] = '_';
	if (!comm[0])
		strscpy(comm, "_", sizeof(comm));

	seq_printf(m, "process pid %d uid %u comm %s regions %llu", pid,
		   from_kuid_munged(seq_user_ns(m), v->budget_uid), comm,
		   v->acct.regions);
	seq_printf(m, " pinned_bytes %llu mm_pinned_bytes %llu kmem_bytes %llu",
		   v->acct.pinned_bytes, v->mm_pinned_bytes, v->acct.kmem_bytes);
	seq_printf(m, " opener_uid %u\n",
		   from_kuid_munged(seq_user_ns(m), v->uid));
}

static int pinmem_show_processes(struct seq_file *m)
{
	const struct cred *cred = m->file->f_cred;
	struct pinmem_reader rd = {
		.privileged = file_ns_capable(m->file, &init_user_ns,
					      CAP_SYS_ADMIN),
		.uid = cred->uid,
		.pid_ns = proc_pid_ns(file_inode(m->file)->i_sb),
	};
	struct pinmem_file_view *views;
	size_t nr, i, hidden = 0;
	pid_t pid;
	int ret;

	ret = pinmem_files_snapshot(&views, &nr);
	if (ret)
		return ret;
	for (i = 0; i < nr; i++)
		hidden += !pinmem_process_visible(&rd, &views[i], &pid);
	seq_printf(m, "hidden_processes %zu\n", hidden);
	for (i = 0; i < nr; i++)
		if (pinmem_process_visible(&rd, &views[i], &pid))
			pinmem_show_process(m, &views[i], pid);
	pinmem_files_snapshot_free(views, nr);
	return 0;
}

/*
 * Cgroup lines: a privileged reader sees every cgroup, any other reader the
 * cgroups of its cgroup namespace (all of them in the initial one): names
 * and use of cgroups outside it are not its business, as /proc/PID/cgroup
 * hides them.
 */
static int pinmem_show_cgroups(struct seq_file *m)
{
	u64 root = file_ns_capable(m->file, &init_user_ns, CAP_SYS_ADMIN) ?
		   0 : pinmem_cg_ns_root_id();
	struct pinmem_cg *rows;
	const struct pinmem_cg *cg;
	size_t nr, i;
	int ret;

	pinmem_cg_prune(UINT_MAX);	/* no row for the limit of a removed cgroup */
	ret = pinmem_cg_snapshot(&rows, &nr, root);
	if (ret)
		return ret;
	for (i = 0; i < nr; i++) {
		cg = &rows[i];
		seq_printf(m, "cgroup id %llu pinned_bytes %llu limit_bytes %llu peak_bytes %llu refused %llu\n",
			   cg->id, cg->pinned_bytes,
			   cg->limited ? cg->limit : PINMEM_UNLIMITED,
			   cg->peak_bytes, cg->refused);
	}
	kvfree(rows);
	return 0;
}

static int pinmem_stats_show(struct seq_file *m, void *v)
{
	struct pinmem_global_view g;
	struct pinmem_user_view *users;
	size_t nr, i;
	int ret;

	ret = pinmem_budget_users_snapshot(&users, &nr);
	if (ret)
		return ret;
	pinmem_budget_global(&g);
	seq_printf(m, "pinmem_stats_version %d\n", PINMEM_STATS_VERSION);
	seq_printf(m, "abi %d.%d\n", PINMEM_ABI_MAJOR, PINMEM_ABI_MINOR);
	seq_puts(m, "global");
	pinmem_show_acct(m, &g.acct, g.limit);
	pinmem_show_acct_more(m, &g.acct);
	seq_putc(m, '\n');
	seq_printf(m, "default_user_limit_bytes %llu\n", g.default_user_limit);
	seq_printf(m, "enforce_rlimit %d\n", g.enforce_rlimit);
	seq_printf(m, "max_regions_per_file %u\n", g.max_regions_per_file);
	seq_printf(m, "max_regions_per_user %u\n", g.max_regions_per_user);
	seq_printf(m, "max_idle_users %u\n", g.max_idle_users);
	seq_printf(m, "idle_users %llu\n", g.idle_users);
	for (i = 0; i < nr; i++)
		pinmem_show_user(m, &users[i]);
	kvfree(users);
	pinmem_show_evicted(m, &g);
	ret = pinmem_show_cgroups(m);
	if (ret)
		return ret;
	return pinmem_show_processes(m);
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
	c->refused_fault = a->refused_fault + a->refused_refs;	/* as in 1.4 */
	c->kmem_bytes = a->kmem_bytes;
	c->refused_regions = a->refused_regions;
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
	kuid_t uid = pinmem_budget_current_user();

	pinmem_budget_global(&g);
	pinmem_budget_user(uid, &u);
	pinmem_budget_file(f, &a);

	st->uid = from_kuid_munged(current_user_ns(), uid);
	pinmem_counters_fill(&st->global, &g.acct, g.limit);
	pinmem_counters_fill(&st->user, &u.acct, u.limit);
	pinmem_counters_fill(&st->file, &a, pinmem_budget_rlimit(f));
	st->mm_pinned_bytes = pinmem_mm_pinned_bytes(f->mm);
	st->user_locked_bytes = pinmem_budget_user_locked(f);
	pinmem_budget_file_cgroup(f, &st->cgroup_id, &st->refused_cgroup_id);
	st->refused_cgroup = a.refused_cgroup;
	memset(st->reserved, 0, sizeof(st->reserved));
}

static void pinmem_refusals_copy(__u64 *dst, const struct pinmem_acct *a)
{
	unsigned int i;

	for (i = 0; i < PINMEM_REASON_COUNT; i++)
		dst[i] = pinmem_acct_refused(a, i);
}

/**
 * pinmem_refusals_fill() - PINMEM_IOC_REFUSALS: refused PINs by reason
 * @f: the file asked
 * @r: filled in except @r->flags: the global, the calling user's, @f's and
 *	the evicted users' refusals, and the bound on idle users
 */
void pinmem_refusals_fill(struct pinmem_file *f, struct pinmem_refusals *r)
{
	struct pinmem_global_view g;
	struct pinmem_user_view u;
	struct pinmem_acct a;
	kuid_t uid = pinmem_budget_current_user();
	u32 flags = r->flags;

	pinmem_budget_global(&g);
	pinmem_budget_user(uid, &u);
	pinmem_budget_file(f, &a);

	memset(r, 0, sizeof(*r));
	r->flags = flags;
	r->uid = from_kuid_munged(current_user_ns(), uid);
	r->nr_reasons = PINMEM_REASON_COUNT;
	pinmem_refusals_copy(r->global, &g.acct);
	pinmem_refusals_copy(r->user, &u.acct);
	pinmem_refusals_copy(r->file, &a);
	pinmem_refusals_copy(r->evicted, &g.evicted);
	r->evicted_users = g.evicted_users;
	r->idle_users = g.idle_users;
	r->max_idle_users = g.max_idle_users;
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
