/* SPDX-License-Identifier: MIT */
/*
 * pinmem._pinmem: the CPython extension over libpinmem.  One file per
 * concept: module.c (module and exceptions), context.c (pm_ctx), buffer.c
 * (pinned memory as buffer protocol and DLPack), dtype.c (element types),
 * stream.c (manifests, streams, batches).
 *
 * Lifetimes: every object that points into library memory holds a strong
 * reference to what owns that memory (a view to its parent buffer or batch,
 * a batch to its stream, a buffer or stream to its context), and a
 * context or stream closed while something still points into it is only
 * torn down when the last of those goes.  Objects inherited by a forked
 * child never call into the library: the child's copy of the /dev/pinmem
 * file is the parent's, and unpinning from the child would unpin the
 * parent's memory.
 */
#ifndef PINMEM_PY_H
#define PINMEM_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "pinmem.h"
#include "pinmem_stream.h"

#define PMPY_MAXDIM 16


/* DLPack (dmlc/dlpack v0.x, the "dltensor" capsule every consumer accepts). */
enum { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3 };
enum { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLBool = 6 };
typedef struct { int32_t device_type; int32_t device_id; } DLDevice;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct {
	void *data;
	DLDevice device;
	int32_t ndim;
	DLDataType dtype;
	int64_t *shape;
	int64_t *strides;
	uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
	DLTensor dl_tensor;
	void *manager_ctx;
	void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

/* An element type: its name, buffer-protocol format ("" if none) and DLPack code. */
struct pmpy_dtype {
	const char *name;
	const char *format;
	uint8_t code;
	uint8_t bits;
};
const struct pmpy_dtype *pmpy_dtype_lookup(PyObject *obj);
extern const struct pmpy_dtype pmpy_uint8;

typedef struct {
	PyObject_HEAD
	struct pm_ctx *ctx;
	pid_t pid;		/* the process that opened it */
	Py_ssize_t users;	/* buffers, streams and calls without the GIL still alive */
	bool closing;		/* close() asked while users were alive */
} PmContext;

struct PmBatch;

typedef struct {
	PyObject_HEAD
	PmContext *ctx;		/* set when this object owns buf */
	struct pm_buf *buf;	/* owned pinned buffer, or NULL for a view */
	PyObject *base;		/* parent buffer, batch or pinned object kept alive */
	Py_buffer src;		/* the caller's memory pinned in place */
	bool has_src;
	struct PmBatch *batch;	/* batch whose release ends new exports, or NULL */
	char *ptr;
	Py_ssize_t nbytes;
	int ndim;
	Py_ssize_t shape[PMPY_MAXDIM];
	Py_ssize_t strides[PMPY_MAXDIM];
	const struct pmpy_dtype *dtype;
	int dev_type, dev_id;
	Py_ssize_t exports;	/* live buffer-protocol exports */
	PyObject *weakrefs;
} PmBuffer;

typedef struct {
	PyObject_HEAD
	struct pm_manifest *m;
	Py_ssize_t streams;	/* streams reading it: it must not change under them */
	bool mutating;		/* add_file()/load() running without the GIL */
} PmManifest;

typedef struct {
	PyObject_HEAD
	PmContext *ctx;
	PmManifest *manifest;
	struct pm_stream *s;
	pid_t pid;
	Py_ssize_t batches;	/* Batch objects alive */
	Py_ssize_t calls;	/* next() calls running without the GIL */
	bool closing;
	bool ended;
	int dev_type, dev_id;	/* DLPack device of dev views: the context's backend */
	bool views_on_dev;	/* Batch.views are of the device copy */
} PmStream;

typedef struct PmBatch {
	PyObject_HEAD
	PmStream *stream;
	struct pm_batch *b;
	bool released;
	void *consumer;		/* CUDA stream a device view was exported to (NULL: legacy default) */
} PmBatch;

extern PyTypeObject PmContext_Type, PmBuffer_Type, PmManifest_Type,
	PmStream_Type, PmBatch_Type;
extern PyObject *PmError, *PmBudgetError;

/* Raise for -err from a call on ctx: BudgetError for a refused budget, else pinmem.Error. */
PyObject *pmpy_raise(struct pm_ctx *ctx, int err, const char *what);
/* The same for a sentence the caller holds (pm_open's errbuf). */
PyObject *pmpy_raise_sentence(int err, const char *sentence, const char *what);
/* Raise RuntimeError if obj was made by another process (a forked child). */
int pmpy_check_pid(pid_t pid, const char *what);
/* A context user went away: close it if close() was asked and it was the last. */
void pmpy_ctx_unuse(PmContext *c);
void pmpy_ctx_use(PmContext *c);
/* A C-contiguous view of len bytes at ptr, kept alive by base. */
PmBuffer *pmpy_view(PyObject *base, struct PmBatch *batch, char *ptr,
		    Py_ssize_t nbytes, int dev_type, int dev_id);
/* Parse shape (a tuple of ints) into dims; *count is their product. */
int pmpy_shape(PyObject *shape, Py_ssize_t *dims, int *ndim, Py_ssize_t *count);
/* Set shape (a tuple of ints, or None for 1-D) and dtype of a fresh view; checks they fill nbytes exactly when exact. */
int pmpy_set_layout(PmBuffer *v, PyObject *shape, const struct pmpy_dtype *dt,
		    bool exact);
void pmpy_stream_batch_gone(PmStream *st);
/* The cudaStream_t obj names: an int, or an object with .cuda_stream (torch.cuda.Stream). */
int pmpy_stream_ptr(PyObject *obj, void **ptr);
/* pm_stream_batch_wait on cuda_stream, or -1 with an exception. */
int pmpy_batch_wait(struct PmBatch *self, void *cuda_stream);
/* pinmem.module_stats(device=...). */
PyObject *pmpy_module_stats(PyObject *self, PyObject *args, PyObject *kw);
/* keep_heap(slot_bytes): a worker's malloc keeps a batch's samples for the next (heap.c). */
PyObject *pmpy_keep_heap(PyObject *self, PyObject *arg);
/* Index of obj (a str) in names, or -1 with ValueError naming what. */
int pmpy_choice(PyObject *obj, const char *const *names, const char *what);

#endif
