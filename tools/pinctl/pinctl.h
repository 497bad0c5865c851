/* SPDX-License-Identifier: MIT */
/*
 * pinctl internals: one snapshot of who pins how much, collected from the
 * pinmem module (stats file or STATS ioctl) or, without it, from the kernel's
 * own counters; renderers for text, JSON and Prometheus; the commands.
 *
 * Every call returns 0 or a negative errno.  No global state: the
 * environment (path roots, output streams) travels in struct pctl_env.
 */
#ifndef PINCTL_H
#define PINCTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* Exit statuses of pinctl. */
#define PCTL_EXIT_OK	0
#define PCTL_EXIT_FAIL	1
#define PCTL_EXIT_USAGE	2

#define PCTL_UNLIMITED	UINT64_MAX
#define PCTL_SIZE_LEN	32	/* enough for any pctl_format_size() result */
#define PCTL_COMM_LEN	64

/* Where pinctl looks: every root is overridable so tests run on recorded trees. */
struct pctl_env {
	char proc_root[128];	/* PINCTL_PROC_ROOT, default /proc */
	char sys_root[128];	/* PINCTL_SYS_ROOT, default /sys */
	char dev_root[128];	/* PINCTL_DEV_ROOT, default /dev */
	char passwd[128];	/* PINCTL_PASSWD: user database file, "" = NSS */
	char cuda_lib[128];	/* PINCTL_CUDA_LIB, default libcuda.so.1 */
	FILE *out;
	FILE *err;
};

/* Fill @env from the environment; out/err default to stdout/stderr. */
void pctl_env_init(struct pctl_env *env);
/* Join a root and a relative path into @buf; -ENAMETOOLONG if it does not fit. */
int pctl_path(char *buf, size_t len, const char *root, const char *rel);
/* Read a whole file (NUL-terminated) into a malloc'ed buffer. */
int pctl_read_file(const char *path, char **data, size_t *len);
/* Read root/rel; the same as pctl_read_file. */
int pctl_read_at(const char *root, const char *rel, char **data, size_t *len);
/* Read one unsigned decimal number from root/rel. */
int pctl_read_u64_at(const char *root, const char *rel, uint64_t *val);
/* Strict unsigned decimal parse of a whole string, no sign or spaces. */
int pctl_parse_u64(const char *s, uint64_t *val);
/* "Key:   N kB" value from a /proc/meminfo or /proc/PID/status text, in bytes. */
int pctl_kv_kb(const char *text, const char *key, uint64_t *bytes);

/* User names: from env->passwd if set, else the system database. */
int pctl_user_name(const struct pctl_env *env, uint32_t uid, char *buf, size_t len);
/* Resolve a user name (or a decimal uid) to a uid; -ENOENT if unknown. */
int pctl_user_uid(const struct pctl_env *env, const char *name, uint32_t *uid);

/*
 * Sizes: "4096", "512K", "512M", "64G", "1.5T", "2GiB", "unlimited", and
 * "10%" of @mem_total (0 refuses percentages).  Binary units.  -EINVAL for
 * malformed input, -ERANGE for overflow.
 */
int pctl_parse_size(const char *s, uint64_t mem_total, uint64_t *bytes);
/* Human form: "0 B", "512 MiB", "1.5 GiB", "unlimited". Returns @buf. */
char *pctl_format_size(uint64_t bytes, char *buf, size_t len);

/* RLIMIT_MEMLOCK of this process from /proc/self/limits (UNLIMITED if none). */
int pctl_memlock_limit(const struct pctl_env *env, uint64_t *soft, uint64_t *hard);

/*
 * Counters of one budget, as struct pinmem_counters; refusals by reason in
 * the order of PINMEM_REASON_* (ABI 1.5: regions, cgroup and refs; an older
 * module counts refs as fault and shows no cgroup reason per user).
 */
enum { PCTL_REF_GLOBAL, PCTL_REF_USER, PCTL_REF_RLIMIT, PCTL_REF_FAULT, PCTL_REF_REGIONS,
       PCTL_REF_CGROUP, PCTL_REF_REFS, PCTL_NR_REF };
extern const char *const pctl_ref_names[PCTL_NR_REF];

struct pctl_counters {
	uint64_t pinned_bytes;
	uint64_t limit_bytes;
	uint64_t peak_bytes;
	uint64_t regions;
	uint64_t pins;
	uint64_t unpins;
	uint64_t refused[PCTL_NR_REF];
};

struct pctl_user {
	uint32_t uid;
	bool overridden;
	struct pctl_counters c;
	char name[64];
};

struct pctl_proc {
	int pid;
	uint32_t uid;
	char comm[PCTL_COMM_LEN];
	char user[64];
	uint64_t regions;
	uint64_t pinned_bytes;		/* module: bytes this process pinned */
	uint64_t mm_pinned_bytes;	/* module: mm->pinned_vm, all drivers */
	uint64_t vm_pin;		/* kernel view: VmPin */
	uint64_t vm_lck;		/* kernel view: VmLck */
};

enum pctl_source {
	PCTL_SRC_AUTO,
	PCTL_SRC_PROC,		/* /proc/driver/pinmem/stats */
	PCTL_SRC_IOCTL,		/* STATS ioctl: global and the caller's user */
	PCTL_SRC_KERNEL,	/* no module: /proc/vmstat, meminfo, PID/status */
};

/* A cgroup budget of the module (ABI 1.2), as the stats file lists it. */
struct pctl_cgroup {
	uint64_t id;			/* its inode number on the cgroup2 mount */
	char path[4096];		/* from the mount, or "(not visible or removed, id N)" */
	uint64_t pinned_bytes, limit_bytes, peak_bytes, refused;
};

struct pctl_snapshot {
	enum pctl_source source;
	bool module;			/* budgets come from the module */
	unsigned int stats_version;
	unsigned int abi_major, abi_minor;
	struct pctl_counters global;
	uint64_t default_user_limit;
	int enforce_rlimit;		/* -1 unknown */
	struct pctl_user *users;
	size_t nr_users;
	struct pctl_proc *procs;
	size_t nr_procs;
	/* Process lines the module left out for this reader (other users,
	 * other pid namespaces); -1 when the module does not say. */
	int64_t hidden_procs;
	struct pctl_cgroup *cgroups;
	size_t nr_cgroups;
	/* ABI 1.5: users kept for their counters, and those summed once dropped */
	bool have_evicted;
	uint64_t max_idle_users, idle_users, evicted_users;
	struct pctl_counters evicted;	/* pins, unpins, peak, refused */
	/* The whole machine, from the kernel's own counters (always read). */
	uint64_t mem_total;
	uint64_t mlocked;
	bool have_foll_pin;
	uint64_t foll_pin_bytes;
	uint64_t page_size;
	char note[160];			/* why a richer source was not used */
};

/* pinctl_cgroup.c: one "cgroup" line; paths by inode; table; JSON. */
int pctl_cgroup_parse(char **tok, int n, struct pctl_snapshot *snap, const char **bad);
void pctl_cgroup_paths(const struct pctl_env *env, struct pctl_snapshot *snap);
/* The table; @limited_only: only cgroups with a limit (`pinctl limits`). */
void pctl_cgroup_table(FILE *f, const struct pctl_snapshot *snap, bool limited_only,
		       const char *indent);
void pctl_cgroup_render(FILE *f, const struct pctl_snapshot *snap);
struct pctl_json;
void pctl_cgroup_json(struct pctl_json *j, const struct pctl_snapshot *snap, bool limited_only);

/* The longest cgroup path PINMEM_IOC_CGROUP takes (PATH_MAX - 1). */
#define PCTL_CG_PATH_MAX	4095
/*
 * Where cgroup2 is mounted (PROC_ROOT/self/mounts), as seen by this process
 * (@mnt) and under SYS_ROOT (@dir, for reading it); -ENOENT if nowhere.
 */
int pctl_cgroup_mount(const struct pctl_env *env, char *mnt, size_t mnt_len,
		      char *dir, size_t dir_len);
/*
 * A cgroup path as an operator writes it ("kubepods.slice/pod-x",
 * "/system.slice/x.service", "/sys/fs/cgroup/job"; @mnt is the cgroup2
 * mount to strip, NULL for /sys/fs/cgroup) to the form the module takes: no
 * mount, no leading, trailing or doubled '/', no "." parts.  -EINVAL with
 * @why for the root, "..", an empty path; -ENAMETOOLONG.
 */
int pctl_cgroup_normalize(const char *in, const char *mnt, char *out, size_t len,
			  const char **why);

/* Parse the module's stats text into @snap (users/procs allocated). */
int pctl_stats_parse(const char *text, struct pctl_snapshot *snap, char *why, size_t why_len);
/* Collect a snapshot from @src (AUTO picks the best one available). */
int pctl_snapshot_collect(const struct pctl_env *env, enum pctl_source src,
			  struct pctl_snapshot *snap, char *why, size_t why_len);
/* Fill the kernel-counter fields and the VmPin/VmLck process table. */
int pctl_kernel_collect(const struct pctl_env *env, struct pctl_snapshot *snap, bool procs);
/* Read /proc/meminfo MemTotal (bytes). */
int pctl_mem_total(const struct pctl_env *env, uint64_t *bytes);
/* Sort users and processes by pinned bytes, largest first, ties by id. */
void pctl_snapshot_sort(struct pctl_snapshot *snap);
/* Resolve user names of users and processes. */
void pctl_snapshot_names(const struct pctl_env *env, struct pctl_snapshot *snap);
void pctl_snapshot_free(struct pctl_snapshot *snap);
const char *pctl_source_name(enum pctl_source src);

/* /dev/pinmem: open it and check the ABI major; -EPROTO on another major. */
int pctl_dev_open(const struct pctl_env *env, unsigned int *major, unsigned int *minor);

/* Minimal streaming JSON writer (pretty or one line per document). */
struct pctl_json {
	FILE *f;
	int depth;
	bool pretty;
	bool need_comma;
	bool after_key;
};
void pctl_json_init(struct pctl_json *j, FILE *f, bool pretty);
void pctl_json_key(struct pctl_json *j, const char *key);
void pctl_json_obj_begin(struct pctl_json *j);
void pctl_json_obj_end(struct pctl_json *j);
void pctl_json_arr_begin(struct pctl_json *j);
void pctl_json_arr_end(struct pctl_json *j);
void pctl_json_str(struct pctl_json *j, const char *s);
void pctl_json_u64(struct pctl_json *j, uint64_t v);
void pctl_json_i64(struct pctl_json *j, int64_t v);
void pctl_json_bool(struct pctl_json *j, bool v);
void pctl_json_null(struct pctl_json *j);
/* End a top-level document with a newline. */
void pctl_json_done(struct pctl_json *j);
/* Length of the valid UTF-8 sequence at @s (1 to 4), 0 if it is not one. */
size_t pctl_utf8_len(const unsigned char *s);
/* Write @s as a JSON string literal with every needed escape. */
void pctl_json_write_string(FILE *f, const char *s);
/* A limit: a number, or null for unlimited. */
void pctl_json_limit(struct pctl_json *j, uint64_t v);

/* Renderers of a snapshot. */
void pctl_render_text(FILE *f, const struct pctl_snapshot *snap, int max_procs);
void pctl_render_json(struct pctl_json *j, const struct pctl_snapshot *snap);
/*
 * Per-process series: the @max_procs largest holders (the snapshot's sort
 * order) and one pid="other" series with the rest, so the series count does
 * not grow with the processes; `status --processes=N`, 0 by default.
 */
#define PCTL_PROM_PROCS_DEFAULT	0
#define PCTL_PROM_PROCS_MAX	10000
void pctl_render_prom(FILE *f, const struct pctl_snapshot *snap, size_t max_procs);
/*
 * An output file replaced atomically (pinctl_output.c): written as a hidden
 * temporary file in the same directory, renamed over @path by commit.
 */
struct pctl_output {
	FILE *f;
	char path[4096];
	char tmp[4096 + 16];
};
int pctl_output_open(struct pctl_output *o, const char *path, char *why, size_t why_len);
int pctl_output_commit(struct pctl_output *o, char *why, size_t why_len);
void pctl_output_abort(struct pctl_output *o);

/* Prometheus label value escaping (backslash, quote, newline). */
void pctl_prom_label(FILE *f, const char *s);

/*
 * pinctl_limits_plan.c: the changes `limits set`, `limits clear` and
 * `limits apply` make, all checked before the first one is made.
 */
#define PCTL_MAX_OPS 256	/* user and cgroup changes per command, each */

struct pctl_user_op {
	uint32_t uid;
	bool clear;
	uint64_t bytes;
	char name[256];
};

struct pctl_cg_op {
	char *path;		/* normalised: "a/b", shown as "/a/b" */
	bool clear;
	bool skip;		/* missing and --missing-ok */
	uint64_t bytes;
};

struct pctl_plan {
	char cmd[32];		/* "limits set": the start of every message */
	char where[300];	/* "FILE line N" while reading a file, else "" */
	uint32_t flags;		/* PINMEM_LIMIT_SET_* of the first SET_LIMITS */
	uint64_t global, def_user;
	uint32_t enforce;
	struct pctl_user_op users[PCTL_MAX_OPS];
	unsigned int nr_users;
	struct pctl_cg_op cgroups[PCTL_MAX_OPS];
	unsigned int nr_cgroups;
	bool dry_run, missing_ok;
	uint64_t mem_total;
	int mem_err;
	int mount_err;		/* pctl_cgroup_mount()'s */
	char mnt[4096], mnt_dir[4096];
};

/* A zeroed plan for @cmd; NULL without memory.  Free with pctl_plan_free(). */
struct pctl_plan *pctl_plan_new(const struct pctl_env *env, const char *cmd);
void pctl_plan_free(struct pctl_plan *plan);
/*
 * Add one change; 0, or PCTL_EXIT_USAGE after one line on stderr.  @opt
 * names the setting in messages ("--global", "global"); @size NULL clears.
 */
int pctl_plan_limit(const struct pctl_env *env, struct pctl_plan *plan, uint32_t bit,
		    const char *opt, const char *size);
int pctl_plan_enforce(const struct pctl_env *env, struct pctl_plan *plan, const char *opt,
		      const char *val);
int pctl_plan_user(const struct pctl_env *env, struct pctl_plan *plan, const char *opt,
		   const char *name, const char *size, const char *arg);
int pctl_plan_cgroup(const struct pctl_env *env, struct pctl_plan *plan, const char *opt,
		     const char *path, const char *size);
bool pctl_plan_empty(const struct pctl_plan *plan);
/* Check what needs the system (cgroups exist, the module), then apply or
 * with dry_run print it; returns the exit status. */
int pctl_plan_run(const struct pctl_env *env, struct pctl_plan *plan);
/* `limits apply FILE`: read FILE's settings into @plan (pinctl_limits_file.c). */
int pctl_plan_read_file(const struct pctl_env *env, struct pctl_plan *plan, const char *file);

/* The whole command line: argv[1] is the command; returns the exit status. */
int pctl_main(int argc, char **argv);

/* Commands: argc/argv start at the command name; return an exit status. */
int pctl_cmd_status(const struct pctl_env *env, int argc, char **argv);
int pctl_cmd_top(const struct pctl_env *env, int argc, char **argv);
int pctl_cmd_limits(const struct pctl_env *env, int argc, char **argv);
int pctl_cmd_doctor(const struct pctl_env *env, int argc, char **argv);

/* Help texts, shared by `pinctl help CMD` and `pinctl CMD --help`. */
void pctl_help_main(FILE *f);
void pctl_help_status(FILE *f);
void pctl_help_top(FILE *f);
void pctl_help_limits(FILE *f);
void pctl_help_doctor(FILE *f);

/* Option errors: one line on stderr, returns PCTL_EXIT_USAGE (getopt opterr = 0). */
int pctl_opt_error(const struct pctl_env *env, const char *cmd, int c, char **argv);
/* PCTL_EXIT_USAGE with one line if positional arguments are left, else 0. */
int pctl_extra_args(const struct pctl_env *env, const char *cmd, int argc, char **argv);
/* Options of a command taking only --json/--help: -1 to go on, else its exit code. */
int pctl_json_help_opts(const struct pctl_env *env, const char *cmd,
			void (*help)(FILE *f), int argc, char **argv, bool *json);
/* "auto", "proc", "ioctl", "kernel"; PCTL_EXIT_USAGE with one line otherwise. */
int pctl_parse_source(const struct pctl_env *env, const char *cmd, const char *arg,
		      enum pctl_source *src);

/* One error line on env->err: "pinctl: ...". */
void pctl_err(const struct pctl_env *env, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif /* PINCTL_H */
