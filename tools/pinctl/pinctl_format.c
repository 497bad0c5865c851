// SPDX-License-Identifier: MIT
/*
 * Text rendering of a snapshot for a person: the global budget as a bar,
 * refusals by reason, then users and processes, largest first, in human units.
 */
#include <string.h>

#include "pinctl.h"

#define BAR_WIDTH 40

/* Process names come from the kernel: keep the terminal safe. */
static void safe_copy(char *dst, size_t len, const char *src)
{
	size_t n = 0;

	for (; *src && n + 1 < len; src++) {
		unsigned char c = (unsigned char)*src;

		dst[n++] = c < 0x20 || c == 0x7f ? '?' : *src;
	}
	dst[n] = '\0';
}

static void bar(FILE *f, uint64_t used, uint64_t limit)
{
	unsigned int fill = 0;

	if (limit)
		fill = used >= limit ? BAR_WIDTH :
			(unsigned int)((unsigned __int128)used * BAR_WIDTH / limit);
	else if (used)
		fill = BAR_WIDTH;
	fputc('[', f);
	for (unsigned int i = 0; i < BAR_WIDTH; i++)
		fputc(i < fill ? '#' : '.', f);
	fputc(']', f);
}

static void render_machine(FILE *f, const struct pctl_snapshot *snap)
{
	char a[PCTL_SIZE_LEN], b[PCTL_SIZE_LEN], c[PCTL_SIZE_LEN];

	if (snap->have_foll_pin)
		fprintf(f, "machine  FOLL_PIN in use %s (all drivers: pinmem, GPU, RDMA, io_uring)\n",
			pctl_format_size(snap->foll_pin_bytes, a, sizeof(a)));
	else
		fprintf(f, "machine  FOLL_PIN counters not available (kernel without nr_foll_pin_* in vmstat)\n");
	fprintf(f, "         Mlocked %s, MemTotal %s\n",
		pctl_format_size(snap->mlocked, b, sizeof(b)),
		pctl_format_size(snap->mem_total, c, sizeof(c)));
}

static void render_global(FILE *f, const struct pctl_snapshot *snap)
{
	const struct pctl_counters *g = &snap->global;
	char a[PCTL_SIZE_LEN], b[PCTL_SIZE_LEN];

	fprintf(f, "global   ");
	if (g->limit_bytes == PCTL_UNLIMITED) {
		fprintf(f, "%s pinned, no global limit\n",
			pctl_format_size(g->pinned_bytes, a, sizeof(a)));
	} else {
		bar(f, g->pinned_bytes, g->limit_bytes);
		fprintf(f, " %s of %s (%.1f%%)\n",
			pctl_format_size(g->pinned_bytes, a, sizeof(a)),
			pctl_format_size(g->limit_bytes, b, sizeof(b)),
			g->limit_bytes ? 100.0 * (double)g->pinned_bytes / (double)g->limit_bytes : 0.0);
	}
	fprintf(f, "         peak %s, %llu region%s held, %llu pin%s and %llu unpin%s since load\n",
		pctl_format_size(g->peak_bytes, a, sizeof(a)),
		(unsigned long long)g->regions, g->regions == 1 ? "" : "s",
		(unsigned long long)g->pins, g->pins == 1 ? "" : "s",
		(unsigned long long)g->unpins, g->unpins == 1 ? "" : "s");
	fprintf(f, "refused  since load: ");
	for (int i = 0; i < PCTL_NR_REF; i++)
		fprintf(f, "%s%s %llu", i ? ", " : "", pctl_ref_names[i],
			(unsigned long long)g->refused[i]);
	fputc('\n', f);
	if (snap->have_evicted && snap->evicted_users) {
		uint64_t refused = 0;

		for (int i = 0; i < PCTL_NR_REF; i++)
			refused += snap->evicted.refused[i];
		fprintf(f, "         %llu user%s without open files dropped from the table "
			"(max %llu kept), %llu refusal%s summed\n",
			(unsigned long long)snap->evicted_users, snap->evicted_users == 1 ? "" : "s",
			(unsigned long long)snap->max_idle_users, (unsigned long long)refused,
			refused == 1 ? "" : "s");
	}
	fprintf(f, "limits   default per user %s, RLIMIT_MEMLOCK %s\n",
		pctl_format_size(snap->default_user_limit, a, sizeof(a)),
		snap->enforce_rlimit < 0 ? "unknown" :
		snap->enforce_rlimit ? "enforced" : "not enforced");
}

static void render_users(FILE *f, const struct pctl_snapshot *snap)
{
	char a[PCTL_SIZE_LEN], b[PCTL_SIZE_LEN], c[PCTL_SIZE_LEN], name[64];
	bool any_override = false;

	fprintf(f, "\n%-16s %10s %11s %12s %11s %8s %8s\n", "USER", "UID", "PINNED",
		"LIMIT", "PEAK", "REGIONS", "REFUSED");
	if (!snap->nr_users)
		fprintf(f, "(no user has pinned through pinmem)\n");
	for (size_t i = 0; i < snap->nr_users; i++) {
		const struct pctl_user *u = &snap->users[i];
		uint64_t refused = 0;

		for (int r = 0; r < PCTL_NR_REF; r++)
			refused += u->c.refused[r];
		safe_copy(name, sizeof(name), u->name);
		pctl_format_size(u->c.limit_bytes, b, sizeof(b));
		if (u->overridden) {
			any_override = true;
			strcat(b, "*");
		}
		fprintf(f, "%-16s %10u %11s %12s %11s %8llu %8llu\n", name, u->uid,
			pctl_format_size(u->c.pinned_bytes, a, sizeof(a)), b,
			pctl_format_size(u->c.peak_bytes, c, sizeof(c)),
			(unsigned long long)u->c.regions, (unsigned long long)refused);
	}
	if (any_override)
		fprintf(f, "(* a limit set for this user; others get the default)\n");
}

static void render_procs(FILE *f, const struct pctl_snapshot *snap, int max_procs)
{
	char a[PCTL_SIZE_LEN], b[PCTL_SIZE_LEN], comm[PCTL_COMM_LEN], user[64];
	size_t n = snap->nr_procs;

	if (max_procs >= 0 && (size_t)max_procs < n)
		n = (size_t)max_procs;
	if (snap->module)
		fprintf(f, "\n%8s %-16s %-16s %8s %11s %11s\n", "PID", "USER", "COMMAND",
			"REGIONS", "PINNED", "MM_PINNED");
	else
		fprintf(f, "\n%8s %-16s %-16s %11s %11s\n", "PID", "USER", "COMMAND",
			"VMPIN", "VMLCK");
	if (!snap->nr_procs)
		fprintf(f, "%s\n", !snap->module ? "(no process has pinned or locked memory)" :
			snap->hidden_procs > 0 ? "(none of yours holds pinmem regions)" :
			"(no process holds pinmem regions)");
	for (size_t i = 0; i < n; i++) {
		const struct pctl_proc *p = &snap->procs[i];

		safe_copy(comm, sizeof(comm), p->comm);
		safe_copy(user, sizeof(user), p->user);
		if (snap->module)
			fprintf(f, "%8d %-16s %-16s %8llu %11s %11s\n", p->pid, user, comm,
				(unsigned long long)p->regions,
				pctl_format_size(p->pinned_bytes, a, sizeof(a)),
				pctl_format_size(p->mm_pinned_bytes, b, sizeof(b)));
		else
			fprintf(f, "%8d %-16s %-16s %11s %11s\n", p->pid, user, comm,
				pctl_format_size(p->vm_pin, a, sizeof(a)),
				pctl_format_size(p->vm_lck, b, sizeof(b)));
	}
	if (n < snap->nr_procs)
		fprintf(f, "(%zu more)\n", snap->nr_procs - n);
	if (snap->module && snap->hidden_procs > 0)
		fprintf(f, "(%lld more of other users or other pid namespaces are hidden from you; "
			   "run as root to see them: sudo pinctl status)\n",
			(long long)snap->hidden_procs);
}

void pctl_render_text(FILE *f, const struct pctl_snapshot *snap, int max_procs)
{
	if (snap->module) {
		fprintf(f, "pinmem   module ABI %u.%u, budgets enforced (from %s)\n",
			snap->abi_major, snap->abi_minor, pctl_source_name(snap->source));
		render_global(f, snap);
		render_machine(f, snap);
		if (snap->note[0])
			fprintf(f, "note     %s\n", snap->note);
		render_users(f, snap);
		pctl_cgroup_render(f, snap);
		if (snap->source == PCTL_SRC_PROC)
			render_procs(f, snap, max_procs);
		return;
	}
	fprintf(f, "pinmem   module not loaded: budgets are NOT enforced\n");
	if (snap->note[0])
		fprintf(f, "note     %s\n", snap->note);
	fprintf(f, "         (the kernel's own counters: /proc/vmstat nr_foll_pin_acquired - nr_foll_pin_released,\n"
		   "          /proc/meminfo Mlocked, VmPin and VmLck of each /proc/PID/status)\n");
	render_machine(f, snap);
	render_procs(f, snap, max_procs);
}
