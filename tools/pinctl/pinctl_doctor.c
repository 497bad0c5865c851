// SPDX-License-Identifier: MIT
/*
 * `pinctl doctor`: what stops this user from pinning, and what to do about
 * it.  Each check says ok, info, warn or FAIL with one line of detail and,
 * when something is wrong, one line of advice.  Only what prevents pinning
 * through pinmem is a FAIL (exit status 1).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/types.h>
#include "uapi/pinmem.h"
#include "pinctl.h"

#define CAP_IPC_LOCK_BIT 14
#define CAP_SYS_RESOURCE_BIT 24
#define LOW_MEMLOCK (1ULL << 30)

enum { CK_OK, CK_INFO, CK_WARN, CK_FAIL };
static const char *const ck_names[] = { "ok", "info", "warn", "fail" };
static const char *const ck_tags[] = { " ok ", "info", "warn", "FAIL" };

struct check {
	const char *name;
	int status;
	char detail[768];
	char advice[256];
};

enum { C_MODULE, C_DEVICE, C_SIGNATURE, C_MEMLOCK, C_THP, C_HUGETLB, C_IOURING, C_CUDA, NR_CHECKS };

/*
 * Who "this user" is: the recorded or real /proc/self/status.  With
 * CAP_IPC_LOCK in its effective set RLIMIT_MEMLOCK does not bind it (mlock,
 * io_uring and pinmem skip the check; root normally has it, root in a
 * container often not); with CAP_SYS_RESOURCE it may raise its own hard
 * limit.
 */
struct self_info {
	uint32_t uid;
	bool ipc_lock;
	bool sys_resource;
};

static void self_read(const struct pctl_env *env, struct self_info *self)
{
	unsigned long long cap = 0;
	char *text, *p;

	self->uid = getuid();
	self->ipc_lock = false;
	self->sys_resource = false;
	if (pctl_read_at(env->proc_root, "self/status", &text, NULL))
		return;
	p = strstr(text, "\nUid:");
	if (p)
		sscanf(p + 5, "%u", &self->uid);
	p = strstr(text, "\nCapEff:");
	if (p && sscanf(p + 8, "%llx", &cap) == 1) {
		self->ipc_lock = cap & (1ULL << CAP_IPC_LOCK_BIT);
		self->sys_resource = cap & (1ULL << CAP_SYS_RESOURCE_BIT);
	}
	free(text);
}

#define SET(ck, st, ...) do { (ck)->status = (st); \
	snprintf((ck)->detail, sizeof((ck)->detail), __VA_ARGS__); } while (0)
#define ADVISE(ck, ...) snprintf((ck)->advice, sizeof((ck)->advice), __VA_ARGS__)

static void check_module(const struct pctl_env *env, struct check *ck, int dev_ret, unsigned int maj, unsigned int min,
			 const struct pctl_snapshot *snap, int snap_ret, const char *why)
{
	char path[512];
	struct stat st;
	bool sysfs = !pctl_path(path, sizeof(path), env->sys_root, "module/pinmem") &&
		     !stat(path, &st);

	if (dev_ret == -EPROTO || snap_ret == -EPROTO) {
		if (dev_ret == -EPROTO)
			SET(ck, CK_FAIL, "pinmem ABI %u.%u is loaded, pinctl speaks ABI %d.x",
			    maj, min, PINMEM_ABI_MAJOR);
		else
			SET(ck, CK_FAIL, "%s", why);
		ADVISE(ck, "install the module and the tools from the same release (dkms status; pinctl --version)");
	} else if (dev_ret >= 0) {
		SET(ck, CK_OK, "pinmem loaded, ABI %u.%u (pinctl speaks ABI %d.x)", maj, min,
		    PINMEM_ABI_MAJOR);
	} else if (snap->module) {
		SET(ck, CK_OK, "pinmem loaded, ABI %u.%u (pinctl speaks ABI %d.x)",
		    snap->abi_major, snap->abi_minor, PINMEM_ABI_MAJOR);
	} else if (sysfs) {
		SET(ck, CK_OK, "pinmem loaded (ABI unknown: the device and the stats file are not readable)");
	} else {
		SET(ck, CK_FAIL, "pinmem module not loaded: no budgets, no /dev/pinmem");
		ADVISE(ck, "load it: sudo modprobe pinmem (dkms builds it for each kernel); until then libpinmem falls back to mlock");
	}
}

static void check_device(const struct pctl_env *env, struct check *ck, int dev_ret,
			 bool loaded, const struct self_info *self)
{
	char path[512];
	struct stat st;

	pctl_path(path, sizeof(path), env->dev_root, "pinmem");
	if (stat(path, &st) && !loaded) {
		SET(ck, CK_INFO, "no %s: the module is not loaded", path);
		return;
	}
	if (stat(path, &st)) {
		SET(ck, CK_FAIL, "%s is missing", path);
		ADVISE(ck, "load the module (sudo modprobe pinmem); if it is loaded, check udev and dmesg");
		return;
	}
	if (dev_ret >= 0 || dev_ret == -EPROTO) {
		SET(ck, CK_OK, "%s (mode %04o, owner %u:%u) opens for uid %u", path,
		    st.st_mode & 07777, st.st_uid, st.st_gid, self->uid);
		return;
	}
	SET(ck, CK_FAIL, "%s (mode %04o, owner %u:%u): %s for uid %u", path, st.st_mode & 07777,
	    st.st_uid, st.st_gid, strerror(-dev_ret), self->uid);
	if (dev_ret == -EACCES || dev_ret == -EPERM)
		ADVISE(ck, "ask root for access, e.g. udev rule KERNEL==\"pinmem\", GROUP=\"pinmem\", MODE=\"0660\" and add this user to group pinmem");
	else if (dev_ret == -ENOTTY)
		ADVISE(ck, "the device does not answer GET_VERSION: is it the pinmem device?");
}

/*
 * What makes this kernel refuse a module that is unsigned or signed by a key
 * it does not trust: module.sig_enforce (CONFIG_MODULE_SIG_FORCE sets it),
 * lockdown (which Secure Boot turns on in Debian's kernels), and Secure Boot
 * itself.  Writes the reasons that hold into @why; returns whether any does.
 */
#define EFI_GLOBAL_GUID "8be4df61-93ca-11d2-aa0d-00e098032b8c"

static bool sig_enforced(const struct pctl_env *env, char *why, size_t len)
{
	char *text, *open, *close;
	size_t n = 0, size;
	bool on = false;

	why[0] = '\0';
	if (!pctl_read_at(env->sys_root, "module/module/parameters/sig_enforce", &text, NULL)) {
		if (text[0] == 'Y') {
			n += snprintf(why + n, len - n, "module.sig_enforce=1");
			on = true;
		}
		free(text);
	}
	if (!pctl_read_at(env->sys_root, "kernel/security/lockdown", &text, NULL)) {
		open = strchr(text, '[');
		close = open ? strchr(open, ']') : NULL;
		if (close && strncmp(open + 1, "none]", 5)) {
			*close = '\0';
			n += snprintf(why + n, n < len ? len - n : 0, "%slockdown=%s", n ? ", " : "", open + 1);
			on = true;
		}
		free(text);
	}
	/* efivarfs: 4 bytes of attributes, then the value. */
	if (!pctl_read_at(env->sys_root, "firmware/efi/efivars/SecureBoot-" EFI_GLOBAL_GUID, &text, &size)) {
		if (size >= 5 && text[4] == 1) {
			snprintf(why + n, n < len ? len - n : 0, "%sSecure Boot on", n ? ", " : "");
			on = true;
		}
		free(text);
	}
	return on;
}

/*
 * The last kernel log line in which the kernel refused a module for its
 * signature (there is no module name in them; they come from
 * module_sig_check() and lockdown), read from /dev/kmsg without blocking.
 * Returns 0, or -errno when the log is not readable (dmesg_restrict: root).
 */
static const char *const sig_refusals[] = {
	"Loading of unsigned module is rejected",
	"Loading of module with unavailable key is rejected",
	"Loading of module with unsupported crypto is rejected",
	"unsigned module loading is restricted",
};

static int last_sig_refusal(const struct pctl_env *env, char *line, size_t len)
{
	char path[512], rec[8192];
	ssize_t r;
	int fd;

	line[0] = '\0';
	if (pctl_path(path, sizeof(path), env->dev_root, "kmsg"))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/*
	 * /dev/kmsg returns one record per read ("prio,seq,usec,flags;text\n"
	 * plus continuation lines); EPIPE: records were overwritten meanwhile,
	 * EAGAIN: the end.  A recorded file gives whole lines of the same form.
	 */
	for (;;) {
		r = read(fd, rec, sizeof(rec) - 1);
		if (r < 0 && errno == EPIPE)
			continue;
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		rec[r] = '\0';
		for (char *l = rec, *next; l && *l; l = next) {
			char *text;

			next = strchr(l, '\n');
			if (next)
				*next++ = '\0';
			text = strchr(l, ';');
			text = text ? text + 1 : l;
			for (size_t i = 0; i < sizeof(sig_refusals) / sizeof(sig_refusals[0]); i++) {
				size_t n = strnlen(text, len - 1);

				if (!strstr(text, sig_refusals[i]))
					continue;
				memcpy(line, text, n);
				line[n] = '\0';
			}
		}
	}
	close(fd);
	return 0;
}

#define SIG_ADVICE "enroll the key DKMS signs with: sudo mokutil --import /var/lib/dkms/mok.pub, reboot and confirm in MokManager, then sudo modprobe pinmem"

static void check_signature(const struct pctl_env *env, struct check *ck, bool loaded)
{
	char why[128], line[256], *taint;
	bool enforced = sig_enforced(env, why, sizeof(why));
	bool unsigned_loaded = false;
	int ret;

	if (loaded) {
		if (!pctl_read_at(env->sys_root, "module/pinmem/taint", &taint, NULL)) {
			unsigned_loaded = strchr(taint, 'E') != NULL;
			free(taint);
		}
		if (unsigned_loaded) {
			SET(ck, CK_WARN, "pinmem.ko is unsigned or signed by a key this kernel does not trust (taint E): with Secure Boot on, a kernel refuses it");
			ADVISE(ck, "reinstall with DKMS, which signs with /var/lib/dkms/mok.key, and enroll that key: sudo mokutil --import /var/lib/dkms/mok.pub, then reboot and confirm in MokManager");
		} else if (enforced) {
			SET(ck, CK_OK, "module signatures enforced (%s); pinmem.ko's was accepted", why);
		} else {
			SET(ck, CK_OK, "module signatures not enforced on this kernel");
		}
		return;
	}
	ret = last_sig_refusal(env, line, sizeof(line));
	if (line[0]) {
		SET(ck, CK_FAIL, "the kernel refused a module for its signature (log: \"%s\")%s%s", line,
		    enforced ? "; enforced by " : "", why);
		ADVISE(ck, "%s", SIG_ADVICE);
	} else if (enforced) {
		SET(ck, CK_INFO, "this kernel loads only modules signed by a key it trusts (%s); DKMS signs pinmem.ko with /var/lib/dkms/mok.key%s",
		    why, ret == -EPERM || ret == -EACCES ? " (run as root to see a refusal in the kernel log)" : "");
		ADVISE(ck, "check the key is enrolled: mokutil --test-key /var/lib/dkms/mok.pub");
	} else {
		SET(ck, CK_OK, "module signatures not enforced on this kernel");
	}
}

/*
 * The way out of a soft RLIMIT_MEMLOCK below @need: the process itself when
 * the hard limit allows it or it has CAP_SYS_RESOURCE, else an admin.
 */
static void advise_memlock(struct check *ck, const struct self_info *self, uint64_t hard,
			   uint64_t need)
{
	char h[PCTL_SIZE_LEN];

	if (hard == PCTL_UNLIMITED)
		ADVISE(ck, "the hard limit is unlimited: raise the soft one before starting the job: ulimit -l unlimited");
	else if (hard >= need)
		ADVISE(ck, "the hard limit is %s: raise the soft one before starting the job: ulimit -l %llu",
		       pctl_format_size(hard, h, sizeof(h)), (unsigned long long)(hard / 1024));
	else if (self->sys_resource)
		ADVISE(ck, "this process has CAP_SYS_RESOURCE and may raise its hard limit too: ulimit -l unlimited (or prlimit --memlock=unlimited)");
	else if (self->uid == 0)
		ADVISE(ck, "give it CAP_IPC_LOCK (docker run --cap-add IPC_LOCK) or raise the limit (docker --ulimit memlock=-1, LimitMEMLOCK= in a systemd unit)");
	else
		ADVISE(ck, "raise it: memlock in /etc/security/limits.conf, LimitMEMLOCK= in a systemd unit, docker --ulimit memlock=-1");
}

/* Why a process some would expect to be exempt is bound: root without the capability. */
static const char *bound_note(const struct self_info *self)
{
	return self->uid == 0 ? " (root without CAP_IPC_LOCK, as in a container, is bound by it)" : "";
}

static void check_memlock(const struct pctl_env *env, struct check *ck,
			  const struct pctl_snapshot *snap, const struct self_info *self)
{
	char a[PCTL_SIZE_LEN], b[PCTL_SIZE_LEN];
	uint64_t soft, hard, budget;

	if (pctl_memlock_limit(env, &soft, &hard)) {
		SET(ck, CK_WARN, "cannot read RLIMIT_MEMLOCK from %s/self/limits", env->proc_root);
		return;
	}
	pctl_format_size(soft, a, sizeof(a));
	if (!snap->module) {
		if (self->ipc_lock && soft != PCTL_UNLIMITED) {
			SET(ck, CK_OK, "CAP_IPC_LOCK: RLIMIT_MEMLOCK %s does not cap the mlock fallback used without pinmem",
			    a);
		} else if (!self->ipc_lock && soft != PCTL_UNLIMITED && soft < LOW_MEMLOCK) {
			SET(ck, CK_WARN, "RLIMIT_MEMLOCK %s caps the mlock fallback used without pinmem%s",
			    a, bound_note(self));
			advise_memlock(ck, self, hard, LOW_MEMLOCK);
		} else {
			SET(ck, CK_OK, "RLIMIT_MEMLOCK %s (caps the mlock fallback used without pinmem)", a);
		}
		return;
	}
	budget = snap->default_user_limit;
	for (size_t i = 0; i < snap->nr_users; i++)
		if (snap->users[i].uid == self->uid)
			budget = snap->users[i].c.limit_bytes;
	if (snap->global.limit_bytes < budget)
		budget = snap->global.limit_bytes;
	pctl_format_size(budget, b, sizeof(b));
	if (!budget) {
		SET(ck, CK_FAIL, "the pinmem budget of uid %u is 0: every pin is refused", self->uid);
		ADVISE(ck, "ask root: pinctl limits set --user %u=SIZE", self->uid);
	} else if (self->ipc_lock) {
		SET(ck, CK_OK, "CAP_IPC_LOCK: RLIMIT_MEMLOCK %s does not apply to this process; your budget is %s",
		    a, b);
	} else if (snap->enforce_rlimit == 0) {
		SET(ck, CK_OK, "RLIMIT_MEMLOCK %s is not enforced by pinmem; your budget is %s", a, b);
	} else if (soft == PCTL_UNLIMITED || soft >= budget) {
		SET(ck, CK_OK, "RLIMIT_MEMLOCK %s covers your pinmem budget %s", a, b);
	} else {
		SET(ck, CK_WARN, "RLIMIT_MEMLOCK %s is below your pinmem budget %s: pins beyond it fail with ENOMEM%s",
		    a, b, bound_note(self));
		advise_memlock(ck, self, hard, budget);
	}
}

static void check_thp(const struct pctl_env *env, struct check *ck)
{
	char *text, *open, *close;

	if (pctl_read_at(env->sys_root, "kernel/mm/transparent_hugepage/enabled", &text, NULL)) {
		SET(ck, CK_WARN, "no transparent huge pages on this kernel: buffers use 4 KiB pages");
		return;
	}
	open = strchr(text, '[');
	close = open ? strchr(open, ']') : NULL;
	if (!close) {
		SET(ck, CK_WARN, "unreadable THP mode");
	} else {
		*close = '\0';
		if (!strcmp(open + 1, "never")) {
			SET(ck, CK_WARN, "transparent huge pages disabled: pinning 4 KiB pages is slower");
			ADVISE(ck, "echo madvise | sudo tee /sys/kernel/mm/transparent_hugepage/enabled");
		} else {
			SET(ck, CK_OK, "transparent huge pages: %s", open + 1);
		}
	}
	free(text);
}

static void check_hugetlb(const struct pctl_env *env, struct check *ck)
{
	char a[PCTL_SIZE_LEN], *text;
	uint64_t total = 0, nfree = 0, size = 0;

	if (pctl_read_at(env->proc_root, "meminfo", &text, NULL)) {
		SET(ck, CK_WARN, "cannot read %s/meminfo", env->proc_root);
		return;
	}
	pctl_kv_kb(text, "HugePages_Total", &total);
	pctl_kv_kb(text, "HugePages_Free", &nfree);
	pctl_kv_kb(text, "Hugepagesize", &size);
	free(text);
	pctl_format_size(size, a, sizeof(a));
	if (total)
		SET(ck, CK_OK, "%llu hugetlb pages of %s reserved, %llu free",
		    (unsigned long long)total, a, (unsigned long long)nfree);
	else
		SET(ck, CK_INFO, "no hugetlb pages reserved (optional; THP is used instead; sysctl vm.nr_hugepages=N reserves %s pages)",
		    a);
}

static void check_io_uring(const struct pctl_env *env, struct check *ck)
{
	uint64_t v;
	int ret = pctl_read_u64_at(env->proc_root, "sys/kernel/io_uring_disabled", &v);

	if (ret == -ENOENT) {
		SET(ck, CK_OK, "io_uring enabled (this kernel has no kernel.io_uring_disabled)");
	} else if (ret) {
		SET(ck, CK_WARN, "cannot read kernel.io_uring_disabled: %s", strerror(-ret));
	} else if (!v) {
		SET(ck, CK_OK, "io_uring enabled (kernel.io_uring_disabled = 0)");
	} else if (v == 1) {
		SET(ck, CK_WARN, "io_uring limited to group kernel.io_uring_group (kernel.io_uring_disabled = 1)");
		ADVISE(ck, "join the group named by sysctl kernel.io_uring_group, or: sudo sysctl kernel.io_uring_disabled=0");
	} else {
		SET(ck, CK_WARN, "io_uring disabled (kernel.io_uring_disabled = %llu): pinstream cannot read",
		    (unsigned long long)v);
		ADVISE(ck, "sudo sysctl kernel.io_uring_disabled=0");
	}
}

static void check_cuda(const struct pctl_env *env, struct check *ck)
{
	char *text;
	void *h;

	if (!pctl_read_at(env->proc_root, "driver/nvidia/version", &text, NULL)) {
		text[strcspn(text, "\n")] = '\0';
		SET(ck, CK_OK, "%s", text);
		free(text);
		return;
	}
	h = dlopen(env->cuda_lib, RTLD_LAZY | RTLD_LOCAL);
	if (h) {
		dlclose(h);
		SET(ck, CK_OK, "%s loads (no %s/driver/nvidia/version)", env->cuda_lib, env->proc_root);
		return;
	}
	SET(ck, CK_WARN, "no NVIDIA driver (%s/driver/nvidia/version, %s): host copy backend only",
	    env->proc_root, env->cuda_lib);
	ADVISE(ck, "install the NVIDIA driver, or run where a GPU is visible");
}

static void print_text(FILE *f, const struct check *c, int n)
{
	int fails = 0, warns = 0;

	for (int i = 0; i < n; i++) {
		fprintf(f, "[%s] %-9s %s\n", ck_tags[c[i].status], c[i].name, c[i].detail);
		if (c[i].advice[0])
			fprintf(f, "       %-9s -> %s\n", "", c[i].advice);
		fails += c[i].status == CK_FAIL;
		warns += c[i].status == CK_WARN;
	}
	fprintf(f, "doctor: %d failed, %d warnings\n", fails, warns);
}

static void print_json(FILE *f, const struct check *c, int n)
{
	struct pctl_json j;
	bool ok = true;

	pctl_json_init(&j, f, true);
	pctl_json_obj_begin(&j);
	pctl_json_key(&j, "checks");
	pctl_json_arr_begin(&j);
	for (int i = 0; i < n; i++) {
		pctl_json_obj_begin(&j);
		pctl_json_key(&j, "check");
		pctl_json_str(&j, c[i].name);
		pctl_json_key(&j, "status");
		pctl_json_str(&j, ck_names[c[i].status]);
		pctl_json_key(&j, "detail");
		pctl_json_str(&j, c[i].detail);
		pctl_json_key(&j, "advice");
		if (c[i].advice[0])
			pctl_json_str(&j, c[i].advice);
		else
			pctl_json_null(&j);
		pctl_json_obj_end(&j);
		ok &= c[i].status != CK_FAIL;
	}
	pctl_json_arr_end(&j);
	pctl_json_key(&j, "ok");
	pctl_json_bool(&j, ok);
	pctl_json_obj_end(&j);
	pctl_json_done(&j);
}

int pctl_cmd_doctor(const struct pctl_env *env, int argc, char **argv)
{
	static const char *const names[NR_CHECKS] = {
		"module", "device", "signature", "memlock", "thp", "hugetlb", "io_uring", "cuda",
	};
	struct check ck[NR_CHECKS];
	struct pctl_snapshot snap;
	struct self_info self;
	unsigned int maj = 0, min = 0;
	bool json = false;
	char why[256];
	int ret, dev_ret, snap_ret;

	ret = pctl_json_help_opts(env, "doctor", pctl_help_doctor, argc, argv, &json);
	if (ret >= 0)
		return ret;

	memset(ck, 0, sizeof(ck));
	for (int i = 0; i < NR_CHECKS; i++)
		ck[i].name = names[i];
	self_read(env, &self);
	dev_ret = pctl_dev_open(env, &maj, &min);
	if (dev_ret >= 0)
		close(dev_ret);
	snap_ret = pctl_snapshot_collect(env, PCTL_SRC_AUTO, &snap, why, sizeof(why));
	if (snap_ret)
		memset(&snap, 0, sizeof(snap));
	check_module(env, &ck[C_MODULE], dev_ret, maj, min, &snap, snap_ret, why);
	check_device(env, &ck[C_DEVICE], dev_ret, ck[C_MODULE].status != CK_FAIL ||
		     dev_ret != -ENOENT, &self);
	check_signature(env, &ck[C_SIGNATURE], ck[C_MODULE].status != CK_FAIL);
	check_memlock(env, &ck[C_MEMLOCK], &snap, &self);
	check_thp(env, &ck[C_THP]);
	check_hugetlb(env, &ck[C_HUGETLB]);
	check_io_uring(env, &ck[C_IOURING]);
	check_cuda(env, &ck[C_CUDA]);
	pctl_snapshot_free(&snap);

	if (json)
		print_json(env->out, ck, NR_CHECKS);
	else
		print_text(env->out, ck, NR_CHECKS);
	for (int i = 0; i < NR_CHECKS; i++)
		if (ck[i].status == CK_FAIL)
			return PCTL_EXIT_FAIL;
	return PCTL_EXIT_OK;
}
