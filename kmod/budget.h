/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pinmem budgets: the global limit, per-user limits and RLIMIT_MEMLOCK.
 */
#ifndef _PINMEM_BUDGET_H
#define _PINMEM_BUDGET_H

#include <linux/types.h>
#include <linux/uidgid.h>

#include "pinmem.h"

struct pinmem_cg;
struct seq_file;

/**
 * struct pinmem_user_view - a consistent copy of one user's budget
 * @uid: the user
 * @limit: the limit in force for @uid
 * @overridden: @limit is a per-uid override, not the default
 * @acct: counters
 */
struct pinmem_user_view {
	kuid_t uid;
	u64 limit;
	bool overridden;
	struct pinmem_acct acct;
};

/**
 * struct pinmem_global_view - a consistent copy of the global budget
 * @limit: global limit in bytes
 * @default_user_limit: limit of users without an override
 * @enforce_rlimit: RLIMIT_MEMLOCK is checked
 * @max_regions_per_file: cap on one file's regions
 * @max_regions_per_user: cap on one user's regions
 * @max_idle_users: cap on users kept for their counters alone
 * @idle_users: users kept for their counters alone now
 * @evicted_users: users dropped to keep @max_idle_users
 * @acct: counters
 * @evicted: the counters of the @evicted_users (pins, unpins, refusals)
 */
struct pinmem_global_view {
	u64 limit;
	u64 default_user_limit;
	bool enforce_rlimit;
	u32 max_regions_per_file;
	u32 max_regions_per_user;
	u32 max_idle_users;
	u64 idle_users;
	u64 evicted_users;
	struct pinmem_acct acct;
	struct pinmem_acct evicted;
};

void pinmem_budget_init(void);
void pinmem_budget_exit(void);

struct pinmem_user *pinmem_user_get(kuid_t uid);
void pinmem_user_put(struct pinmem_user *u);

/* pinmem_budget_charge() and pinmem_budget_uncharge() flags */
#define PINMEM_CHARGE_REGION	(1U << 0)	/* a region of the caps */
#define PINMEM_CHARGE_RESERVE	(1U << 1)	/* a worst case, to settle */

kuid_t pinmem_budget_current_user(void);
u32 pinmem_budget_charge(struct pinmem_file *f, struct pinmem_cg *cg,
			 u64 bytes, unsigned int flags, u64 *refuser);
int pinmem_budget_errno(u32 reason);
bool pinmem_budget_is_bytes(u32 reason);
void pinmem_budget_uncharge(struct pinmem_file *f, struct pinmem_cg *cg,
			    u64 bytes, unsigned int flags);
void pinmem_budget_settle(struct pinmem_file *f, struct pinmem_cg *cg,
			  u64 reserved, u64 actual);
u64 pinmem_budget_room(struct pinmem_file *f, struct pinmem_cg *cg);
bool pinmem_budget_wait_reserved(struct pinmem_file *f, struct pinmem_cg *cg,
				 u32 reason, u64 refuser, long timeout);
int pinmem_budget_tail_lock(struct pinmem_file *f);
void pinmem_budget_tail_unlock(struct pinmem_file *f);
int pinmem_budget_gup_lock(struct pinmem_file *f);
void pinmem_budget_gup_unlock(struct pinmem_file *f);
void pinmem_budget_commit(struct pinmem_file *f);
void pinmem_budget_release(struct pinmem_file *f, struct pinmem_cg *cg,
			   u64 bytes);
void pinmem_budget_refuse(struct pinmem_file *f, struct pinmem_cg *cg,
			  u32 reason, u64 refuser);
void pinmem_budget_kmem(struct pinmem_file *f, s64 bytes);

u64 pinmem_budget_rlimit(struct pinmem_file *f);
u64 pinmem_budget_user_locked(struct pinmem_file *f);
void pinmem_budget_global(struct pinmem_global_view *v);
void pinmem_budget_user(kuid_t uid, struct pinmem_user_view *v);
void pinmem_budget_file(struct pinmem_file *f, struct pinmem_acct *acct);
void pinmem_budget_file_cgroup(struct pinmem_file *f, u64 *id, u64 *refuser);
u64 pinmem_budget_round(u64 bytes);
u64 pinmem_acct_refused(const struct pinmem_acct *a, unsigned int reason);
void pinmem_budget_enter(void);
void pinmem_budget_leave(void);
int pinmem_budget_users_snapshot(struct pinmem_user_view **views, size_t *nr);

int pinmem_budget_get_limits(struct pinmem_limits *l);
int pinmem_budget_set_limits(const struct pinmem_limits *l);

#endif /* _PINMEM_BUDGET_H */
