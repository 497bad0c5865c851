// SPDX-License-Identifier: GPL-2.0
/*
 * Canary for the debug-kernel check (tests/vm-debug/check.sh --canary): it
 * loads under the name pinmem, takes two mutexes in both orders (a lockdep
 * circular-dependency report; first, as any report turns lockdep off), reads
 * one byte past a kmalloc'd buffer (a KASAN slab-out-of-bounds report) and
 * keeps an allocation that only its own data references, so it leaks once
 * the module is unloaded (a kmemleak report whose backtrace points into the
 * module's former text).
 */
#include <linux/compiler.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/slab.h>

static void *canary_kept;
static DEFINE_MUTEX(canary_a);
static DEFINE_MUTEX(canary_b);

static int __init canary_init(void)
{
	size_t i = 32;
	char *p;

	mutex_lock(&canary_a);
	mutex_lock(&canary_b);
	mutex_unlock(&canary_b);
	mutex_unlock(&canary_a);
	mutex_lock(&canary_b);
	mutex_lock(&canary_a);
	mutex_unlock(&canary_a);
	mutex_unlock(&canary_b);

	p = kmalloc(32, GFP_KERNEL);
	if (!p)
		return -ENOMEM;
	OPTIMIZER_HIDE_VAR(i);
	pr_info("pinmem canary: out-of-bounds byte %d\n", READ_ONCE(p[i]));
	kfree(p);
	canary_kept = kmalloc(64, GFP_KERNEL);
	return 0;
}

static void __exit canary_exit(void)
{
	/* canary_kept is not freed on purpose. */
}

module_init(canary_init);
module_exit(canary_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("pinmem debug-kernel check canary (broken on purpose)");
