// SPDX-License-Identifier: MIT
/*
 * One snapshot of pinned memory.  With the module: its stats file (every
 * user and process) or, if that cannot be read, the STATS ioctl (the global
 * budget and the caller's own).  Without it: the kernel's own counters, which
 * see every pin on the machine but enforce no budget.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/types.h>
#include "uapi/pinmem.h"
#include "pinctl.h"

const char *const pctl_ref_names[PCTL_NR_REF] = {
	"global", "user", "rlimit", "fault", "regions", "cgroup", "refs",
};

const char *pctl_source_name(enum pctl_source src)
{
	switch (src) {
	case PCTL_SRC_PROC:
		return "stats-file";
	case PCTL_SRC_IOCTL:
		return "stats-ioctl";
	case PCTL_SRC_KERNEL:
		return "kernel-counters";
	default:
		return "auto";
	}
}

void pctl_snapshot_free(struct pctl_snapshot *snap)
{
	free(snap->users);
	free(snap->procs);
	free(snap->cgroups);
	snap->users = NULL;
	snap->procs = NULL;
	snap->cgroups = NULL;
	snap->nr_users = snap->nr_procs = snap->nr_cgroups = 0;
}

int pctl_mem_total(const struct pctl_env *env, uint64_t *bytes)
{
	char *text;
	int ret = pctl_read_at(env->proc_root, "meminfo", &text, NULL);

	if (ret)
		return ret;
	ret = pctl_kv_kb(text, "MemTotal", bytes);
	free(text);
	return ret;
}

/* "name value" lines of /proc/vmstat */
static int vmstat_value(const char *text, const char *key, uint64_t *val)
{
	size_t klen = strlen(key);
	unsigned long long v;

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p) {
		if (!strncmp(p, key, klen) && p[klen] == ' ' &&
		    sscanf(p + klen + 1, "%llu", &v) == 1) {
			*val = v;
			return 0;
		}
	}
	return -ENOENT;
}

static int read_process(const struct pctl_env *env, const char *pid,
			struct pctl_snapshot *snap)
{
	struct pctl_proc *p, *procs;
	char rel[300], *text, *name, *uid;
	uint64_t vm_pin = 0, vm_lck = 0;
	unsigned int u = 0;

	snprintf(rel, sizeof(rel), "%s/status", pid);
	if (pctl_read_at(env->proc_root, rel, &text, NULL))
		return 0;	/* the process went away or is not ours to read */
	pctl_kv_kb(text, "VmPin", &vm_pin);
	pctl_kv_kb(text, "VmLck", &vm_lck);
	if (!vm_pin && !vm_lck) {
		free(text);
		return 0;
	}
	procs = realloc(snap->procs, sizeof(*p) * (snap->nr_procs + 1));
	if (!procs) {
		free(text);
		return -ENOMEM;
	}
	snap->procs = procs;
	p = &procs[snap->nr_procs++];
	memset(p, 0, sizeof(*p));
	p->pid = atoi(pid);
	p->vm_pin = vm_pin;
	p->vm_lck = vm_lck;
	name = strstr(text, "Name:\t");
	if (name) {
		size_t n = strcspn(name + 6, "\n");

		if (n >= sizeof(p->comm))
			n = sizeof(p->comm) - 1;
		memcpy(p->comm, name + 6, n);
		p->comm[n] = '\0';
	}
	uid = strstr(text, "\nUid:");
	if (uid && sscanf(uid + 5, "%u", &u) == 1)
		p->uid = u;
	free(text);
	return 0;
}

int pctl_kernel_collect(const struct pctl_env *env, struct pctl_snapshot *snap, bool procs)
{
	uint64_t acq, rel;
	char *text;
	DIR *dir;
	struct dirent *de;
	int ret;

	snap->page_size = (uint64_t)sysconf(_SC_PAGESIZE);
	ret = pctl_read_at(env->proc_root, "meminfo", &text, NULL);
	if (ret)
		return ret;
	pctl_kv_kb(text, "MemTotal", &snap->mem_total);
	pctl_kv_kb(text, "Mlocked", &snap->mlocked);
	free(text);
	if (!pctl_read_at(env->proc_root, "vmstat", &text, NULL)) {
		if (!vmstat_value(text, "nr_foll_pin_acquired", &acq) &&
		    !vmstat_value(text, "nr_foll_pin_released", &rel)) {
			snap->have_foll_pin = true;
			/* read non-atomically: never report a negative count */
			snap->foll_pin_bytes = acq > rel ? (acq - rel) * snap->page_size : 0;
		}
		free(text);
	}
	if (!procs)
		return 0;
	dir = opendir(env->proc_root);
	if (!dir)
		return -errno;
	ret = 0;
	while (!ret && (de = readdir(dir))) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		ret = read_process(env, de->d_name, snap);
	}
	closedir(dir);
	return ret;
}

int pctl_dev_open(const struct pctl_env *env, unsigned int *major, unsigned int *minor)
{
	struct pinmem_version ver;
	char path[512];
	int fd, ret;

	ret = pctl_path(path, sizeof(path), env->dev_root, "pinmem");
	if (ret)
		return ret;
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0 && errno == EACCES)
		fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	memset(&ver, 0, sizeof(ver));
	if (ioctl(fd, PINMEM_IOC_GET_VERSION, &ver)) {
		ret = -errno;	/* ENOTTY: not a pinmem device */
		close(fd);
		return ret;
	}
	*major = ver.abi_major;
	*minor = ver.abi_minor;
	if (ver.abi_major != PINMEM_ABI_MAJOR) {
		close(fd);
		return -EPROTO;
	}
	return fd;
}

static void counters_from(struct pctl_counters *c, const struct pinmem_counters *k)
{
	c->pinned_bytes = k->pinned_bytes;
	c->limit_bytes = k->limit_bytes;
	c->peak_bytes = k->peak_bytes;
	c->regions = k->regions;
	c->pins = k->pins;
	c->unpins = k->unpins;
	c->refused[PCTL_REF_GLOBAL] = k->refused_global;
	c->refused[PCTL_REF_USER] = k->refused_user;
	c->refused[PCTL_REF_RLIMIT] = k->refused_rlimit;
	c->refused[PCTL_REF_FAULT] = k->refused_fault;
	c->refused[PCTL_REF_REGIONS] = k->refused_regions;
}

/* ABI 1.5: every reason, the cgroup and refs ones included, and the bound. */
static void refusals_from(int fd, struct pctl_snapshot *snap)
{
	struct pinmem_refusals r;

	memset(&r, 0, sizeof(r));
	if (ioctl(fd, PINMEM_IOC_REFUSALS, &r))
		return;
	for (int i = 0; i < PCTL_NR_REF && i < (int)r.nr_reasons; i++) {
		snap->global.refused[i] = r.global[i];
		snap->users[0].c.refused[i] = r.user[i];
		snap->evicted.refused[i] = r.evicted[i];
	}
	snap->have_evicted = true;
	snap->evicted_users = r.evicted_users;
	snap->idle_users = r.idle_users;
	snap->max_idle_users = r.max_idle_users;
}

static int collect_ioctl(const struct pctl_env *env, struct pctl_snapshot *snap,
			 char *why, size_t why_len)
{
	struct pinmem_stats st;
	struct pinmem_limits lim;
	unsigned int maj = 0, min = 0;
	int fd = pctl_dev_open(env, &maj, &min);

	if (fd == -EPROTO) {
		snprintf(why, why_len,
			 "the loaded pinmem module speaks ABI %u.%u, this pinctl ABI %d.x; install matching versions",
			 maj, min, PINMEM_ABI_MAJOR);
		return fd;
	}
	if (fd < 0) {
		snprintf(why, why_len, "cannot open %s/pinmem: %s", env->dev_root, strerror(-fd));
		return fd;
	}
	memset(&st, 0, sizeof(st));
	if (ioctl(fd, PINMEM_IOC_STATS, &st)) {
		int ret = -errno;

		snprintf(why, why_len, "STATS ioctl: %s", strerror(errno));
		close(fd);
		return ret;
	}
	memset(&lim, 0, sizeof(lim));
	lim.uid = st.uid;
	if (!ioctl(fd, PINMEM_IOC_GET_LIMITS, &lim)) {
		snap->default_user_limit = lim.default_user_limit;
		snap->enforce_rlimit = (int)lim.enforce_rlimit;
	}
	snap->users = calloc(1, sizeof(*snap->users));
	if (!snap->users) {
		close(fd);
		return -ENOMEM;
	}
	snap->module = true;
	snap->source = PCTL_SRC_IOCTL;
	snap->abi_major = maj;
	snap->abi_minor = min;
	counters_from(&snap->global, &st.global);
	snap->nr_users = 1;
	snap->users[0].uid = st.uid;
	snap->users[0].overridden = lim.user_flags & PINMEM_USER_OVERRIDDEN;
	counters_from(&snap->users[0].c, &st.user);
	if (maj > 1 || min >= 5)
		refusals_from(fd, snap);
	close(fd);
	return 0;
}

static int collect_proc(const struct pctl_env *env, struct pctl_snapshot *snap,
			char *why, size_t why_len)
{
	char *text;
	int ret = pctl_read_at(env->proc_root, "driver/pinmem/stats", &text, NULL);

	if (ret) {
		snprintf(why, why_len, "cannot read %s/driver/pinmem/stats: %s",
			 env->proc_root, strerror(-ret));
		return ret;
	}
	ret = pctl_stats_parse(text, snap, why, why_len);
	free(text);
	return ret;
}

static bool module_present(const struct pctl_env *env)
{
	char path[512];
	struct stat st;

	if (pctl_path(path, sizeof(path), env->sys_root, "module/pinmem"))
		return false;
	return !stat(path, &st);
}

int pctl_snapshot_collect(const struct pctl_env *env, enum pctl_source src,
			  struct pctl_snapshot *snap, char *why, size_t why_len)
{
	char first[160] = "";
	int ret;

	memset(snap, 0, sizeof(*snap));
	snap->enforce_rlimit = -1;
	why[0] = '\0';
	switch (src) {
	case PCTL_SRC_PROC:
		ret = collect_proc(env, snap, why, why_len);
		break;
	case PCTL_SRC_IOCTL:
		ret = collect_ioctl(env, snap, why, why_len);
		break;
	case PCTL_SRC_KERNEL:
		ret = 0;
		break;
	default:
		ret = collect_proc(env, snap, first, sizeof(first));
		if (ret == -EPROTO || ret == -ENOMEM) {
			snprintf(why, why_len, "%s", first);
			break;
		}
		if (!ret)
			break;
		pctl_snapshot_free(snap);
		memset(snap, 0, sizeof(*snap));
		snap->enforce_rlimit = -1;
		ret = collect_ioctl(env, snap, why, why_len);
		if (ret == -EPROTO || ret == -ENOMEM)
			break;
		if (!ret) {
			snprintf(snap->note, sizeof(snap->note),
				 "per-user and per-process tables need %s", PINMEM_STATS_PATH);
			break;
		}
		pctl_snapshot_free(snap);
		memset(snap, 0, sizeof(*snap));
		snap->enforce_rlimit = -1;
		if (module_present(env) || ret != -ENOENT) {
			/* loaded, but neither the file nor the device is ours */
			snprintf(snap->note, sizeof(snap->note),
				 "the pinmem module is loaded but its stats are not readable (%s)",
				 why);
		}
		why[0] = '\0';
		ret = 0;
		break;
	}
	if (ret) {
		pctl_snapshot_free(snap);
		return ret;
	}
	if (!snap->module)
		snap->source = PCTL_SRC_KERNEL;
	ret = pctl_kernel_collect(env, snap, !snap->module);
	if (ret) {
		snprintf(why, why_len, "cannot read %s: %s", env->proc_root, strerror(-ret));
		pctl_snapshot_free(snap);
		return ret;
	}
	pctl_snapshot_sort(snap);
	pctl_snapshot_names(env, snap);
	return 0;
}

static int cmp_user(const void *a, const void *b)
{
	const struct pctl_user *x = a, *y = b;

	if (x->c.pinned_bytes != y->c.pinned_bytes)
		return x->c.pinned_bytes > y->c.pinned_bytes ? -1 : 1;
	return x->uid < y->uid ? -1 : x->uid > y->uid;
}

static uint64_t proc_key(const struct pctl_proc *p)
{
	return p->pinned_bytes + (p->vm_pin > p->vm_lck ? p->vm_pin : p->vm_lck);
}

static int cmp_proc(const void *a, const void *b)
{
	const struct pctl_proc *x = a, *y = b;

	if (proc_key(x) != proc_key(y))
		return proc_key(x) > proc_key(y) ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

void pctl_snapshot_sort(struct pctl_snapshot *snap)
{
	if (snap->nr_users)
		qsort(snap->users, snap->nr_users, sizeof(*snap->users), cmp_user);
	if (snap->nr_procs)
		qsort(snap->procs, snap->nr_procs, sizeof(*snap->procs), cmp_proc);
}

void pctl_snapshot_names(const struct pctl_env *env, struct pctl_snapshot *snap)
{
	for (size_t i = 0; i < snap->nr_users; i++)
		pctl_user_name(env, snap->users[i].uid, snap->users[i].name,
			       sizeof(snap->users[i].name));
	for (size_t i = 0; i < snap->nr_procs; i++)
		pctl_user_name(env, snap->procs[i].uid, snap->procs[i].user,
			       sizeof(snap->procs[i].user));
	pctl_cgroup_paths(env, snap);
}
