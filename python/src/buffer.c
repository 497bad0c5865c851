// SPDX-License-Identifier: MIT
/*
 * pinmem.Buffer: pinned memory (or a device copy) seen by Python without a
 * copy, through the buffer protocol (memoryview, numpy.asarray, bytes) and
 * DLPack (torch.from_dlpack, numpy.from_dlpack, CuPy, JAX).
 *
 * Lifetime, as CPython's mmap module does it: every export holds the
 * Buffer (a memoryview through the buffer protocol, a DLPack consumer
 * through the capsule's manager_ctx), every view holds its parent, and the
 * owning Buffer unpins and frees its memory only in its deallocator, so no
 * Python-visible pointer outlives the memory.
 *
 * A view of a stream batch stops giving out new exports once the batch is
 * released; exports made before keep the memory mapped, but the ring
 * rewrites it with later batches.
 */
#include "pinmem_py.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static PmBuffer *buffer_root(PmBuffer *b)
{
	while (!b->buf && b->base && PyObject_TypeCheck(b->base, &PmBuffer_Type))
		b = (PmBuffer *)b->base;
	return b;
}

static int check_live(PmBuffer *self)
{
	if (self->batch && self->batch->released) {
		PyErr_SetString(PyExc_ValueError,
				"pinmem: this view's batch was released; its slot now holds other data");
		return -1;
	}
	return 0;
}

/*
 * Library-allocated memory and stream slots are MADV_DONTFORK: in a forked
 * child (a DataLoader worker) they are not mapped, and touching them would
 * crash.  Memory the caller pinned in place (ctx.pin() of a shared memfd) is.
 */
static int check_process(PmBuffer *self)
{
	PmBuffer *r = buffer_root(self);

	if (r->has_src)
		return 0;
	if (r->ctx)
		return pmpy_check_pid(r->ctx->pid, "buffer");
	if (self->batch)
		return pmpy_check_pid(self->batch->stream->pid, "batch's buffer");
	return 0;
}

int pmpy_shape(PyObject *shape, Py_ssize_t *dims, int *ndim, Py_ssize_t *count)
{
	Py_ssize_t n = 1, d, i;

	if (!PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) > PMPY_MAXDIM) {
		PyErr_Format(PyExc_ValueError, "pinmem: shape must be a tuple of at most %d ints",
			     PMPY_MAXDIM);
		return -1;
	}
	*ndim = (int)PyTuple_GET_SIZE(shape);
	for (i = 0; i < *ndim; i++) {
		d = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i));
		if (d == -1 && PyErr_Occurred())
			return -1;
		/* Bounded so that count times any element size fits. */
		if (d < 0 || (d && n > PY_SSIZE_T_MAX / 8 / d)) {
			PyErr_Format(PyExc_ValueError, "pinmem: bad shape %R", shape);
			return -1;
		}
		dims[i] = d;
		n *= d;
	}
	*count = n;
	return 0;
}

int pmpy_set_layout(PmBuffer *v, PyObject *shape, const struct pmpy_dtype *dt,
		    bool exact)
{
	Py_ssize_t isz = dt->bits / 8, n, d;
	int i;

	v->dtype = dt;
	if (!shape || shape == Py_None) {
		if (v->nbytes % isz) {
			PyErr_Format(PyExc_ValueError, "pinmem: %zd bytes are not a whole number of %s",
				     v->nbytes, dt->name);
			return -1;
		}
		v->ndim = 1;
		v->shape[0] = v->nbytes / isz;
		v->strides[0] = isz;
		return 0;
	}
	if (pmpy_shape(shape, v->shape, &v->ndim, &n))
		return -1;
	for (i = v->ndim - 1, d = isz; i >= 0; i--) {
		v->strides[i] = d;
		d *= v->shape[i] ? v->shape[i] : 1;
	}
	if (exact ? n * isz != v->nbytes : n * isz > v->nbytes) {
		PyErr_Format(PyExc_ValueError, "pinmem: shape %R of %s needs %zd bytes, the buffer has %zd",
			     shape, dt->name, n * isz, v->nbytes);
		return -1;
	}
	v->nbytes = n * isz;
	return 0;
}

PmBuffer *pmpy_view(PyObject *base, struct PmBatch *batch, char *ptr,
		    Py_ssize_t nbytes, int dev_type, int dev_id)
{
	PmBuffer *v = PyObject_New(PmBuffer, &PmBuffer_Type);

	if (!v)
		return NULL;
	memset((char *)v + sizeof(PyObject), 0, sizeof(*v) - sizeof(PyObject));
	v->base = Py_NewRef(base);
	v->batch = batch;
	v->ptr = ptr;
	v->nbytes = nbytes;
	v->dev_type = dev_type;
	v->dev_id = dev_id;
	v->ndim = 1;
	v->shape[0] = nbytes;
	v->strides[0] = 1;
	v->dtype = &pmpy_uint8;
	return v;
}

static void buffer_dealloc(PmBuffer *self)
{
	if (self->weakrefs)
		PyObject_ClearWeakRefs((PyObject *)self);
	if (self->buf && self->ctx->ctx && self->ctx->pid == getpid()) {
		/* unpinning gigabytes, after the copies queued from it: other threads go on */
		Py_BEGIN_ALLOW_THREADS
		pm_buf_free(self->ctx->ctx, self->buf);
		Py_END_ALLOW_THREADS
	}
	if (self->has_src)
		PyBuffer_Release(&self->src);
	if (self->ctx) {
		pmpy_ctx_unuse(self->ctx);
		Py_DECREF(self->ctx);
	}
	Py_XDECREF(self->base);
	PyObject_Free(self);
}

static int buffer_getbuffer(PmBuffer *self, Py_buffer *view, int flags)
{
	if (check_live(self) || check_process(self))
		goto fail;
	if (self->dev_type != kDLCPU) {
		PyErr_SetString(PyExc_BufferError,
				"pinmem: device memory has no buffer protocol; use DLPack");
		goto fail;
	}
	if ((flags & PyBUF_FORMAT) && !*self->dtype->format) {
		PyErr_Format(PyExc_BufferError, "pinmem: %s has no buffer format; use DLPack",
			     self->dtype->name);
		goto fail;
	}
	view->obj = Py_NewRef(self);
	view->buf = self->ptr;
	view->len = self->nbytes;
	view->readonly = 0;
	view->itemsize = self->dtype->bits / 8;
	view->format = (flags & PyBUF_FORMAT) ? (char *)self->dtype->format : NULL;
	view->ndim = self->ndim;
	view->shape = (flags & PyBUF_ND) ? self->shape : NULL;
	view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? self->strides : NULL;
	view->suboffsets = NULL;
	view->internal = NULL;
	if (!(flags & PyBUF_ND)) {
		/* Only a flat byte view was asked for. */
		view->itemsize = 1;
		view->ndim = 1;
	}
	self->exports++;
	return 0;
fail:
	view->obj = NULL;
	return -1;
}

static void buffer_releasebuffer(PmBuffer *self, Py_buffer *view)
{
	self->exports--;
}

static PyBufferProcs buffer_as_buffer = {
	(getbufferproc)buffer_getbuffer,
	(releasebufferproc)buffer_releasebuffer,
};

static void dlpack_deleter(DLManagedTensor *t)
{
	PyGILState_STATE g = PyGILState_Ensure();

	Py_DECREF((PyObject *)t->manager_ctx);
	PyGILState_Release(g);
	free(t);
}

/* A capsule nobody consumed still owns its tensor. */
static void dlpack_capsule_destructor(PyObject *cap)
{
	DLManagedTensor *t;

	if (!PyCapsule_IsValid(cap, "dltensor"))
		return;
	t = PyCapsule_GetPointer(cap, "dltensor");
	if (t && t->deleter)
		t->deleter(t);
}

/*
 * DLPack's stream= for a CUDA consumer: None the legacy default stream, 1
 * cudaStreamLegacy, 2 cudaStreamPerThread, more a stream handle (or an
 * object with .cuda_stream), -1 "do not synchronize"; 0 is ambiguous and
 * refused.  0 with *ptr set, 1 for -1, -1 with an exception.
 */
static int dlpack_stream(PyObject *stream, void **ptr)
{
	long long v;

	*ptr = NULL;
	if (stream == Py_None)
		return 0;
	if (!PyLong_Check(stream))
		return pmpy_stream_ptr(stream, ptr);
	v = PyLong_AsLongLong(stream);
	if (v == -1 && PyErr_Occurred())
		return -1;
	if (v == -1)
		return 1;
	if (v <= 0) {
		PyErr_Format(PyExc_ValueError,
			     "pinmem: DLPack stream=%lld is not a CUDA stream (None, 1 legacy, "
			     "2 per-thread, a handle, or -1 for no synchronization)", v);
		return -1;
	}
	return pmpy_stream_ptr(stream, ptr);
}

static PyObject *buffer_dlpack(PmBuffer *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "stream", NULL };
	PyObject *stream = Py_None, *cap;
	DLManagedTensor *t;
	int64_t *dims;
	int i;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|$O", kwlist, &stream) ||
	    check_live(self) || check_process(self))
		return NULL;
	/*
	 * A device view of a batch delivered as soon as its copy was queued:
	 * the consumer's stream (None: the legacy default stream) waits for the
	 * copy, as DLPack asks of a producer.
	 */
	if (self->batch && self->dev_type == kDLCUDA) {
		void *ptr;
		int how = dlpack_stream(stream, &ptr);

		if (how < 0 || (!how && pmpy_batch_wait(self->batch, ptr)))
			return NULL;
		/*
		 * Where the consumer reads it: release() and GC release after that
		 * work.  The per-thread stream is the exporting thread's, and a GC
		 * may run on another: the legacy stream waits for it too.
		 */
		self->batch->consumer = ptr == (void *)2 ? (void *)1 : ptr;
	}
	/* Room for the tensor, then shape and strides (in elements). */
	t = calloc(1, sizeof(*t) + 2 * PMPY_MAXDIM * sizeof(int64_t));
	if (!t)
		return PyErr_NoMemory();
	dims = (int64_t *)(t + 1);
	t->dl_tensor.data = self->ptr;
	t->dl_tensor.device.device_type = self->dev_type;
	t->dl_tensor.device.device_id = self->dev_id;
	t->dl_tensor.ndim = self->ndim;
	t->dl_tensor.dtype.code = self->dtype->code;
	t->dl_tensor.dtype.bits = self->dtype->bits;
	t->dl_tensor.dtype.lanes = 1;
	t->dl_tensor.shape = dims;
	t->dl_tensor.strides = dims + PMPY_MAXDIM;
	for (i = 0; i < self->ndim; i++) {
		dims[i] = self->shape[i];
		dims[PMPY_MAXDIM + i] = self->strides[i] / (self->dtype->bits / 8);
	}
	t->manager_ctx = Py_NewRef(self);
	t->deleter = dlpack_deleter;
	cap = PyCapsule_New(t, "dltensor", dlpack_capsule_destructor);
	if (!cap) {
		Py_DECREF(self);
		free(t);
	}
	return cap;
}

static PyObject *buffer_dlpack_device(PmBuffer *self, PyObject *unused)
{
	return Py_BuildValue("(ii)", self->dev_type, self->dev_id);
}

static PyObject *buffer_view(PmBuffer *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "offset", "shape", "dtype", NULL };
	PyObject *shape = Py_None, *dtype = NULL, *tuple = NULL;
	const struct pmpy_dtype *dt = &pmpy_uint8;
	Py_ssize_t off = 0;
	PmBuffer *v;
	int r;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|nOO", kwlist, &off, &shape, &dtype) ||
	    check_live(self) || check_process(self))
		return NULL;
	if (dtype && !(dt = pmpy_dtype_lookup(dtype)))
		return NULL;
	if (off < 0 || off > self->nbytes) {
		PyErr_Format(PyExc_ValueError, "pinmem: offset %zd is outside the buffer's %zd bytes",
			     off, self->nbytes);
		return NULL;
	}
	if (off % (dt->bits / 8)) {
		PyErr_Format(PyExc_ValueError, "pinmem: offset %zd is not aligned for %s",
			     off, dt->name);
		return NULL;
	}
	if (shape != Py_None) {
		tuple = PyLong_Check(shape) ? Py_BuildValue("(O)", shape) : PySequence_Tuple(shape);
		if (!tuple)
			return NULL;
	}
	v = pmpy_view((PyObject *)self, self->batch, self->ptr + off, self->nbytes - off,
		      self->dev_type, self->dev_id);
	if (!v) {
		Py_XDECREF(tuple);
		return NULL;
	}
	r = pmpy_set_layout(v, tuple, dt, false);
	Py_XDECREF(tuple);
	if (r) {
		Py_DECREF(v);
		return NULL;
	}
	return (PyObject *)v;
}

static PyObject *get_ptr(PmBuffer *self, void *unused)
{
	return PyLong_FromVoidPtr(self->ptr);
}

static PyObject *get_nbytes(PmBuffer *self, void *unused)
{
	return PyLong_FromSsize_t(self->nbytes);
}

static PyObject *get_shape(PmBuffer *self, void *unused)
{
	PyObject *t = PyTuple_New(self->ndim);
	int i;

	for (i = 0; t && i < self->ndim; i++)
		PyTuple_SET_ITEM(t, i, PyLong_FromSsize_t(self->shape[i]));
	return t;
}

static PyObject *get_dtype(PmBuffer *self, void *unused)
{
	return PyUnicode_FromString(self->dtype->name);
}

static PyObject *get_pin_mode(PmBuffer *self, void *unused)
{
	PmBuffer *r = buffer_root(self);

	if (!r->buf)
		return PyUnicode_FromString(self->dev_type == kDLCPU ? "stream" : "device");
	return PyUnicode_FromString(pm_pin_mode_name(pm_buf_pin_mode(r->buf)));
}

static PyObject *get_note(PmBuffer *self, void *unused)
{
	PmBuffer *r = buffer_root(self);

	return PyUnicode_FromString(r->buf ? pm_buf_note(r->buf) : "");
}

static PyObject *get_registered(PmBuffer *self, void *unused)
{
	PmBuffer *r = buffer_root(self);

	return PyBool_FromLong(r->buf && pm_buf_backend_registered(r->buf));
}

static PyObject *get_released(PmBuffer *self, void *unused)
{
	return PyBool_FromLong(self->batch && self->batch->released);
}

static PyObject *get_exports(PmBuffer *self, void *unused)
{
	return PyLong_FromSsize_t(self->exports);
}

static PyMethodDef buffer_methods[] = {
	{ "__dlpack__", (PyCFunction)(void (*)(void))buffer_dlpack, METH_VARARGS | METH_KEYWORDS,
	  "__dlpack__(*, stream=None): a DLPack capsule viewing this memory without a copy.\n"
	  "The consumer holds this Buffer until it deletes the tensor.  For a device view of a\n"
	  "stream batch, work on stream (a cudaStream_t as int) is ordered after the batch's copy." },
	{ "__dlpack_device__", (PyCFunction)buffer_dlpack_device, METH_NOARGS,
	  "(device_type, device_id): (1, 0) for host memory, (2, N) for CUDA device N." },
	{ "view", (PyCFunction)(void (*)(void))buffer_view, METH_VARARGS | METH_KEYWORDS,
	  "view(offset=0, shape=None, dtype='uint8') -> Buffer: the bytes from offset as a\n"
	  "C-contiguous array of shape and dtype (None: all remaining bytes, 1-D).  The view\n"
	  "keeps this Buffer alive." },
	{ NULL },
};

static PyGetSetDef buffer_getset[] = {
	{ "ptr", (getter)get_ptr, NULL, "Address of the first byte.", NULL },
	{ "nbytes", (getter)get_nbytes, NULL, "Bytes covered by shape and dtype.", NULL },
	{ "shape", (getter)get_shape, NULL, "Shape, a tuple.", NULL },
	{ "dtype", (getter)get_dtype, NULL, "Element type name ('uint8', 'float32', ...).", NULL },
	{ "pin_mode", (getter)get_pin_mode, NULL,
	  "'module', 'mlock' or 'none' as obtained; 'stream' for a stream batch's slot, 'device' for its device copy.", NULL },
	{ "note", (getter)get_note, NULL, "Why the buffer got less than it asked for, '' if it did not.", NULL },
	{ "registered", (getter)get_registered, NULL, "True when registered with the copy backend (cudaHostRegister).", NULL },
	{ "released", (getter)get_released, NULL, "True once the batch this view belongs to was released.", NULL },
	{ "exports", (getter)get_exports, NULL, "Live buffer-protocol exports (memoryviews, numpy arrays).", NULL },
	{ NULL },
};

PyTypeObject PmBuffer_Type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "pinmem.Buffer",
	.tp_basicsize = sizeof(PmBuffer),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Pinned host memory (or a stream batch's device copy) with a shape and dtype.\n\n"
		  "Host memory exports the buffer protocol (memoryview(b), numpy.asarray(b)) and\n"
		  "DLPack (torch.from_dlpack(b), numpy.from_dlpack(b)); device memory DLPack only.\n"
		  "Made by Context.empty(), Context.pin(), Buffer.view() and stream batches.",
	.tp_dealloc = (destructor)buffer_dealloc,
	.tp_as_buffer = &buffer_as_buffer,
	.tp_methods = buffer_methods,
	.tp_getset = buffer_getset,
	.tp_weaklistoffset = offsetof(PmBuffer, weakrefs),
};
