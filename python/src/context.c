// SPDX-License-Identifier: MIT
/*
 * pinmem.Context: one pm_ctx, and the pinned buffers it hands out.
 */
#include "pinmem_py.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

int pmpy_choice(PyObject *obj, const char *const *names, const char *what)
{
	const char *s;
	int i;

	if (!PyUnicode_Check(obj)) {
		PyErr_Format(PyExc_TypeError, "pinmem: %s must be a str, not %R", what, obj);
		return -1;
	}
	s = PyUnicode_AsUTF8(obj);
	if (!s)
		return -1;
	for (i = 0; names[i]; i++)
		if (!strcmp(s, names[i]))
			return i;
	/* the choices named: "unknown coalesce 'of' (auto, on, off)" */
	{
		char list[160];
		size_t n = 0;

		list[0] = 0;
		for (i = 0; names[i] && n < sizeof(list); i++)
			n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s", i ? ", " : "",
					      names[i]);
		PyErr_Format(PyExc_ValueError, "pinmem: unknown %s %R (one of: %s)", what, obj,
			     list);
	}
	return -1;
}

static const char *const backend_names[] = { "auto", "host", "cuda", "none", NULL };
static const char *const module_names[] = { "auto", "off", "require", NULL };
static const char *const pin_names[] = { "auto", "module", "mlock", "none", NULL };
static const char *const page_names[] = { "default", "thp", "hugetlb", NULL };

static void ctx_free(PmContext *c)
{
	if (c->ctx && c->pid == getpid())
		pm_close(c->ctx);
	c->ctx = NULL;
}

void pmpy_ctx_use(PmContext *c)
{
	c->users++;
}

void pmpy_ctx_unuse(PmContext *c)
{
	if (--c->users == 0 && c->closing)
		ctx_free(c);
}

static int ctx_init(PmContext *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "module", "backend", "device", "cuda_device",
				  "cuda_library", NULL };
	PyObject *module = NULL, *backend = NULL;
	const char *device = NULL, *cudalib = NULL;
	struct pm_open_opts o;
	char err[512] = "";
	int cuda_device = PM_CUDA_DEVICE_CURRENT, mod = 0, be = 0, r;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|$UUziz", kwlist, &module,
					 &backend, &device, &cuda_device, &cudalib))
		return -1;
	if (self->ctx) {
		PyErr_SetString(PyExc_RuntimeError, "pinmem: Context is already open");
		return -1;
	}
	if ((module && (mod = pmpy_choice(module, module_names, "module mode")) < 0) ||
	    (backend && (be = pmpy_choice(backend, backend_names, "backend")) < 0))
		return -1;
	memset(&o, 0, sizeof(o));
	o.flags = mod == 1 ? PM_OPEN_NO_MODULE : mod == 2 ? PM_OPEN_REQUIRE_MODULE : 0;
	o.backend = (enum pm_backend_kind)be;
	o.device = device;
	o.cuda_library = cudalib;
	o.cuda_device = cuda_device;
	o.errbuf = err;
	o.errbuf_len = sizeof(err);
	Py_BEGIN_ALLOW_THREADS
	r = pm_open(&self->ctx, &o);
	Py_END_ALLOW_THREADS
	if (r < 0) {
		self->ctx = NULL;
		pmpy_raise_sentence(r, err, "pm_open");
		return -1;
	}
	self->pid = getpid();
	return 0;
}

static void ctx_dealloc(PmContext *self)
{
	ctx_free(self);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The context, open and owned by this process, or NULL with an exception. */
static struct pm_ctx *ctx_get(PmContext *self)
{
	if (!self->ctx || self->closing) {
		PyErr_SetString(PyExc_ValueError, "pinmem: the context is closed");
		return NULL;
	}
	if (pmpy_check_pid(self->pid, "context"))
		return NULL;
	return self->ctx;
}

static PyObject *ctx_close(PmContext *self, PyObject *unused)
{
	if (self->ctx && self->pid != getpid()) {
		/* A forked child forgets the parent's context without touching it. */
		self->ctx = NULL;
		Py_RETURN_NONE;
	}
	self->closing = true;
	if (!self->users)
		ctx_free(self);
	Py_RETURN_NONE;
}

static PyObject *ctx_info(PmContext *self, PyObject *unused)
{
	struct pm_ctx *ctx = ctx_get(self);
	struct pm_ctx_info i;
	int r;

	if (!ctx)
		return NULL;
	r = pm_ctx_info(ctx, &i);
	if (r < 0)
		return pmpy_raise(ctx, r, "pm_ctx_info");
	return Py_BuildValue("{s:O,s:(II),s:s,s:s,s:s,s:O,s:O,s:O,s:K,s:K,s:I,s:i,s:i}",
			     "module", i.module ? Py_True : Py_False,
			     "module_abi", i.module_abi_major, i.module_abi_minor,
			     "module_note", i.module_note, "backend", i.backend,
			     "backend_note", i.backend_note,
			     "uring", i.uring ? Py_True : Py_False,
			     "thp", i.thp ? Py_True : Py_False,
			     "hugetlb", i.hugetlb ? Py_True : Py_False,
			     "hugetlb_page_size", (unsigned long long)i.hugetlb_page_size,
			     "hugetlb_free_pages", (unsigned long long)i.hugetlb_free_pages,
			     "page_size", i.page_size, "cuda_device", (int)i.cuda_device,
			     "gpu_numa_node", (int)i.gpu_numa_node);
}

static PyObject *ctx_last_error(PmContext *self, void *unused)
{
	return PyUnicode_FromString(self->ctx ? pm_ctx_last_error(self->ctx) : "");
}

static PyObject *ctx_closed(PmContext *self, void *unused)
{
	return PyBool_FromLong(!self->ctx || self->closing);
}

static int buf_opts(PyObject *pin, PyObject *pages, int strict, int reg,
		    struct pm_buf_opts *o)
{
	int p = 0, k = 0;

	memset(o, 0, sizeof(*o));
	if ((pin && (p = pmpy_choice(pin, pin_names, "pin mode")) < 0) ||
	    (pages && (k = pmpy_choice(pages, page_names, "page kind")) < 0))
		return -1;
	o->pin = (enum pm_pin_mode)p;
	o->pages = (enum pm_page_kind)k;
	o->flags = (strict ? PM_BUF_STRICT : 0) | (reg ? 0 : PM_BUF_NO_BACKEND);
	return 0;
}

/* Bytes of shape (an int or a sequence of ints) in elements of dt; *tuple is the shape as a tuple. */
static int shape_bytes(PyObject *shape, const struct pmpy_dtype *dt, Py_ssize_t *nbytes,
		       PyObject **tuple)
{
	Py_ssize_t dims[PMPY_MAXDIM], n;
	int ndim;

	*tuple = PyLong_Check(shape) ? Py_BuildValue("(O)", shape) : PySequence_Tuple(shape);
	if (!*tuple)
		return -1;
	if (pmpy_shape(*tuple, dims, &ndim, &n)) {
		Py_CLEAR(*tuple);
		return -1;
	}
	*nbytes = n * (dt->bits / 8);
	return 0;
}

/*
 * A call on the context that releases the GIL counts as a user while it
 * runs, so close() from another thread defers the pm_close to its end.  The
 * call's result is dropped with ValueError when close() came meanwhile.
 */
static void call_begin(PmContext *self)
{
	pmpy_ctx_use(self);
}

static int call_end(PmContext *self, struct pm_buf *buf)
{
	int closed = self->closing;

	if (closed) {
		if (buf)
			pm_buf_free(self->ctx, buf);
		PyErr_SetString(PyExc_ValueError, "pinmem: the context was closed during the call");
	}
	pmpy_ctx_unuse(self);
	return closed ? -1 : 0;
}

static PmBuffer *new_owner(PmContext *self, struct pm_buf *buf, void *ptr, Py_ssize_t nbytes)
{
	PmBuffer *b = PyObject_New(PmBuffer, &PmBuffer_Type);

	if (!b)
		return NULL;
	memset((char *)b + sizeof(PyObject), 0, sizeof(*b) - sizeof(PyObject));
	b->ctx = (PmContext *)Py_NewRef(self);
	pmpy_ctx_use(self);
	b->buf = buf;
	b->ptr = ptr;
	b->nbytes = nbytes;
	b->dev_type = kDLCPU;
	b->ndim = 1;
	b->shape[0] = nbytes;
	b->strides[0] = 1;
	b->dtype = &pmpy_uint8;
	return b;
}

static PyObject *ctx_empty(PmContext *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "shape", "dtype", "pin", "pages", "strict",
				  "register", NULL };
	PyObject *shape, *dtype = NULL, *pin = NULL, *pages = NULL, *tuple = NULL;
	const struct pmpy_dtype *dt = &pmpy_uint8;
	struct pm_ctx *ctx = ctx_get(self);
	int strict = 0, reg = 1, r;
	struct pm_buf_opts o;
	struct pm_buf *buf;
	Py_ssize_t nbytes;
	PmBuffer *b;

	if (!ctx || !PyArg_ParseTupleAndKeywords(args, kw, "O|O$UUpp", kwlist, &shape,
						 &dtype, &pin, &pages, &strict, &reg))
		return NULL;
	if ((dtype && !(dt = pmpy_dtype_lookup(dtype))) ||
	    buf_opts(pin, pages, strict, reg, &o) ||
	    shape_bytes(shape, dt, &nbytes, &tuple))
		return NULL;
	call_begin(self);
	Py_BEGIN_ALLOW_THREADS
	r = pm_buf_alloc(ctx, nbytes ? (size_t)nbytes : 1, &o, &buf);
	Py_END_ALLOW_THREADS
	if (r < 0)
		pmpy_raise(ctx, r, "pm_buf_alloc");
	if (call_end(self, r < 0 ? NULL : buf) || r < 0) {
		Py_DECREF(tuple);
		return NULL;
	}
	b = new_owner(self, buf, pm_buf_ptr(buf), nbytes);
	if (!b) {
		pm_buf_free(ctx, buf);
		Py_DECREF(tuple);
		return NULL;
	}
	if (pmpy_set_layout(b, tuple, dt, true)) {
		Py_DECREF(tuple);
		Py_DECREF(b);
		return NULL;
	}
	Py_DECREF(tuple);
	return (PyObject *)b;
}

static PyObject *ctx_pin(PmContext *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "obj", "pin", "strict", "register", NULL };
	PyObject *obj, *pin = NULL;
	struct pm_ctx *ctx = ctx_get(self);
	int strict = 0, reg = 1, r;
	struct pm_buf_opts o;
	struct pm_buf *buf;
	Py_buffer src;
	PmBuffer *b;

	if (!ctx || !PyArg_ParseTupleAndKeywords(args, kw, "O|$Upp", kwlist, &obj,
						 &pin, &strict, &reg))
		return NULL;
	if (buf_opts(pin, NULL, strict, reg, &o) ||
	    PyObject_GetBuffer(obj, &src, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS))
		return NULL;
	call_begin(self);
	Py_BEGIN_ALLOW_THREADS
	r = pm_buf_pin_inplace(ctx, src.buf, (size_t)src.len, &o, &buf);
	Py_END_ALLOW_THREADS
	if (r < 0)
		pmpy_raise(ctx, r, "pm_buf_pin_inplace");
	if (call_end(self, r < 0 ? NULL : buf) || r < 0) {
		PyBuffer_Release(&src);
		return NULL;
	}
	b = new_owner(self, buf, src.buf, src.len);
	if (!b) {
		pm_buf_free(ctx, buf);
		PyBuffer_Release(&src);
		return NULL;
	}
	b->src = src;
	b->has_src = true;
	return (PyObject *)b;
}

static PyObject *ctx_enter(PyObject *self, PyObject *unused)
{
	return Py_NewRef(self);
}

static PyObject *ctx_exit(PmContext *self, PyObject *args)
{
	return ctx_close(self, NULL);
}

static PyMethodDef ctx_methods[] = {
	{ "empty", (PyCFunction)(void (*)(void))ctx_empty, METH_VARARGS | METH_KEYWORDS,
	  "empty(shape, dtype='uint8', *, pin='auto', pages='default', strict=False, register=True) -> Buffer\n\n"
	  "Pinned, uninitialised memory of shape (an int or a tuple) and dtype, registered with the\n"
	  "copy backend.  pin: 'auto' (module, else mlock), 'module', 'mlock' or 'none'; pages:\n"
	  "'default', 'thp' or 'hugetlb'; strict: fail rather than get less.  Freed (unpinned)\n"
	  "when the Buffer and every view of it (memoryview, numpy, torch) are gone.  Not\n"
	  "mapped in forked children (MADV_DONTFORK): a view used in a fork-started worker\n"
	  "faults." },
	{ "pin", (PyCFunction)(void (*)(void))ctx_pin, METH_VARARGS | METH_KEYWORDS,
	  "pin(obj, *, pin='auto', strict=False, register=True) -> Buffer\n\n"
	  "Pin the page-aligned writable memory of obj (an mmap, say) in place; obj stays\n"
	  "referenced and is unpinned when the Buffer and its views are gone." },
	{ "info", (PyCFunction)ctx_info, METH_NOARGS,
	  "info() -> dict: module (bool), module_abi, module_note, backend, backend_note,\n"
	  "uring, thp, hugetlb, hugetlb_free_pages, page_size, cuda_device (the GPU, -1 without\n"
	  "one), gpu_numa_node (-1 unknown)." },
	{ "close", (PyCFunction)ctx_close, METH_NOARGS,
	  "close(): no new buffers or streams; the library context is closed now, or when\n"
	  "the last buffer or stream made from it is gone." },
	{ "__enter__", ctx_enter, METH_NOARGS, NULL },
	{ "__exit__", (PyCFunction)ctx_exit, METH_VARARGS, NULL },
	{ NULL },
};

static PyGetSetDef ctx_getset[] = {
	{ "last_error", (getter)ctx_last_error, NULL,
	  "The library's sentence for the last failing call, '' if none.", NULL },
	{ "closed", (getter)ctx_closed, NULL, "True once close() was called.", NULL },
	{ NULL },
};

PyTypeObject PmContext_Type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "pinmem.Context",
	.tp_basicsize = sizeof(PmContext),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Context(*, module='auto', backend='auto', device=None, cuda_device=-1, cuda_library=None)\n\n"
		  "A libpinmem context.  module: 'auto' (use /dev/pinmem when usable), 'off' or\n"
		  "'require'; backend: 'auto', 'cuda', 'host' or 'none'; cuda_device: the GPU, -1\n"
		  "(default) for the calling thread's current one (torch.cuda.set_device's).\n"
		  "Use pinmem.open().",
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)ctx_init,
	.tp_dealloc = (destructor)ctx_dealloc,
	.tp_methods = ctx_methods,
	.tp_getset = ctx_getset,
};
