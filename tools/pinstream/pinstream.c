// SPDX-License-Identifier: MIT
/*
 * pinstream: stream a dataset through libpinmem (io_uring into pinned slots,
 * async copies to the device), show throughput and stalls, compare with the
 * usual ways of doing it, or write a synthetic dataset.  This file holds the
 * command line; bad input is one line on stderr and exit status 2.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "../pinctl/pinctl.h"	/* pctl_parse_size, pctl_format_size */
#include "pinstream.h"

static const char usage_text[] =
"usage: pinstream [OPTIONS] FILE...\n"
"       pinstream [OPTIONS] --manifest FILE\n"
"       pinstream [OPTIONS] --tar SHARD...\n"
"       pinstream --compare [OPTIONS] FILE... | --manifest FILE\n"
"       pinstream --make-dataset DIR --size SIZE [--files N] [--seed N]\n"
"       pinstream --make-dataset DIR --files N --item-size MIN-MAX [--seed N]\n"
"\n"
"Streams dataset items with io_uring straight into pinned batch slots, copies\n"
"each batch to the device and recycles the slot; prints throughput and where\n"
"the time went.\n"
"\n"
"Items:\n"
"  FILE...               each file cut into items of --item-bytes\n"
"  --manifest F          items from F: 'path offset length [crc32c]' per line\n"
"  --item-bytes SIZE     item size for FILE... (0: whole files) [1M]\n"
"  --tar                 FILE... are tar shards: one item per member, read\n"
"                        in place (WebDataset keys group them into samples)\n"
"Batches and I/O:\n"
"  --batch-bytes SIZE    slot size; a batch takes items while they fit [16M]\n"
"  --batch-items N       at most N items per batch\n"
"  --slots N             pinned slots in the ring [4]\n"
"  --prefetch N          batches read ahead of the consumer [slots]\n"
"  --qd N                reads in flight [32]\n"
"  --readers N           reader threads, each with its own ring and a share\n"
"                        of --qd [the CPUs it may run on, at most 4; 1 when\n"
"                        every file is O_DIRECT]\n"
"  --chunk SIZE          largest single read; large items are split [1M]\n"
"  --direct auto|on|off  O_DIRECT where possible / always / never [auto]\n"
"  --coalesce auto|on|off  read close items of one file (tar members) as one\n"
"                        range and copy them into place: items under\n"
"                        64 KiB / always / never [auto];\n"
"                        --compare adds rows (f) and (g) for it\n"
"  --backend auto|cuda|host|none  copy backend [auto; none for --compare]\n"
"  --pin auto|module|mlock|none   how slots are pinned [auto]\n"
"  --device N            CUDA device, one process per GPU [$LOCAL_RANK, else 0;\n"
"                        0 when CUDA_VISIBLE_DEVICES names one]\n"
"Order:\n"
"  --epochs N            passes over the items [1]\n"
"  --shuffle             new order every epoch, from --seed [off]\n"
"  --seed N              shuffle seed (also --make-dataset's) [0]\n"
"  --rank R --world-size W  read shard R of W (DistributedSampler) [0 of 1]\n"
"  --shard-pad exact|pad|drop  uneven shards: each item once / repeat / drop [exact]\n"
"  --order in|completed  deliver batches in order or as they complete [in]\n"
"  --on-error stop|skip  a failed batch stops the stream or is skipped [stop]\n"
"  --no-crc              do not check the manifest's crc32c values\n"
"Output:\n"
"  --json                one JSON object instead of the summary table\n"
"  --progress / --no-progress  live line on stderr [when it is a terminal]\n"
"Modes:\n"
"  --compare             same items through (a) pread + memcpy into pinned memory\n"
"                        (DataLoader pin_memory), (b) pread into pinned memory,\n"
"                        (c) pinmem buffered, (d) pinmem O_DIRECT, (e) a\n"
"                        DataLoader with N workers; cold (page cache dropped)\n"
"                        and then warm (each mode's second epoch: the cache\n"
"                        as its own first epoch left it)\n"
"  --cold-only           --compare without the warm (page cache) rows\n"
"  --rounds N            --compare runs every row N times, in a rotated order\n"
"                        (reversed every other round), and shows the median\n"
"                        and the range [5]\n"
"  --make-dataset DIR    write DIR/data-NNNN.bin and DIR/manifest.txt (random\n"
"                        unaligned items with crc32c)\n"
"  --size SIZE           dataset size, e.g. 2G\n"
"  --files N             dataset files [8]\n"
"  --item-size MIN-MAX   instead of --size: N files of one item each, sizes\n"
"                        uniform in MIN-MAX (e.g. 1K-32K, ImageNet-like)\n"
"  -h, --help            this text;  --version  the version\n"
"\n"
"SIZE takes K, M, G, T suffixes (binary).  Exit status: 0 done, 1 the stream\n"
"failed (the message names the item), 2 bad command line.\n"
"\n"
"Examples:\n"
"  pinstream --make-dataset /data/synth --size 4G --files 16\n"
"  pinstream /data/synth/data-*.bin --batch-bytes 64M --slots 8\n"
"  pinstream --manifest /data/synth/manifest.txt --epochs 3 --shuffle --seed 7\n"
"  pinstream --manifest train.txt --rank 1 --world-size 8 --json\n"
"  pinstream --compare /data/synth/data-*.bin\n";

void ps_err(const char *fmt, ...)
{
	va_list ap;

	fputs("pinstream: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

double ps_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

const char *ps_bytes(uint64_t bytes, char *buf, size_t len)
{
	return pctl_format_size(bytes, buf, len);
}

/* Length of the valid UTF-8 sequence at s (1-4), 0 when s does not start one. */
static int utf8_len(const unsigned char *s)
{
	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		return (s[1] & 0xc0) == 0x80 ? 2 : 0;
	if (s[0] >= 0xe0 && s[0] <= 0xef) {
		/* no overlong forms (e0 80-9f) and no surrogates (ed a0-bf) */
		if ((s[1] & 0xc0) != 0x80 || (s[0] == 0xe0 && s[1] < 0xa0) ||
		    (s[0] == 0xed && s[1] > 0x9f))
			return 0;
		return (s[2] & 0xc0) == 0x80 ? 3 : 0;
	}
	if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		/* no overlong forms (f0 80-8f), nothing past U+10FFFF (f4 90-) */
		if ((s[1] & 0xc0) != 0x80 || (s[0] == 0xf0 && s[1] < 0x90) ||
		    (s[0] == 0xf4 && s[1] > 0x8f))
			return 0;
		return (s[2] & 0xc0) == 0x80 && (s[3] & 0xc0) == 0x80 ? 4 : 0;
	}
	return 0;
}

/*
 * Paths are bytes, JSON is UTF-8: a byte that is not part of valid UTF-8 is
 * written as \udcXX, Python's surrogateescape, so os.fsencode() of the
 * parsed string gives the path's bytes back.
 */
void ps_json_str(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	fputc('"', f);
	while (*p) {
		int n = utf8_len(p);

		if (!n) {
			fprintf(f, "\\udc%02x", *p++);
		} else if (*p == '"' || *p == '\\') {
			fprintf(f, "\\%c", *p++);
		} else if (*p < 0x20 || *p == 0x7f) {
			fprintf(f, "\\u%04x", *p++);
		} else {
			fwrite(p, 1, (size_t)n, f);
			p += n;
		}
	}
	fputc('"', f);
}

struct pm_manifest *ps_load_items(const struct ps_args *a)
{
	struct pm_manifest *m;
	char err[512] = "";
	int ret;

	if (pm_manifest_create(&m)) {
		ps_err("out of memory");
		return NULL;
	}
	if (a->manifest) {
		ret = pm_manifest_load(m, a->manifest, err, sizeof(err));
	} else {
		ret = 0;
		for (int i = 0; i < a->nfiles && !ret; i++) {
			size_t before = pm_manifest_count(m);

			ret = a->tar ? pm_manifest_add_tar(m, a->files[i], err, sizeof(err)) :
				       pm_manifest_add_file(m, a->files[i], a->item_bytes, err,
							    sizeof(err));
			if (!ret && pm_manifest_count(m) == before)
				ps_err("%s: %s, no items; going on", a->files[i],
				       a->tar ? "no members with data" : "empty file");
		}
		if (!ret && !pm_manifest_count(m)) {
			snprintf(err, sizeof(err), "no items: every file is empty");
			ret = -EINVAL;
		}
	}
	if (ret) {
		ps_err("%s", err[0] ? err : strerror(-ret));
		pm_manifest_destroy(m);
		return NULL;
	}
	return m;
}

struct pm_ctx *ps_open(enum pm_backend_kind backend, uint32_t device)
{
	struct pm_open_opts oo = { .backend = backend, .cuda_device = (int)device };
	struct pm_ctx *ctx;
	char err[1024] = "";
	int ret;

	oo.errbuf = err;
	oo.errbuf_len = sizeof(err);
	ret = pm_open(&ctx, &oo);
	if (ret) {
		ps_err("%s", err[0] ? err : strerror(-ret));
		return NULL;
	}
	return ctx;
}

/* --- argument parsing --- */

enum {
	OPT_MANIFEST = 256, OPT_ITEM_BYTES, OPT_BATCH_BYTES, OPT_BATCH_ITEMS,
	OPT_SLOTS, OPT_PREFETCH, OPT_QD, OPT_READERS, OPT_CHUNK, OPT_DIRECT, OPT_BACKEND,
	OPT_PIN, OPT_EPOCHS, OPT_SHUFFLE, OPT_SEED, OPT_RANK, OPT_WORLD,
	OPT_SHARD_PAD, OPT_ORDER, OPT_ON_ERROR, OPT_NO_CRC, OPT_JSON,
	OPT_PROGRESS, OPT_NO_PROGRESS, OPT_COMPARE, OPT_COLD_ONLY, OPT_TAR,
	OPT_MAKE_DATASET, OPT_SIZE, OPT_FILES, OPT_ITEM_SIZE, OPT_VERSION,
	OPT_DEVICE, OPT_ROUNDS, OPT_COALESCE,
};

static const struct option longopts[] = {
	{ "manifest", required_argument, NULL, OPT_MANIFEST },
	{ "item-bytes", required_argument, NULL, OPT_ITEM_BYTES },
	{ "batch-bytes", required_argument, NULL, OPT_BATCH_BYTES },
	{ "batch-items", required_argument, NULL, OPT_BATCH_ITEMS },
	{ "slots", required_argument, NULL, OPT_SLOTS },
	{ "prefetch", required_argument, NULL, OPT_PREFETCH },
	{ "qd", required_argument, NULL, OPT_QD },
	{ "readers", required_argument, NULL, OPT_READERS },
	{ "chunk", required_argument, NULL, OPT_CHUNK },
	{ "direct", required_argument, NULL, OPT_DIRECT },
	{ "coalesce", required_argument, NULL, OPT_COALESCE },
	{ "backend", required_argument, NULL, OPT_BACKEND },
	{ "device", required_argument, NULL, OPT_DEVICE },
	{ "pin", required_argument, NULL, OPT_PIN },
	{ "epochs", required_argument, NULL, OPT_EPOCHS },
	{ "shuffle", no_argument, NULL, OPT_SHUFFLE },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "rank", required_argument, NULL, OPT_RANK },
	{ "world-size", required_argument, NULL, OPT_WORLD },
	{ "shard-pad", required_argument, NULL, OPT_SHARD_PAD },
	{ "order", required_argument, NULL, OPT_ORDER },
	{ "on-error", required_argument, NULL, OPT_ON_ERROR },
	{ "no-crc", no_argument, NULL, OPT_NO_CRC },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "progress", no_argument, NULL, OPT_PROGRESS },
	{ "no-progress", no_argument, NULL, OPT_NO_PROGRESS },
	{ "compare", no_argument, NULL, OPT_COMPARE },
	{ "tar", no_argument, NULL, OPT_TAR },
	{ "cold-only", no_argument, NULL, OPT_COLD_ONLY },
	{ "rounds", required_argument, NULL, OPT_ROUNDS },
	{ "make-dataset", required_argument, NULL, OPT_MAKE_DATASET },
	{ "size", required_argument, NULL, OPT_SIZE },
	{ "files", required_argument, NULL, OPT_FILES },
	{ "item-size", required_argument, NULL, OPT_ITEM_SIZE },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 },
};

static const char *opt_name(int c)
{
	for (const struct option *o = longopts; o->name; o++)
		if (o->val == c)
			return o->name;
	return "?";
}

static int bad(int c, const char *arg, const char *why)
{
	ps_err("--%s '%s': %s (see --help)", opt_name(c), arg, why);
	return -EINVAL;
}

static int size_arg(int c, const char *arg, uint64_t min, uint64_t max, uint64_t *v)
{
	int ret = pctl_parse_size(arg, 0, v);

	if (ret || !strcmp(arg, "unlimited"))
		return bad(c, arg, ret == -ERANGE ? "too large" :
			   "not a size (e.g. 4096, 512K, 16M, 2G)");
	if (*v < min || *v > max) {
		char lo[32], hi[32], why[96];

		snprintf(why, sizeof(why), "must be between %s and %s",
			 pctl_format_size(min, lo, sizeof(lo)),
			 pctl_format_size(max, hi, sizeof(hi)));
		return bad(c, arg, why);
	}
	return 0;
}

/* Plain decimal: no sign, spaces or suffix. */
static int parse_u64(const char *s, uint64_t *v)
{
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno || *end ? -EINVAL : 0;
}

static int num_arg(int c, const char *arg, uint64_t min, uint64_t max, uint64_t *v)
{
	char why[64];

	if (parse_u64(arg, v))
		return bad(c, arg, "not a number");
	if (*v < min || *v > max) {
		snprintf(why, sizeof(why), "must be between %llu and %llu",
			 (unsigned long long)min, (unsigned long long)max);
		return bad(c, arg, why);
	}
	return 0;
}

/* "MIN-MAX" sizes, 1 <= MIN <= MAX <= 1 GiB. */
static int range_arg(int c, const char *arg, uint64_t *lo, uint64_t *hi)
{
	char first[64];
	const char *dash = strchr(arg, '-');

	if (!dash || (size_t)(dash - arg) >= sizeof(first)) {
		ps_err("--item-size '%s': expected MIN-MAX, e.g. 1K-32K", arg);
		return -EINVAL;
	}
	memcpy(first, arg, (size_t)(dash - arg));
	first[dash - arg] = 0;
	if (size_arg(c, first, 1, 1ULL << 30, lo) || size_arg(c, dash + 1, 1, 1ULL << 30, hi))
		return -EINVAL;
	if (*lo > *hi) {
		ps_err("--item-size '%s': MIN is above MAX", arg);
		return -EINVAL;
	}
	return 0;
}

static int u32_arg(int c, const char *arg, uint32_t min, uint32_t max, uint32_t *v)
{
	uint64_t x;
	int ret = num_arg(c, arg, min, max, &x);

	if (!ret)
		*v = (uint32_t)x;
	return ret;
}

/* One of names (NULL-terminated), as its index. */
static int choice(int c, const char *arg, const char *const *names, int *v)
{
	char why[128] = "expected one of:";

	for (int i = 0; names[i]; i++) {
		if (!strcmp(arg, names[i])) {
			*v = i;
			return 0;
		}
		snprintf(why + strlen(why), sizeof(why) - strlen(why), " %s", names[i]);
	}
	return bad(c, arg, why);
}

static int parse_args(int argc, char **argv, struct ps_args *a)
{
	static const char *const direct[] = { "auto", "on", "off", NULL };
	static const char *const backend[] = { "auto", "host", "cuda", "none", NULL };
	static const char *const pin[] = { "auto", "module", "mlock", "none", NULL };
	static const char *const pad[] = { "exact", "pad", "drop", NULL };
	static const char *const order[] = { "in", "completed", NULL };
	static const char *const onerr[] = { "stop", "skip", NULL };
	bool world_set = false, device_set = false;
	const char *local_rank, *visible;
	uint64_t v;
	int c, ret = 0, x;

	memset(a, 0, sizeof(*a));
	pm_stream_opts_init(&a->so);
	a->item_bytes = 1 << 20;
	a->progress = -1;
	a->dataset_files = 8;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		const char *arg = optarg;

		switch (c) {
		case OPT_MANIFEST: a->manifest = arg; break;
		case OPT_ITEM_BYTES:
			ret = size_arg(c, arg, 0, 1ULL << 40, &a->item_bytes);
			break;
		case OPT_BATCH_BYTES:
			ret = size_arg(c, arg, 4096, PM_URING_IOVEC_MAX, &a->so.batch_bytes);
			break;
		case OPT_BATCH_ITEMS:
			ret = u32_arg(c, arg, 1, 1U << 24, &a->so.batch_items);
			break;
		case OPT_SLOTS: ret = u32_arg(c, arg, 1, 4096, &a->so.slots); break;
		case OPT_PREFETCH: ret = u32_arg(c, arg, 1, 4096, &a->so.prefetch); break;
		case OPT_QD: ret = u32_arg(c, arg, 1, 4096, &a->so.qd); break;
		case OPT_READERS: ret = u32_arg(c, arg, 1, 64, &a->so.readers); break;
		case OPT_CHUNK:
			ret = size_arg(c, arg, 4096, 1ULL << 30, &v);
			if (!ret && (v & 4095))
				ret = bad(c, arg, "must be a multiple of 4096");
			a->so.chunk_bytes = (uint32_t)v;
			break;
		case OPT_DIRECT:
			ret = choice(c, arg, direct, &x);
			a->so.direct = (enum pm_direct)x;
			break;
		case OPT_COALESCE:
			ret = choice(c, arg, direct, &x);	/* auto, on, off alike */
			a->so.coalesce = (enum pm_coalesce)x;
			a->coalesce_set = true;
			break;
		case OPT_BACKEND:
			ret = choice(c, arg, backend, &x);
			a->backend = (enum pm_backend_kind)x;
			a->backend_set = true;
			break;
		case OPT_DEVICE:
			ret = u32_arg(c, arg, 0, 1023, &a->device);
			device_set = true;
			break;
		case OPT_PIN:
			ret = choice(c, arg, pin, &x);
			a->so.pin = (enum pm_pin_mode)x;
			break;
		case OPT_EPOCHS: ret = u32_arg(c, arg, 1, 1000000, &a->so.epochs); break;
		case OPT_SHUFFLE: a->so.shuffle = true; break;
		case OPT_SEED: ret = num_arg(c, arg, 0, UINT64_MAX, &a->so.seed); break;
		case OPT_RANK: ret = u32_arg(c, arg, 0, 1U << 20, &a->so.rank); break;
		case OPT_WORLD:
			ret = u32_arg(c, arg, 1, 1U << 20, &a->so.world_size);
			world_set = true;
			break;
		case OPT_SHARD_PAD:
			ret = choice(c, arg, pad, &x);
			a->so.shard_pad = (enum pm_shard_pad)x;
			break;
		case OPT_ORDER:
			ret = choice(c, arg, order, &x);
			a->so.order = (enum pm_order)x;
			break;
		case OPT_ON_ERROR:
			ret = choice(c, arg, onerr, &x);
			a->so.on_error = (enum pm_on_error)x;
			break;
		case OPT_NO_CRC: a->so.no_crc = true; break;
		case OPT_JSON: a->json = true; break;
		case OPT_PROGRESS: a->progress = 1; break;
		case OPT_NO_PROGRESS: a->progress = 0; break;
		case OPT_COMPARE: a->compare = true; break;
		case OPT_TAR: a->tar = true; break;
		case OPT_COLD_ONLY: a->no_warm = true; break;
		case OPT_ROUNDS: ret = u32_arg(c, arg, 1, PS_MAX_ROUNDS, &a->rounds); break;
		case OPT_MAKE_DATASET: a->make_dataset = arg; break;
		case OPT_SIZE:
			ret = size_arg(c, arg, 4096, 1ULL << 50, &a->size);
			a->size_set = true;
			break;
		case OPT_FILES:
			ret = u32_arg(c, arg, 1, 10000000, &a->dataset_files);
			break;
		case OPT_ITEM_SIZE:
			ret = range_arg(c, arg, &a->item_min, &a->item_max);
			break;
		case 'h':
			fputs(usage_text, stdout);
			exit(0);
		case OPT_VERSION:
			printf("pinstream %s\n", PINMEM_VERSION);
			exit(0);
		default:
			if (optopt && optopt < 256)
				ps_err("unknown option '-%c' (see --help)", optopt);
			else if (optopt)
				ps_err("option '%s' needs a value (see --help)", argv[optind - 1]);
			else
				ps_err("unknown option '%s' (see --help)", argv[optind - 1]);
			return -EINVAL;
		}
		if (ret)
			return ret;
	}
	a->files = (const char **)argv + optind;
	a->nfiles = argc - optind;

	if (a->make_dataset) {
		if (a->size_set == !!a->item_max) {
			ps_err("--make-dataset needs --size or --item-size, not both (see --help)");
			return -EINVAL;
		}
		if (a->nfiles || a->manifest || a->compare) {
			ps_err("--make-dataset takes no items, --manifest or --compare");
			return -EINVAL;
		}
		if (a->size_set && a->dataset_files > 100000) {
			ps_err("--files %u: at most 100000 with --size", a->dataset_files);
			return -EINVAL;
		}
		if (a->size_set && a->dataset_files > a->size / 4096) {
			ps_err("--files %u: more files than 4 KiB blocks in --size",
			       a->dataset_files);
			return -EINVAL;
		}
		return 0;
	}
	if (a->size_set) {
		ps_err("--size only goes with --make-dataset");
		return -EINVAL;
	}
	if (a->tar && (a->manifest || !a->nfiles)) {
		ps_err("--tar takes tar shards as FILE..., not --manifest");
		return -EINVAL;
	}
	if (a->manifest && a->nfiles) {
		ps_err("give FILE... or --manifest, not both");
		return -EINVAL;
	}
	if (!a->manifest && !a->nfiles) {
		ps_err("no items: give FILE... or --manifest F (see --help)");
		return -EINVAL;
	}
	/* one process per GPU: torchrun and friends say which in LOCAL_RANK */
	local_rank = getenv("LOCAL_RANK");
	visible = getenv("CUDA_VISIBLE_DEVICES");
	if (!device_set && local_rank && *local_rank) {
		if (parse_u64(local_rank, &v) || v > 1023) {
			ps_err("LOCAL_RANK='%s' is not a CUDA device number; pass --device N",
			       local_rank);
			return -EINVAL;
		}
		/* one GPU made visible to each process (Slurm, Kubernetes): device 0 */
		a->device = visible && *visible && !strchr(visible, ',') ? 0 : (uint32_t)v;
	}
	if (world_set && a->so.rank >= a->so.world_size) {
		ps_err("--rank %u must be below --world-size %u", a->so.rank,
		       a->so.world_size);
		return -EINVAL;
	}
	if (!world_set && a->so.rank) {
		ps_err("--rank %u needs --world-size", a->so.rank);
		return -EINVAL;
	}
	if (a->so.prefetch > a->so.slots) {
		ps_err("--prefetch %u exceeds --slots %u", a->so.prefetch, a->so.slots);
		return -EINVAL;
	}
	if (a->rounds && !a->compare) {
		ps_err("--rounds is an option of --compare");
		return -EINVAL;
	}
	if (a->compare && !a->rounds)
		a->rounds = 5;
	if (a->compare && (a->so.epochs > 1 || a->so.world_size > 1)) {
		ps_err("--compare reads every item once: no --epochs or --world-size");
		return -EINVAL;
	}
	return 0;
}

/* Many files means many descriptors: use what the hard limit allows. */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int main(int argc, char **argv)
{
	struct ps_args a;

	if (parse_args(argc, argv, &a))
		return PS_EXIT_USAGE;
	raise_nofile();
	if (a.make_dataset)
		return ps_make_dataset(&a);
	if (a.compare)
		return ps_compare(&a);
	return ps_run(&a);
}
