// SPDX-License-Identifier: MIT
/*
 * Prometheus text exposition (node exporter textfile collector): one HELP
 * and one TYPE line per family, then its samples; counters end in _total;
 * an unlimited limit is +Inf.  The metric names are listed in `pinctl help
 * status` and the man page.
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

static void render_module(FILE *f, const struct pctl_snapshot *snap)
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
	if (snap->source != PCTL_SRC_PROC)
		return;
	if (snap->abi_major > 1 || snap->abi_minor >= 2)
		render_cgroups(f, snap);
	family(f, "pinmem_process_pinned_bytes", "gauge", "Bytes this process pinned through pinmem.");
	for (size_t i = 0; i < snap->nr_procs; i++) {
		proc_labels(f, "pinmem_process_pinned_bytes", &snap->procs[i]);
		value(f, snap->procs[i].pinned_bytes, false);
	}
	family(f, "pinmem_process_regions", "gauge", "pinmem regions this process holds.");
	for (size_t i = 0; i < snap->nr_procs; i++) {
		proc_labels(f, "pinmem_process_regions", &snap->procs[i]);
		value(f, snap->procs[i].regions, false);
	}
	family(f, "pinmem_process_mm_pinned_bytes", "gauge",
	       "The process's pinned_vm (VmPin) in bytes, all drivers.");
	for (size_t i = 0; i < snap->nr_procs; i++) {
		proc_labels(f, "pinmem_process_mm_pinned_bytes", &snap->procs[i]);
		value(f, snap->procs[i].mm_pinned_bytes, false);
	}
}

static void render_kernel(FILE *f, const struct pctl_snapshot *snap)
{
	family(f, "pinmem_process_vmpin_bytes", "gauge",
	       "VmPin of the process (/proc/PID/status), all drivers.");
	for (size_t i = 0; i < snap->nr_procs; i++) {
		proc_labels(f, "pinmem_process_vmpin_bytes", &snap->procs[i]);
		value(f, snap->procs[i].vm_pin, false);
	}
	family(f, "pinmem_process_vmlck_bytes", "gauge", "VmLck (mlock) of the process.");
	for (size_t i = 0; i < snap->nr_procs; i++) {
		proc_labels(f, "pinmem_process_vmlck_bytes", &snap->procs[i]);
		value(f, snap->procs[i].vm_lck, false);
	}
}

void pctl_render_prom(FILE *f, const struct pctl_snapshot *snap)
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
		render_module(f, snap);
	else
		render_kernel(f, snap);
}
