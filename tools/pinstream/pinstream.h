/* SPDX-License-Identifier: MIT */
/* pinstream: shared pieces of the tool's files. */
#ifndef PINSTREAM_H
#define PINSTREAM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "pinmem.h"
#include "pinmem_stream.h"

#define PS_EXIT_FAIL	1
#define PS_EXIT_USAGE	2
#define PS_MAX_ROUNDS	25	/* --compare --rounds */

struct ps_args {
	const char *manifest;
	const char **files;
	int nfiles;
	uint64_t item_bytes;		/* FILES mode: items per file chunk */
	struct pm_stream_opts so;
	enum pm_backend_kind backend;
	bool backend_set;
	bool coalesce_set;	/* --coalesce given */
	uint32_t device;		/* CUDA device: --device, else $LOCAL_RANK, else 0 */
	bool json;
	int progress;			/* -1 auto (a terminal), 0 off, 1 on */
	bool compare;
	bool tar;			/* FILE... are tar shards */
	bool no_warm;			/* --compare: cold modes only */
	uint32_t rounds;		/* --compare: runs of every row (median shown) */
	const char *make_dataset;	/* directory */
	uint64_t size;
	uint32_t dataset_files;
	bool size_set;
	uint64_t item_min, item_max;	/* --item-size A-B: one small file per item */
};

/* Monotonic seconds. */
double ps_now(void);
/* "1.5 GiB" into buf. */
const char *ps_bytes(uint64_t bytes, char *buf, size_t len);
/* Items of FILES or --manifest; prints the error and returns NULL. */
struct pm_manifest *ps_load_items(const struct ps_args *a);
/* A context for the backend asked for; prints the error and returns NULL. */
struct pm_ctx *ps_open(enum pm_backend_kind backend, uint32_t device);
/* Print "pinstream: ..." to stderr. */
void ps_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* JSON string with escapes. */
void ps_json_str(FILE *f, const char *s);

/*
 * Bytes the cgroups named in proc_cgroup (a /proc/PID/cgroup) under root
 * (/sys/fs/cgroup) may still take: the smallest memory.max -
 * memory.current of the v2 cgroup and its ancestors (v1's memory
 * controller alike), and in *limit the smallest limit.  UINT64_MAX (both)
 * when nothing limits it ("max") or it cannot be read.
 */
uint64_t ps_cgroup_room(const char *proc_cgroup, const char *root, uint64_t *limit);

int ps_run(const struct ps_args *a);
int ps_compare(const struct ps_args *a);
int ps_make_dataset(const struct ps_args *a);

#endif
