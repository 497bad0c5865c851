// SPDX-License-Identifier: MIT
/*
 * Turning a refused pin into one sentence a person can act on: which budget
 * refused, what is in use, the limit and the amount asked for.  Which budget
 * refused comes from the reason the module wrote back into the PIN (ABI 1.1;
 * a module of ABI 1.0 leaves it 0 and the refusal counters tell instead);
 * the numbers come from the STATS ioctl right after the refusal; mlock's
 * from RLIMIT_MEMLOCK and VmLck.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "fmt.h"
#include "refusal.h"

/* The budget a refusal names, and where STATS keeps its use and limit. */
struct budget {
	const char *name;
	const char *hint;
	uint64_t used, limit;
	uint64_t refused, refused_before;	/* counters, for ABI 1.0 modules */
};

/* The budget behind @reason (or @err from a module without reasons). */
static bool budget_of(int err, uint32_t reason, const struct pinmem_stats *st,
		      const struct pinmem_stats *before, struct budget *b)
{
	if (reason == PINMEM_REFUSED_GLOBAL || (!reason && err == -PINMEM_ERR_GLOBAL)) {
		*b = (struct budget){ "the global budget", "", st->global.pinned_bytes,
				      st->global.limit_bytes, st->file.refused_global,
				      before ? before->file.refused_global : 0 };
	} else if (reason == PINMEM_REFUSED_USER || (!reason && err == -PINMEM_ERR_USER)) {
		*b = (struct budget){ "the per-user budget", "", st->user.pinned_bytes,
				      st->user.limit_bytes, st->file.refused_user,
				      before ? before->file.refused_user : 0 };
	} else if (reason == PINMEM_REFUSED_RLIMIT || (!reason && err == -PINMEM_ERR_RLIMIT)) {
		*b = (struct budget){ "RLIMIT_MEMLOCK", "; raise it with ulimit -l",
				      st->mm_pinned_bytes, st->file.limit_bytes,
				      st->file.refused_rlimit,
				      before ? before->file.refused_rlimit : 0 };
	} else if (reason == PINMEM_REFUSED_RLIMIT_USER) {
		*b = (struct budget){ "RLIMIT_MEMLOCK (counted for all processes of this user, io_uring buffers included)",
				      "; raise it with ulimit -l or release pins elsewhere",
				      st->user_locked_bytes, st->file.limit_bytes, 0, 0 };
	} else {
		return false;
	}
	return true;
}

/*
 * The cgroup with id @id among this process's cgroup and its ancestors (a
 * PIN is charged to the pinning task's cgroup at PIN time): its path and
 * numbers; -ENOENT, or -EOPNOTSUPP when the module finds no cgroup v2.
 */
static int cgroup_of(const struct pm_sys_ops *sys, int dev_fd, uint64_t id, char *path,
		     size_t len, struct pinmem_cgroup *out)
{
	char line[4096], *p = NULL, *slash;
	FILE *f = fopen("/proc/self/cgroup", "re");
	int r;

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "0::", 3)) {
			p = line + 3;
			p[strcspn(p, "\n")] = '\0';
			break;
		}
	if (f)
		fclose(f);
	while (p && *p == '/')
		p++;
	while (p && *p) {
		memset(out, 0, sizeof(*out));
		out->path = (uintptr_t)p;
		out->path_len = (uint32_t)strlen(p);
		r = sys->ioctl(dev_fd, PINMEM_IOC_CGROUP, out);
		if (r == -EOPNOTSUPP)
			return r;
		if (!r && out->cgroup_id == id) {
			snprintf(path, len, "/%s", p);
			return 0;
		}
		slash = strrchr(p, '/');
		if (!slash)
			break;
		*slash = '\0';
	}
	/* Not found: is it because there is no cgroup v2 to look in? */
	memset(out, 0, sizeof(*out));
	out->path = (uintptr_t)"";
	r = sys->ioctl(dev_fd, PINMEM_IOC_CGROUP, out);
	return r == -EOPNOTSUPP ? r : -ENOENT;
}

static int refuse_cgroup(const struct pm_sys_ops *sys, int dev_fd, int err, const char *ask,
			 char *msg, size_t msg_len)
{
	struct pinmem_stats st;
	struct pinmem_cgroup cg;
	char path[4096], use[64];
	int r;

	memset(&st, 0, sizeof(st));
	r = sys->ioctl(dev_fd, PINMEM_IOC_STATS, &st);
	if (!r)
		r = cgroup_of(sys, dev_fd, st.refused_cgroup_id, path, sizeof(path), &cg);
	if (r == -EOPNOTSUPP)	/* cgroup2 unmounted since the refusal */
		snprintf(msg, msg_len,
			 "pinning %s was refused by the budget of cgroup id %llu; cgroup budgets need cgroup v2, which is not mounted now",
			 ask, (unsigned long long)st.refused_cgroup_id);
	else if (r)
		snprintf(msg, msg_len,
			 "pinning %s was refused by the budget of cgroup id %llu (not on this process's cgroup path any more)",
			 ask, (unsigned long long)st.refused_cgroup_id);
	else
		snprintf(msg, msg_len, "pinning %s would exceed the budget of cgroup %s: %s in use",
			 ask, path, pm_fmt_use(use, sizeof(use), cg.pinned_bytes, cg.limit_bytes));
	return err;
}

/* snprintf into msg, then return err. */
#define SAY(err, ...)	(snprintf(msg, msg_len, __VA_ARGS__), (err))

int pm_refusal_module(const struct pm_sys_ops *sys, int dev_fd, int err, size_t len,
		      const struct pinmem_stats *before, uint32_t reason,
		      char *msg, size_t msg_len)
{
	struct pinmem_stats st;
	struct budget b;
	char ask[32], use[64];
	int r;

	pm_fmt_bytes(ask, sizeof(ask), len);
	if (reason == PINMEM_REFUSED_REGIONS_FILE || reason == PINMEM_REFUSED_REGIONS_USER)
		return SAY(err,
			   "pinning %s was refused: %s holds as many regions as the module allows (max_regions_per_%s); pin fewer, larger buffers",
			   ask, reason == PINMEM_REFUSED_REGIONS_FILE ? "this context" : "this user",
			   reason == PINMEM_REFUSED_REGIONS_FILE ? "file" : "user");
	if (reason == PINMEM_REFUSED_CGROUP)
		return refuse_cgroup(sys, dev_fd, err, ask, msg, msg_len);
	if (reason == PINMEM_REFUSED_FOLIO_PINS || (!reason && err == -PINMEM_ERR_FOLIO_PINS))
		return SAY(err,
			   "pinning %s was refused: this context already holds %d times as many page pins as a huge page in that range has pages (overlapping pins); unpin some, or pin the buffer once",
			   ask, PINMEM_FOLIO_MAX_PINS);
	if (reason == PINMEM_REFUSED_PAGE_REFS)
		return SAY(err,
			   "pinning %s was refused: a page in that range is pinned so many times (a page mapped at many addresses, or pinned by many regions) that one more pin would near its reference count's limit; pin each page once",
			   ask);
	if (reason == PINMEM_REFUSED_KMEM)
		return SAY(err,
			   "pinning %s through /dev/pinmem failed: the kernel is out of memory for its bookkeeping (no budget refused it)",
			   ask);
	memset(&st, 0, sizeof(st));
	r = sys->ioctl(dev_fd, PINMEM_IOC_STATS, &st);
	if (!budget_of(err, reason, &st, before, &b))
		return SAY(err, "pinning %s through /dev/pinmem failed: %s", ask, strerror(-err));
	/* Without a reason (ABI 1.0), ENOMEM is also "out of memory": ask the counters. */
	if (!reason && !r && before && b.refused == b.refused_before)
		return SAY(err, "pinning %s through /dev/pinmem failed: %s (no budget refused it)",
			   ask, strerror(-err));
	if (r)
		return SAY(err, "pinning %s was refused by %s (reading its use failed: %s)",
			   ask, b.name, strerror(-r));
	/* The numbers moved between the refusal and STATS: say only what is known. */
	if (b.limit != PINMEM_UNLIMITED && b.used + len <= b.limit)
		return SAY(err, "pinning %s was refused by %s (now %s in use)",
			   ask, b.name, pm_fmt_use(use, sizeof(use), b.used, b.limit));
	if (b.limit == PINMEM_UNLIMITED)
		return SAY(err, "pinning %s was refused by %s (unlimited, %s in use)",
			   ask, b.name, pm_fmt_bytes(use, sizeof(use), b.used));
	return SAY(err, "pinning %s would exceed %s: %s in use%s",
		   ask, b.name, pm_fmt_use(use, sizeof(use), b.used, b.limit), b.hint);
}

int pm_refusal_mlock(const struct pm_sys_ops *sys, int err, size_t len,
		     char *msg, size_t msg_len)
{
	uint64_t limit = UINT64_MAX, locked = 0;
	char ask[32], lim[32], lck[32];

	pm_fmt_bytes(ask, sizeof(ask), len);
	if ((err == -ENOMEM || err == -EPERM) &&
	    !sys->memlock(&limit, &locked) && limit != UINT64_MAX &&
	    locked + len > limit) {
		pm_fmt_bytes(lim, sizeof(lim), limit);
		if (locked)
			return SAY(-ENOMEM,
				   "mlock of %s exceeds RLIMIT_MEMLOCK (%s, %s already locked); raise it with ulimit -l or use /dev/pinmem",
				   ask, lim, pm_fmt_bytes(lck, sizeof(lck), locked));
		return SAY(-ENOMEM,
			   "mlock of %s exceeds RLIMIT_MEMLOCK (%s); raise it with ulimit -l or use /dev/pinmem",
			   ask, lim);
	}
	return SAY(err, "mlock of %s failed: %s", ask, strerror(-err));
}
