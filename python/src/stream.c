// SPDX-License-Identifier: MIT
/*
 * pinmem._pinmem.Stream and Batch: a pm_stream, and the batches it hands
 * out.  A Batch's views (host slot, device copy, items) keep the Batch, the
 * Batch keeps the Stream; the stream is destroyed (its slots unpinned) only
 * once it was closed and no Batch is left, so no view outlives its memory.
 */
#include "pinmem_py.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static const char *const direct_names[] = { "auto", "on", "off", NULL };
static const char *const on_error_names[] = { "stop", "skip", NULL };
static const char *const order_names[] = { "in_order", "as_completed", NULL };
static const char *const pad_names[] = { "exact", "pad", "drop", NULL };
static const char *const pin_names[] = { "auto", "module", "mlock", "none", NULL };
static const char *const handoff_names[] = { "copied", "queued", "host", NULL };
static const char *const coalesce_names[] = { "auto", "on", "off", NULL };

static void stream_destroy(PmStream *self)
{
	struct pm_stream *s = self->s;
	PmContext *ctx = self->ctx;
	PmManifest *manifest = self->manifest;

	/*
	 * Detached first, all of it: the destroy joins the readers and waits for
	 * the copies without the GIL, and a close() from another thread meanwhile
	 * must find nothing left to destroy (not the context and manifest the
	 * destroy still uses).
	 */
	self->s = NULL;
	self->ctx = NULL;
	self->manifest = NULL;
	if (s && self->pid == getpid()) {
		Py_BEGIN_ALLOW_THREADS
		pm_stream_destroy(s);
		Py_END_ALLOW_THREADS
	}
	if (ctx) {
		pmpy_ctx_unuse(ctx);
		Py_DECREF(ctx);
	}
	if (manifest) {
		manifest->streams--;
		Py_DECREF(manifest);
	}
}

/* Destroyed once closed and nothing uses it: no Batch, no next() running without the GIL. */
static void stream_maybe_destroy(PmStream *st)
{
	if (st->closing && !st->batches && !st->calls)
		stream_destroy(st);
}

void pmpy_stream_batch_gone(PmStream *st)
{
	st->batches--;
	stream_maybe_destroy(st);
}

/* The DLPack device of the copies a context makes, or -1 with ValueError when cuda_device (>= 0) is not it. */
static int stream_device(PmStream *self, struct pm_ctx *ctx, int cuda_device)
{
	struct pm_ctx_info i;
	bool cuda;
	int r = pm_ctx_info(ctx, &i);

	if (r < 0) {
		pmpy_raise(ctx, r, "pm_ctx_info");
		return -1;
	}
	cuda = !strcmp(i.backend, "cuda");
	if (cuda_device >= 0 && (!cuda || i.cuda_device != cuda_device)) {
		if (cuda)
			PyErr_Format(PyExc_ValueError, "pinmem: the context copies to CUDA device %d, not %d; "
				     "open one with cuda_device=%d", i.cuda_device, cuda_device, cuda_device);
		else
			PyErr_Format(PyExc_ValueError, "pinmem: the context's backend is '%s', not 'cuda' "
				     "(CUDA device %d was asked for)", i.backend, cuda_device);
		return -1;
	}
	self->dev_type = cuda ? kDLCUDA : kDLCPU;
	self->dev_id = cuda ? i.cuda_device : 0;
	return 0;
}

static int choice(PyObject *obj, const char *const *names, const char *what, int *out)
{
	if (!obj)
		return 0;
	*out = pmpy_choice(obj, names, what);
	return *out < 0 ? -1 : 0;
}

static int stream_init(PmStream *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "ctx", "manifest", "slots", "prefetch", "batch_bytes",
				  "batch_items", "qd", "chunk_bytes", "epochs", "direct",
				  "on_error", "order", "shuffle", "no_crc", "seed", "rank",
				  "world_size", "shard_pad", "pin", "cuda_device",
				  "views_on_device", "handoff", "readers", "start_batch",
				  "coalesce", NULL };
	PyObject *direct = NULL, *on_error = NULL, *order = NULL, *pad = NULL, *pin = NULL,
		 *handoff = NULL, *coalesce = NULL;
	PmContext *ctx;
	PmManifest *m;
	struct pm_stream_opts o;
	int shuffle = 0, no_crc = 0, d = 0, e = 0, ord = 0, p = 0, pm = 0, dev = -1, on_dev = 0,
	    h = 0, co = 0, r;
	unsigned long long batch_bytes = 0, seed = 0, start_batch = 0;

	pm_stream_opts_init(&o);
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O!|$IIKIIIIUUUppKIIUUipUIKU", kwlist,
					 &PmContext_Type, &ctx, &PmManifest_Type, &m,
					 &o.slots, &o.prefetch, &batch_bytes, &o.batch_items,
					 &o.qd, &o.chunk_bytes, &o.epochs, &direct, &on_error,
					 &order, &shuffle, &no_crc, &seed, &o.rank,
					 &o.world_size, &pad, &pin, &dev, &on_dev, &handoff,
					 &o.readers, &start_batch, &coalesce))
		return -1;
	if (self->s) {
		PyErr_SetString(PyExc_RuntimeError, "pinmem: Stream is already open");
		return -1;
	}
	if (choice(direct, direct_names, "direct mode", &d) ||
	    choice(on_error, on_error_names, "on_error policy", &e) ||
	    choice(order, order_names, "order", &ord) ||
	    choice(pad, pad_names, "shard_pad", &p) ||
	    choice(pin, pin_names, "pin mode", &pm) ||
	    choice(handoff, handoff_names, "handoff", &h) ||
	    choice(coalesce, coalesce_names, "coalesce", &co))
		return -1;
	if (!ctx->ctx || ctx->closing) {
		PyErr_SetString(PyExc_ValueError, "pinmem: the context is closed");
		return -1;
	}
	if (pmpy_check_pid(ctx->pid, "context") || stream_device(self, ctx->ctx, dev))
		return -1;
	if (m->mutating) {
		PyErr_SetString(PyExc_RuntimeError, "pinmem: the manifest is being changed by another thread");
		return -1;
	}
	o.batch_bytes = batch_bytes;
	o.start_batch = start_batch;
	o.seed = seed;
	o.shuffle = shuffle;
	o.no_crc = no_crc;
	o.direct = (enum pm_direct)d;
	o.on_error = (enum pm_on_error)e;
	o.order = (enum pm_order)ord;
	o.shard_pad = (enum pm_shard_pad)p;
	o.pin = (enum pm_pin_mode)pm;
	o.handoff = (enum pm_handoff)h;
	o.coalesce = (enum pm_coalesce)co;
	/* Counted before the GIL goes: close() and manifest changes from other threads wait. */
	pmpy_ctx_use(ctx);
	m->streams++;
	Py_BEGIN_ALLOW_THREADS
	r = pm_stream_create(ctx->ctx, m->m, &o, &self->s);
	Py_END_ALLOW_THREADS
	if (r < 0) {
		self->s = NULL;
		pmpy_raise(ctx->ctx, r, "pm_stream_create");
		m->streams--;
		pmpy_ctx_unuse(ctx);
		return -1;
	}
	self->ctx = (PmContext *)Py_NewRef(ctx);
	self->manifest = (PmManifest *)Py_NewRef(m);
	self->pid = getpid();
	self->views_on_dev = on_dev;
	return 0;
}

static void stream_dealloc(PmStream *self)
{
	stream_destroy(self);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static struct pm_stream *stream_get(PmStream *self)
{
	if (!self->s || self->closing) {
		PyErr_SetString(PyExc_ValueError, "pinmem: the stream is closed");
		return NULL;
	}
	if (pmpy_check_pid(self->pid, "stream"))
		return NULL;
	return self->s;
}

static PyObject *stream_next(PmStream *self, PyObject *unused)
{
	struct pm_stream *s = stream_get(self);
	struct pm_batch *b;
	PmBatch *batch;
	int r;

	if (!s)
		return NULL;
	if (self->ended)
		Py_RETURN_NONE;
	if (self->calls)
		return PyErr_Format(PyExc_RuntimeError, "pinmem: next() is already running in another thread");
	self->calls++;
	Py_BEGIN_ALLOW_THREADS
	r = pm_stream_next(s, &b);
	Py_END_ALLOW_THREADS
	self->calls--;
	if (self->closing) {
		/* close() came from another thread while this call waited: it ends here. */
		if (r == 0 && b)
			pm_stream_release(s, b);
		stream_maybe_destroy(self);
		PyErr_SetString(PyExc_ValueError, "pinmem: the stream was closed while next() waited");
		return NULL;
	}
	if (r == -EDEADLK)
		return PyErr_Format(PmError, "pinmem: every slot is held by an unreleased batch; release batches (batch.release() or 'with batch:') before asking for more");
	if (r < 0) {
		const char *msg = pm_stream_error(s);
		PyObject *exc = PyObject_CallFunction(PmError, "is", -r, *msg ? msg : strerror(-r));

		if (exc) {
			PyErr_SetObject(PmError, exc);
			Py_DECREF(exc);
		}
		return NULL;
	}
	if (!b) {
		self->ended = true;
		Py_RETURN_NONE;
	}
	batch = PyObject_New(PmBatch, &PmBatch_Type);
	if (!batch) {
		pm_stream_release(s, b);
		return NULL;
	}
	batch->stream = (PmStream *)Py_NewRef(self);
	batch->b = b;
	batch->released = false;
	batch->consumer = NULL;
	self->batches++;
	return (PyObject *)batch;
}

static PyObject *stream_close(PmStream *self, PyObject *unused)
{
	if (self->s && self->pid != getpid()) {
		self->s = NULL;
		Py_RETURN_NONE;
	}
	self->closing = true;
	stream_maybe_destroy(self);
	Py_RETURN_NONE;
}

static PyObject *lat(const struct pm_latency *l)
{
	return Py_BuildValue("{s:d,s:d,s:d,s:d}", "p50", l->p50, "p90", l->p90,
			     "p99", l->p99, "max", l->max);
}

static PyObject *stream_stats(PmStream *self, PyObject *unused)
{
	struct pm_stream *s = stream_get(self);
	struct pm_stream_stats st;
	int r;

	if (!s)
		return NULL;
	r = pm_stream_stats(s, &st);
	if (r < 0)
		return pmpy_raise(self->ctx->ctx, r, "pm_stream_stats");
	return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:d,s:d,s:d,s:d,s:d,s:d,s:N,s:N,"
			     "s:I,s:I,s:s,s:s,s:I,s:I,s:K,s:s,s:K,s:K,s:K,s:K,s:K}",
			     "bytes", (unsigned long long)st.bytes,
			     "read_bytes", (unsigned long long)st.read_bytes,
			     "batches", (unsigned long long)st.batches,
			     "items", (unsigned long long)st.items,
			     "failed_batches", (unsigned long long)st.failed_batches,
			     "failed_items", (unsigned long long)st.failed_items,
			     "elapsed_s", st.elapsed_s, "gbps", st.gbps, "io_s", st.io_s,
			     "io_gbps", st.io_gbps, "consumer_wait_s", st.consumer_wait_s,
			     "reader_wait_s", st.reader_wait_s,
			     "read_lat", lat(&st.read_lat), "copy_lat", lat(&st.copy_lat),
			     "files_direct", st.files_direct, "files_buffered", st.files_buffered,
			     "ring_setup", st.ring_setup, "ring_note", st.ring_note,
			     "readers", st.readers, "slots", st.slots, "slot_bytes", (unsigned long long)st.slot_bytes,
			     "pin", pm_pin_mode_name(st.pin),
			     "total_items", (unsigned long long)st.total_items,
			     "total_bytes", (unsigned long long)st.total_bytes,
			     "populated_bytes", (unsigned long long)st.populated_bytes,
			     "coalesced_reads", (unsigned long long)st.coalesced_reads,
			     "coalesced_items", (unsigned long long)st.coalesced_items);
}

static PyObject *stream_resume_batch(PmStream *self, PyObject *unused)
{
	struct pm_stream *s = stream_get(self);
	uint64_t batch;
	int r;

	if (!s)
		return NULL;
	r = pm_stream_resume_batch(s, &batch);
	if (r < 0)
		return pmpy_raise(self->ctx->ctx, r, "pm_stream_resume_batch");
	return PyLong_FromUnsignedLongLong(batch);
}

static PyMethodDef stream_methods[] = {
	{ "next", (PyCFunction)stream_next, METH_NOARGS,
	  "next() -> Batch, or None at the end.  Raises pinmem.Error for a failed batch (the\n"
	  "library's sentence names the item) or when every slot is held." },
	{ "stats", (PyCFunction)stream_stats, METH_NOARGS, "Counters and latencies so far, a dict." },
	{ "resume_batch", (PyCFunction)stream_resume_batch, METH_NOARGS,
	  "resume_batch() -> the lowest batch number neither handed over nor dropped as failed\n"
	  "(pm_stream_resume_batch)." },
	{ "close", (PyCFunction)stream_close, METH_NOARGS,
	"close(): stop reading; the slots are unpinned now, or when the last Batch is gone\n"
	  "(a next() waiting in another thread then raises ValueError)." },
	{ NULL },
};

PyTypeObject PmStream_Type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "pinmem._Stream",
	.tp_basicsize = sizeof(PmStream),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "The library stream under pinmem.Stream.",
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)stream_init,
	.tp_dealloc = (destructor)stream_dealloc,
	.tp_methods = stream_methods,
};

/* --- Batch --- */

/*
 * Release without an explicit stream (release(), 'with batch:', garbage
 * collection): a batch with a device copy is released after the GPU work queued so far on
 * the stream its device view was exported to (DLPack's stream=; none: the
 * legacy default stream), never at once under a running kernel.
 */
static int batch_release_default(PmBatch *self)
{
	struct pm_stream *s = self->stream->s;

	return self->b->dev ? pm_stream_release_on(s, self->b, self->consumer) :
			      pm_stream_release(s, self->b);
}

static void batch_dealloc(PmBatch *self)
{
	PmStream *st = self->stream;

	if (!self->released && st->s && st->pid == getpid())
		batch_release_default(self);
	pmpy_stream_batch_gone(st);
	Py_DECREF(st);
	PyObject_Free(self);
}

static int batch_live(PmBatch *self)
{
	if (self->released) {
		PyErr_SetString(PyExc_ValueError,
				"pinmem: the batch was released; its slot now holds other data");
		return -1;
	}
	return 0;
}

/* Raise for a failed call on a batch: the stream's sentence when it has one. */
static PyObject *batch_error(PmBatch *self, int r, const char *what)
{
	const char *msg = pm_stream_error(self->stream->s);
	PyObject *exc;

	if (!*msg)
		return pmpy_raise(self->stream->ctx->ctx, r, what);
	exc = PyObject_CallFunction(PmError, "is", -r, msg);
	if (exc) {
		PyErr_SetObject(PmError, exc);
		Py_DECREF(exc);
	}
	return NULL;
}

/* The CUDA stream pointer an object names: an int, or anything with .cuda_stream (torch.cuda.Stream). */
int pmpy_stream_ptr(PyObject *obj, void **ptr)
{
	PyObject *v = obj;

	if (!PyLong_Check(obj)) {
		v = PyObject_GetAttrString(obj, "cuda_stream");
		if (!v)
			return -1;
	} else {
		Py_INCREF(v);
	}
	*ptr = PyLong_AsVoidPtr(v);
	Py_DECREF(v);
	return PyErr_Occurred() ? -1 : 0;
}

/* Release after the work queued on cuda_stream (Py_None: as batch_release_default). */
static PyObject *batch_release_on(PmBatch *self, PyObject *cuda_stream)
{
	struct pm_stream *s;
	void *ptr = NULL;
	int r;

	if (self->released)
		Py_RETURN_NONE;
	s = self->stream->s;
	if (!s || pmpy_check_pid(self->stream->pid, "stream"))
		return s ? NULL : PyErr_Format(PyExc_ValueError, "pinmem: the stream is closed");
	if (cuda_stream != Py_None && pmpy_stream_ptr(cuda_stream, &ptr))
		return NULL;
	r = cuda_stream == Py_None ? batch_release_default(self) :
				     pm_stream_release_on(s, self->b, ptr);
	if (r < 0)
		return batch_error(self, r, "pm_stream_release");
	self->released = true;
	Py_RETURN_NONE;
}

static PyObject *batch_release(PmBatch *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "stream", NULL };
	PyObject *cuda_stream = Py_None;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O", kwlist, &cuda_stream))
		return NULL;
	return batch_release_on(self, cuda_stream);
}

int pmpy_batch_wait(PmBatch *self, void *cuda_stream)
{
	int r;

	if (batch_live(self))
		return -1;
	if (!self->stream->s || pmpy_check_pid(self->stream->pid, "stream")) {
		if (!PyErr_Occurred())
			PyErr_SetString(PyExc_ValueError, "pinmem: the stream is closed");
		return -1;
	}
	r = pm_stream_batch_wait(self->stream->s, self->b, cuda_stream);
	if (r < 0) {
		batch_error(self, r, "pm_stream_batch_wait");
		return -1;
	}
	return 0;
}

static PyObject *batch_wait(PmBatch *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "stream", NULL };
	PyObject *cuda_stream = Py_None;
	void *ptr = NULL;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O", kwlist, &cuda_stream) ||
	    (cuda_stream != Py_None && pmpy_stream_ptr(cuda_stream, &ptr)) ||
	    pmpy_batch_wait(self, ptr))
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *batch_exit(PmBatch *self, PyObject *args)
{
	return batch_release_on(self, Py_None);
}

static PyObject *batch_enter(PyObject *self, PyObject *unused)
{
	return Py_NewRef(self);
}

static PyObject *make_view(PmBatch *self, uint64_t off, uint64_t len, bool dev)
{
	PmStream *st = self->stream;
	char *base = dev ? self->b->dev : self->b->host;

	if (batch_live(self))
		return NULL;
	if (!base)
		Py_RETURN_NONE;
	return (PyObject *)pmpy_view((PyObject *)self, self, base + off, (Py_ssize_t)len,
				     dev ? st->dev_type : kDLCPU, dev ? st->dev_id : 0);
}

static PyObject *batch_item(PmBatch *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "i", "device", NULL };
	Py_ssize_t i;
	int dev = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "n|p", kwlist, &i, &dev) || batch_live(self))
		return NULL;
	if (i < 0 || (size_t)i >= self->b->nitems)
		return PyErr_Format(PyExc_IndexError, "pinmem: batch item %zd out of range", i);
	return make_view(self, self->b->items[i].slot_offset, self->b->items[i].length, dev);
}

static PyObject *batch_host(PmBatch *self, void *unused)
{
	return make_view(self, 0, self->b->span, false);
}

static PyObject *batch_dev(PmBatch *self, void *unused)
{
	return make_view(self, 0, self->b->span, true);
}

static PyObject *batch_items(PmBatch *self, void *unused)
{
	PyObject *l;
	uint32_t i;

	if (batch_live(self))
		return NULL;	/* the slot's item array may have been reallocated since */
	l = PyList_New(self->b->nitems);
	for (i = 0; l && i < self->b->nitems; i++) {
		const struct pm_batch_item *it = &self->b->items[i];
		PyObject *t = Py_BuildValue("(KIKKK)", (unsigned long long)it->index, it->path_id,
					    (unsigned long long)it->file_offset,
					    (unsigned long long)it->length,
					    (unsigned long long)it->slot_offset);

		if (!t) {
			Py_CLEAR(l);
			break;
		}
		PyList_SET_ITEM(l, i, t);
	}
	return l;
}

static PyObject *batch_views(PmBatch *self, void *unused)
{
	PyObject *l;
	uint32_t i;

	if (batch_live(self))
		return NULL;
	l = PyList_New(self->b->nitems);
	for (i = 0; l && i < self->b->nitems; i++) {
		PyObject *v = make_view(self, self->b->items[i].slot_offset,
					self->b->items[i].length, self->stream->views_on_dev);

		if (!v) {
			Py_CLEAR(l);
			break;
		}
		PyList_SET_ITEM(l, i, v);
	}
	return l;
}

/* batch["input.npy"]: the views of the items named so, one per sample that has it, in order. */
static PyObject *batch_field(PmBatch *self, PyObject *key)
{
	const struct pm_manifest *m = self->stream->manifest->m;
	PyObject *l, *bytes;
	const char *want;

	if (!PyUnicode_Check(key))
		return PyErr_Format(PyExc_TypeError,
				    "pinmem: a batch is indexed by field name (str), not %.100s; "
				    "use .views or .item(i) for items", Py_TYPE(key)->tp_name);
	if (batch_live(self) || !PyUnicode_FSConverter(key, &bytes))
		return NULL;
	want = PyBytes_AS_STRING(bytes);
	l = PyList_New(0);
	for (uint32_t i = 0; l && i < self->b->nitems; i++) {
		const struct pm_batch_item *it = &self->b->items[i];
		const char *f = pm_manifest_field(m, it->index);
		PyObject *v;

		if (!f || strcmp(f, want))
			continue;
		v = make_view(self, it->slot_offset, it->length, self->stream->views_on_dev);
		if (!v || PyList_Append(l, v))
			Py_CLEAR(l);
		Py_XDECREF(v);
	}
	if (l && !PyList_GET_SIZE(l)) {
		PyErr_Format(PyExc_KeyError, "pinmem: no item of this batch has the field %R", key);
		Py_CLEAR(l);
	}
	Py_DECREF(bytes);
	return l;
}

static PyMappingMethods batch_as_mapping = {
	.mp_subscript = (binaryfunc)batch_field,
};

#define BATCH_U64(field, doc) \
	static PyObject *batch_##field(PmBatch *self, void *unused) \
	{ return PyLong_FromUnsignedLongLong(self->b->field); }
BATCH_U64(seq, )
BATCH_U64(epoch, )
BATCH_U64(slot, )
BATCH_U64(bytes, )
BATCH_U64(span, )
BATCH_U64(nitems, )

static PyObject *batch_released(PmBatch *self, void *unused)
{
	return PyBool_FromLong(self->released);
}

static PyMethodDef batch_methods[] = {
	{ "release", (PyCFunction)(void (*)(void))batch_release, METH_VARARGS | METH_KEYWORDS,
	  "release(stream=None): give the slot back to the ring.  The slot is rewritten only\n"
	  "after the work queued so far on stream (a torch.cuda.Stream or a cudaStream_t as\n"
	  "int) has completed, without blocking the caller; without stream, a batch with a\n"
	  "device copy waits for the stream its device view was exported to (DLPack's\n"
	  "stream=, else the legacy default stream), a host batch is rewritten at once.\n"
	  "Views made before stay mapped but will show later batches' bytes; new views and\n"
	  "exports raise ValueError." },
	{ "wait", (PyCFunction)(void (*)(void))batch_wait, METH_VARARGS | METH_KEYWORDS,
	  "wait(stream=None): make work queued on stream (a torch.cuda.Stream or a cudaStream_t\n"
	  "as int; None: the legacy default stream) after this call wait for the batch's copy\n"
	  "to the device (handoff='queued'); nothing to wait for otherwise.  Exporting a device\n"
	  "view with __dlpack__(stream=...) (torch.from_dlpack does) waits the same way." },
	{ "item", (PyCFunction)(void (*)(void))batch_item, METH_VARARGS | METH_KEYWORDS,
	  "item(i, device=False) -> Buffer: item i's bytes in the slot (or the device copy)." },
	{ "__enter__", batch_enter, METH_NOARGS, NULL },
	{ "__exit__", (PyCFunction)batch_exit, METH_VARARGS, NULL },
	{ NULL },
};

static PyGetSetDef batch_getset[] = {
	{ "seq", (getter)batch_seq, NULL, "Batch number in stream order, from 0.", NULL },
	{ "epoch", (getter)batch_epoch, NULL, "Epoch of the batch.", NULL },
	{ "slot", (getter)batch_slot, NULL, "Ring slot holding it.", NULL },
	{ "bytes", (getter)batch_bytes, NULL, "Item bytes (sum of lengths).", NULL },
	{ "span", (getter)batch_span, NULL, "Bytes of the slot in use.", NULL },
	{ "nitems", (getter)batch_nitems, NULL, "Number of items.", NULL },
	{ "items", (getter)batch_items, NULL,
	  "[(index, path_id, file_offset, length, slot_offset)] for each item.", NULL },
	{ "host", (getter)batch_host, NULL, "The slot's used bytes (pinned host memory), a Buffer.", NULL },
	{ "dev", (getter)batch_dev, NULL, "The device copy, a Buffer, or None without a copy backend.", NULL },
	{ "released", (getter)batch_released, NULL, "True once released.", NULL },
	{ "views", (getter)batch_views, NULL,
	  "Every item as a uint8 Buffer: of the device copy when the stream has a device, else\n"
	  "of the pinned slot.  torch.from_dlpack(v) and numpy.from_dlpack(v) view them without a copy.", NULL },
	{ NULL },
};

PyTypeObject PmBatch_Type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "pinmem.Batch",
	.tp_basicsize = sizeof(PmBatch),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A batch of a Stream: items in a pinned slot (and its device copy).\n"
		  "Release it with release() or by using it in a with statement.",
	.tp_dealloc = (destructor)batch_dealloc,
	.tp_methods = batch_methods,
	.tp_getset = batch_getset,
	.tp_as_mapping = &batch_as_mapping,
};
