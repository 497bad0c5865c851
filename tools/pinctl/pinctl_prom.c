// SPDX-License-Identifier: MIT
/*
 * Prometheus text exposition (node exporter textfile collector): one HELP
 * and one TYPE line per family, then its samples; counters end in _total;
 * an unlimited limit is +Inf.  The metric names are listed in `pinctl help
 * status` and the man page.
 *
 * Series are bounded by default: machine, user (uid, user), cgroup (cgroup,
 * id) and reason labels only.  Process series (pid, comm: a new series for
 * every job and restart) are the N largest holders that --processes=N asks
 * for, 0 by default, plus one pid="other" series with the rest, so the sums
 * over a family stay the machine's.
 */
#include <inttypes.h>
#include <stddef.h>

#include "pinctl.h"

/* Label values must be UTF-8: other bytes become U+FFFD. */
void pctl_prom_label(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n;

	while (*s) {
		if (*s == '\\') {
			fputs("\\\\", f);
		} else if (*s == '"') {
			fputs("\\\"", f);
		} else if (*s == '\n') {
			fputs("\\n", f);
		} else if (*s >= 0x80) {
			n = pctl_utf8_len(s);
			if (n) {
				fwrite(s, 1, n, f);
				s += n;
				continue;
			}
			fputs("\xef\xbf\xbd", f);
		} else {
			fputc(*s, f);
		}
		s++;
	}
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void value(FILE *f, uint64_t v, bool limit)
{
	if (limit && v == PCTL_UNLIMITED)
		fputs(" +Inf\n", f);
	else
		fprintf(f, " %" PRIu64 "\n", v);
}

static void gauge(FILE *f, const char *name, const char *help, uint64_t v, bool limit)
{
	family(f, name, "gauge", help);
	fputs(name, f);
	value(f, v, limit);
}

static void user_labels(FILE *f, const char *name, const struct pctl_user *u)
{
	fprintf(f, "%s{uid=\"%u\",user=\"", name, u->uid);
	pctl_prom_label(f, u->name);
	fputs("\"", f);
}

static void proc_labels(FILE *f, const char *name, const struct pctl_proc *p)
{
	fprintf(f, "%s{pid=\"%d\",uid=\"%u\",user=\"", name, p->pid, p->uid);
	pctl_prom_label(f, p->user);
	fputs("\",comm=\"", f);
	pctl_prom_label(f, p->comm);
	fputs("\"}", f);
}

struct proc_metric {
	const char *name;
	const char *help;
	size_t off;
};

#define P(f) offsetof(struct pctl_proc, f)
static const struct proc_metric module_procs[] = {
	{ "pinmem_process_pinned_bytes",
	  "Bytes this process pinned through pinmem (pid=\"other\": the rest).", P(pinned_bytes) },
	{ "pinmem_process_regions",
	  "pinmem regions this process holds (pid=\"other\": the rest).", P(regions) },
	{ "pinmem_process_mm_pinned_bytes",
	  "The process's pinned_vm (VmPin) in bytes, all drivers (pid=\"other\": the rest).",
	  P(mm_pinned_bytes) },
}, kernel_procs[] = {
	{ "pinmem_process_vmpin_bytes",
	  "VmPin of the process (/proc/PID/status), all drivers (pid=\"other\": the rest).",
	  P(vm_pin) },
	{ "pinmem_process_vmlck_bytes",
	  "VmLck (mlock) of the process (pid=\"other\": the rest).", P(vm_lck) },
};
#undef P

static void proc_family(FILE *f, const struct proc_metric *m,
			const struct pctl_snapshot *snap, size_t max)
{
	const char *name = m->name;
	size_t off = m->off;
	uint64_t rest = 0;

	family(f, name, "gauge", m->help);
	for (size_t i = 0; i < snap->nr_procs; i++) {
		uint64_t v = *(const uint64_t *)((const char *)&snap->procs[i] + off);

		if (i >= max) {
			rest += v;
			continue;
		}
		proc_labels(f, name, &snap->procs[i]);
		value(f, v, false);
	}
	fprintf(f, "%s{pid=\"other\"}", name);
	value(f, rest, false);
}

/*
 * Each per-process family of @m: a series for each of the first @max
 * processes (largest first), then pid="other" with the sum of the rest (0
 * if none), after the count of processes.
 */
static void render_procs(FILE *f, const struct pctl_snapshot *snap, size_t max,
			 const struct proc_metric *m, size_t nr_m)
{
	gauge(f, "pinmem_processes",
	      snap->module ? "Processes with /dev/pinmem open (the stats file's process rows)."
			   : "Processes with VmPin or VmLck.",
	      snap->nr_procs, false);
	for (size_t k = 0; k < nr_m; k++)
		proc_family(f, &m[k], snap, max);
}

/* ABI 1.5: the users kept for their counters and those dropped (bounded). */
static void render_evicted(FILE *f, const struct pctl_snapshot *snap)
{
	if (!snap->have_evicted)
		return;
	gauge(f, "pinmem_idle_users", "Users without open files kept for their counters.",
	      snap->idle_users, false);
	gauge(f, "pinmem_max_idle_users", "Bound on the idle users kept (max_idle_users).",
	      snap->max_idle_users, false);
	family(f, "pinmem_evicted_users_total", "counter",
	       "Idle users dropped to keep the bound; their counters go to the evicted series.");
	fprintf(f, "pinmem_evicted_users_total %" PRIu64 "\n", snap->evicted_users);
	family(f, "pinmem_evicted_user_refused_total", "counter",
	       "Refusals of the dropped users, by reason (users' + these = pinmem_refused_total).");
	for (int r = 0; r < PCTL_NR_REF; r++)
		fprintf(f, "pinmem_evicted_user_refused_total{reason=\"%s\"} %" PRIu64 "\n",
			pctl_ref_names[r], snap->evicted.refused[r]);
}

struct user_metric {
	const char *name;
	const char *type;
	const char *help;
	size_t off;
	bool limit;
};

#define C(f) offsetof(struct pctl_counters, f)
static const struct user_metric user_metrics[] = {
	{ "pinmem_user_pinned_bytes", "gauge", "Bytes pinned through pinmem by this user.",
	  C(pinned_bytes), false },
	{ "pinmem_user_limit_bytes", "gauge", "Per-user budget in force for this user (+Inf: none).",
	  C(limit_bytes), true },
	{ "pinmem_user_peak_bytes", "gauge", "Highest bytes pinned by this user since load.",
	  C(peak_bytes), false },
	{ "pinmem_user_regions", "gauge", "Regions held by this user.", C(regions), false },
	{ "pinmem_user_pins_total", "counter", "Successful pins by this user.", C(pins), false },
	{ "pinmem_user_unpins_total", "counter", "Regions of this user released.", C(unpins), false },
};
#undef C

static uint64_t field(const struct pctl_counters *c, size_t off)
{
	return *(const uint64_t *)((const char *)c + off);
}

/*
 * Cgroup budgets (ABI 1.2): a sample per cgroup with pins or a limit; the
 * limit only where one is set (a cgroup without one is bounded by its
 * ancestors', not +Inf).  The id label (the cgroup's id) keeps series
 * unique where two paths give one label (invalid UTF-8 becomes U+FFFD).
 */
static void render_cgroups(FILE *f, const struct pctl_snapshot *snap)
{
	static const struct {
		const char *name, *type, *help;
		size_t off;
	} m[] = {
		{ "pinmem_cgroup_pinned_bytes", "gauge",
		  "Bytes pinned through pinmem in this cgroup v2 and its descendants.",
		  offsetof(struct pctl_cgroup, pinned_bytes) },
		{ "pinmem_cgroup_limit_bytes", "gauge",
		  "Budget set on this cgroup (cgroups without one are not listed).",
		  offsetof(struct pctl_cgroup, limit_bytes) },
		{ "pinmem_cgroup_peak_bytes", "gauge",
		  "Highest bytes pinned in this cgroup and its descendants.",
		  offsetof(struct pctl_cgroup, peak_bytes) },
		{ "pinmem_cgroup_refused_total", "counter",
		  "Pins refused by this cgroup's own budget.",
		  offsetof(struct pctl_cgroup, refused) },
	};

	for (size_t k = 0; k < sizeof(m) / sizeof(m[0]); k++) {
		family(f, m[k].name, m[k].type, m[k].help);
		for (size_t i = 0; i < snap->nr_cgroups; i++) {
			const struct pctl_cgroup *g = &snap->cgroups[i];
			uint64_t v = *(const uint64_t *)((const char *)g + m[k].off);

			if (m[k].off == offsetof(struct pctl_cgroup, limit_bytes) &&
			    v == PCTL_UNLIMITED)
				continue;
			fprintf(f, "%s{cgroup=\"", m[k].name);
			pctl_prom_label(f, g->path);
			fprintf(f, "\",id=\"%llu\"}", (unsigned long long)g->id);
			value(f, v, false);
		}
	}
}

static void render_module(FILE *f, const struct pctl_snapshot *snap, size_t max)
{
	const struct pctl_counters *g = &snap->global;

	gauge(f, "pinmem_pinned_bytes", "Bytes pinned through pinmem, whole machine.",
	      g->pinned_bytes, false);
	gauge(f, "pinmem_limit_bytes", "Global pinmem budget (+Inf: none).", g->limit_bytes, true);
	gauge(f, "pinmem_peak_bytes", "Highest pinned bytes since the module was loaded.",
	      g->peak_bytes, false);
	gauge(f, "pinmem_regions", "Pinned regions held now.", g->regions, false);
	family(f, "pinmem_pins_total", "counter", "Successful pins since load.");
	fprintf(f, "pinmem_pins_total %" PRIu64 "\n", g->pins);
	family(f, "pinmem_unpins_total", "counter", "Regions released since load.");
	fprintf(f, "pinmem_unpins_total %" PRIu64 "\n", g->unpins);
	family(f, "pinmem_refused_total", "counter",
	       "Pins refused since load, by the budget or failure that refused them.");
	for (int r = 0; r < PCTL_NR_REF; r++)
		fprintf(f, "pinmem_refused_total{reason=\"%s\"} %" PRIu64 "\n",
			pctl_ref_names[r], g->refused[r]);
	gauge(f, "pinmem_default_user_limit_bytes",
	      "Budget of a user without an override (+Inf: none).", snap->default_user_limit, true);
	if (snap->enforce_rlimit >= 0)
		gauge(f, "pinmem_enforce_rlimit", "1 if RLIMIT_MEMLOCK is enforced on pins.",
		      (uint64_t)snap->enforce_rlimit, false);

	for (size_t m = 0; m < sizeof(user_metrics) / sizeof(user_metrics[0]); m++) {
		const struct user_metric *um = &user_metrics[m];

		family(f, um->name, um->type, um->help);
		for (size_t i = 0; i < snap->nr_users; i++) {
			user_labels(f, um->name, &snap->users[i]);
			fputc('}', f);
			value(f, field(&snap->users[i].c, um->off), um->limit);
		}
	}
	family(f, "pinmem_user_refused_total", "counter", "Pins of this user refused, by reason.");
	for (size_t i = 0; i < snap->nr_users; i++) {
		for (int r = 0; r < PCTL_NR_REF; r++) {
			user_labels(f, "pinmem_user_refused_total", &snap->users[i]);
			fprintf(f, ",reason=\"%s\"}", pctl_ref_names[r]);
			value(f, snap->users[i].c.refused[r], false);
		}
	}
	render_evicted(f, snap);
	if (snap->source != PCTL_SRC_PROC)
		return;
	if (snap->abi_major > 1 || snap->abi_minor >= 2)
		render_cgroups(f, snap);
	render_procs(f, snap, max, module_procs, sizeof(module_procs) / sizeof(module_procs[0]));
}

void pctl_render_prom(FILE *f, const struct pctl_snapshot *snap, size_t max_procs)
{
	gauge(f, "pinmem_module_loaded", "1 if the pinmem module is loaded and enforcing budgets.",
	      snap->module, false);
	if (snap->have_foll_pin)
		gauge(f, "pinmem_machine_foll_pin_bytes",
		      "FOLL_PIN pages in use machine-wide (vmstat acquired - released), all drivers.",
		      snap->foll_pin_bytes, false);
	gauge(f, "pinmem_machine_mlocked_bytes", "Mlocked from /proc/meminfo.", snap->mlocked, false);
	gauge(f, "pinmem_machine_memory_bytes", "MemTotal from /proc/meminfo.", snap->mem_total, false);
	if (snap->module)
		render_module(f, snap, max_procs);
	else
		render_procs(f, snap, max_procs, kernel_procs,
			     sizeof(kernel_procs) / sizeof(kernel_procs[0]));
}
