/* SPDX-License-Identifier: MIT */
/* Internal view of a manifest, shared by the stream's files. */
#ifndef PM_MANIFEST_H
#define PM_MANIFEST_H

#include <stdint.h>

#include "pinmem_stream.h"

struct pm_mitem {
	uint64_t offset;
	uint64_t length;
	uint32_t path_id;
	uint32_t crc32c;
	uint32_t sample;	/* items of one sample share it (consecutive items, ids in order) */
	uint32_t field;		/* its name in the sample: fields[field - 1], 0: none */
	uint8_t has_crc32c;
};

struct pm_manifest {
	struct pm_mitem *items;
	size_t n, cap;
	uint64_t bytes;
	char **paths;
	uint32_t npaths, paths_cap;
	uint32_t nsamples;
	char **fields;		/* distinct field names ("input.npy") */
	uint32_t nfields, fields_cap;
	uint32_t *fhash;	/* open addressing: field id (index + 1), 0 empty */
	uint32_t fhash_size;	/* power of two, > 2 * nfields */
	uint32_t *hash;		/* open addressing: path_id + 1, 0 empty */
	uint32_t hash_size;	/* power of two, > 2 * npaths */
};

/* Drop items and paths added after the first n items and npaths paths. */
void pm_manifest_truncate(struct pm_manifest *m, size_t n, uint32_t npaths);

/* Field id (1-based) of the name of len bytes at name, added when new; -ENOMEM, -E2BIG. */
int pm_manifest_field_id(struct pm_manifest *m, const char *name, size_t len, uint32_t *idp);

/* The id of the path made of len bytes at path; -ENOENT when not in m. */
int pm_manifest_find(const struct pm_manifest *m, const char *path, size_t len,
		     uint32_t *idp);

#endif
