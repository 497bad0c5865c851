// SPDX-License-Identifier: MIT
/*
 * JSON rendering of a snapshot: bytes as integers, an unlimited limit as
 * null, the same fields as the stats file so scripts need no unit parsing.
 */
#include "pinctl.h"

/* "refused": {reason: count, ...} */
static void refused(struct pctl_json *j, const uint64_t *by_reason)
{
	pctl_json_key(j, "refused");
	pctl_json_obj_begin(j);
	for (int i = 0; i < PCTL_NR_REF; i++) {
		pctl_json_key(j, pctl_ref_names[i]);
		pctl_json_u64(j, by_reason[i]);
	}
	pctl_json_obj_end(j);
}

static void counters(struct pctl_json *j, const struct pctl_counters *c)
{
	pctl_json_key(j, "pinned_bytes");
	pctl_json_u64(j, c->pinned_bytes);
	pctl_json_key(j, "limit_bytes");
	pctl_json_limit(j, c->limit_bytes);
	pctl_json_key(j, "peak_bytes");
	pctl_json_u64(j, c->peak_bytes);
	pctl_json_key(j, "regions");
	pctl_json_u64(j, c->regions);
	pctl_json_key(j, "pins");
	pctl_json_u64(j, c->pins);
	pctl_json_key(j, "unpins");
	pctl_json_u64(j, c->unpins);
	refused(j, c->refused);
}

static void machine(struct pctl_json *j, const struct pctl_snapshot *snap)
{
	pctl_json_key(j, "machine");
	pctl_json_obj_begin(j);
	pctl_json_key(j, "foll_pin_bytes");
	if (snap->have_foll_pin)
		pctl_json_u64(j, snap->foll_pin_bytes);
	else
		pctl_json_null(j);
	pctl_json_key(j, "mlocked_bytes");
	pctl_json_u64(j, snap->mlocked);
	pctl_json_key(j, "mem_total_bytes");
	pctl_json_u64(j, snap->mem_total);
	pctl_json_obj_end(j);
}

static void process(struct pctl_json *j, const struct pctl_snapshot *snap,
		    const struct pctl_proc *p)
{
	pctl_json_obj_begin(j);
	pctl_json_key(j, "pid");
	pctl_json_i64(j, p->pid);
	pctl_json_key(j, "uid");
	pctl_json_u64(j, p->uid);
	pctl_json_key(j, "user");
	pctl_json_str(j, p->user);
	pctl_json_key(j, "comm");
	pctl_json_str(j, p->comm);
	if (snap->module) {
		pctl_json_key(j, "regions");
		pctl_json_u64(j, p->regions);
		pctl_json_key(j, "pinned_bytes");
		pctl_json_u64(j, p->pinned_bytes);
		pctl_json_key(j, "mm_pinned_bytes");
		pctl_json_u64(j, p->mm_pinned_bytes);
	} else {
		pctl_json_key(j, "vm_pin_bytes");
		pctl_json_u64(j, p->vm_pin);
		pctl_json_key(j, "vm_lck_bytes");
		pctl_json_u64(j, p->vm_lck);
	}
	pctl_json_obj_end(j);
}

void pctl_render_json(struct pctl_json *j, const struct pctl_snapshot *snap)
{
	char abi[32];

	pctl_json_obj_begin(j);
	pctl_json_key(j, "source");
	pctl_json_str(j, pctl_source_name(snap->source));
	pctl_json_key(j, "module_loaded");
	pctl_json_bool(j, snap->module);
	pctl_json_key(j, "budgets_enforced");
	pctl_json_bool(j, snap->module);
	if (snap->note[0]) {
		pctl_json_key(j, "note");
		pctl_json_str(j, snap->note);
	}
	if (snap->module) {
		snprintf(abi, sizeof(abi), "%u.%u", snap->abi_major, snap->abi_minor);
		pctl_json_key(j, "abi");
		pctl_json_str(j, abi);
		pctl_json_key(j, "global");
		pctl_json_obj_begin(j);
		counters(j, &snap->global);
		pctl_json_obj_end(j);
		pctl_json_key(j, "default_user_limit_bytes");
		pctl_json_limit(j, snap->default_user_limit);
		pctl_json_key(j, "enforce_rlimit");
		if (snap->enforce_rlimit < 0)
			pctl_json_null(j);
		else
			pctl_json_bool(j, snap->enforce_rlimit);
	}
	machine(j, snap);
	if (snap->module) {
		pctl_json_key(j, "users");
		pctl_json_arr_begin(j);
		for (size_t i = 0; i < snap->nr_users; i++) {
			const struct pctl_user *u = &snap->users[i];

			pctl_json_obj_begin(j);
			pctl_json_key(j, "uid");
			pctl_json_u64(j, u->uid);
			pctl_json_key(j, "user");
			pctl_json_str(j, u->name);
			pctl_json_key(j, "overridden");
			pctl_json_bool(j, u->overridden);
			counters(j, &u->c);
			pctl_json_obj_end(j);
		}
		pctl_json_arr_end(j);
	}
	if (!snap->module || snap->source == PCTL_SRC_PROC) {
		pctl_json_key(j, "processes");
		pctl_json_arr_begin(j);
		for (size_t i = 0; i < snap->nr_procs; i++)
			process(j, snap, &snap->procs[i]);
		pctl_json_arr_end(j);
	}
	if (snap->module && snap->have_evicted) {
		pctl_json_key(j, "users_evicted");
		pctl_json_obj_begin(j);
		pctl_json_key(j, "users");
		pctl_json_u64(j, snap->evicted_users);
		pctl_json_key(j, "idle_users");
		pctl_json_u64(j, snap->idle_users);
		pctl_json_key(j, "max_idle_users");
		pctl_json_u64(j, snap->max_idle_users);
		refused(j, snap->evicted.refused);
		pctl_json_obj_end(j);
	}
	if (snap->module && snap->source == PCTL_SRC_PROC) {
		pctl_cgroup_json(j, snap, false);
		pctl_json_key(j, "hidden_processes");
		if (snap->hidden_procs < 0)
			pctl_json_null(j);
		else
			pctl_json_u64(j, (uint64_t)snap->hidden_procs);
	}
	pctl_json_obj_end(j);
}
