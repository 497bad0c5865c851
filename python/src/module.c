// SPDX-License-Identifier: MIT
/*
 * The module pinmem._pinmem: its types, its exceptions and the one place
 * that turns a library error into a Python exception.
 */
#include "pinmem_py.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

PyObject *PmError, *PmBudgetError;

/* Which budget a refusal sentence names, or NULL when none refused. */
static const char *refused_budget(int err, const char *sentence)
{
	if (strstr(sentence, "no budget refused"))
		return NULL;
	if (strstr(sentence, "global budget"))
		return "global";
	if (strstr(sentence, "per-user budget"))
		return "user";
	if (strstr(sentence, "cgroup"))
		return "cgroup";
	if (strstr(sentence, "RLIMIT_MEMLOCK"))
		return "rlimit";
	if (err == -ENOSPC)
		return "global";
	if (err == -EDQUOT)
		return "user";
	return NULL;
}

PyObject *pmpy_raise(struct pm_ctx *ctx, int err, const char *what)
{
	return pmpy_raise_sentence(err, ctx ? pm_ctx_last_error(ctx) : "", what);
}

PyObject *pmpy_raise_sentence(int err, const char *sentence, const char *what)
{
	const char *budget;
	PyObject *type, *exc, *b;
	char msg[1024];

	if (!sentence || !*sentence) {
		snprintf(msg, sizeof(msg), "%s: %s", what, strerror(-err));
		sentence = msg;
	}
	budget = refused_budget(err, sentence);
	type = budget ? PmBudgetError : PmError;
	exc = PyObject_CallFunction(type, "is", -err, sentence);
	if (!exc)
		return NULL;
	b = budget ? PyUnicode_FromString(budget) : Py_NewRef(Py_None);
	if (!b || PyObject_SetAttrString(exc, "budget", b)) {
		Py_XDECREF(b);
		Py_DECREF(exc);
		return NULL;
	}
	Py_DECREF(b);
	PyErr_SetObject(type, exc);
	Py_DECREF(exc);
	return NULL;
}

int pmpy_check_pid(pid_t pid, const char *what)
{
	if (pid == getpid())
		return 0;
	PyErr_Format(PyExc_RuntimeError,
		     "pinmem: this %s belongs to process %d and cannot be used in a forked child (%d); open a new context there",
		     what, (int)pid, (int)getpid());
	return -1;
}

static PyObject *pin_mode_name(PyObject *self, PyObject *arg)
{
	long m = PyLong_AsLong(arg);

	if (m == -1 && PyErr_Occurred())
		return NULL;
	return PyUnicode_FromString(pm_pin_mode_name((enum pm_pin_mode)m));
}

static PyObject *crc32c(PyObject *self, PyObject *args)
{
	unsigned int crc = 0;
	Py_buffer view;
	uint32_t r;

	if (!PyArg_ParseTuple(args, "y*|I", &view, &crc))
		return NULL;
	r = pm_crc32c(crc, view.buf, (size_t)view.len);
	PyBuffer_Release(&view);
	return PyLong_FromUnsignedLong(r);
}

static PyMethodDef methods[] = {
	{ "module_stats", (PyCFunction)(void (*)(void))pmpy_module_stats, METH_VARARGS | METH_KEYWORDS,
	  "module_stats(device='/dev/pinmem') -> dict: the module's STATS ioctl: uid, and for\n"
	  "'global' and 'user' pinned_bytes, limit_bytes, peak_bytes, regions, pins, unpins and\n"
	  "refusals by budget; 'unlimited' is the limit value meaning none.  From module ABI 1.5\n"
	  "also 'refused' {reason: count} in both (global, user, rlimit, fault, regions, cgroup,\n"
	  "refs; the user's kept after its processes exit) and 'users_evicted' (users, idle_users,\n"
	  "max_idle_users, refused: the users dropped to bound the table).  OSError without the module." },
	{ "pin_mode_name", pin_mode_name, METH_O, "Name of a pin mode number." },
	{ "keep_heap", pmpy_keep_heap, METH_O,
	  "keep_heap(slot_bytes) -> bool: in a loader worker, malloc serves allocations under\n"
	  "32 MiB from the heap (where glibc's adaptive threshold ends) and keeps up to two slots\n"
	  "of it free (at least 64 MiB), instead of returning a batch's samples to the kernel\n"
	  "after every batch.  False, changing nothing, where malloc is not glibc's (2.33 or\n"
	  "later) or MALLOC_TRIM_THRESHOLD_, MALLOC_MMAP_THRESHOLD_ (or their GLIBC_TUNABLES)\n"
	  "are set." },
	{ "crc32c", crc32c, METH_VARARGS,
	  "crc32c(data, crc=0) -> int: crc32c (Castagnoli) as manifests give it." },
	{ NULL },
};

static struct PyModuleDef moddef = {
	PyModuleDef_HEAD_INIT, "pinmem._pinmem",
	"C extension over libpinmem; use the pinmem package.", -1, methods,
};

static int add_type(PyObject *m, PyTypeObject *t)
{
	if (PyType_Ready(t))
		return -1;
	return PyModule_AddObjectRef(m, strrchr(t->tp_name, '.') + 1, (PyObject *)t);
}

PyMODINIT_FUNC PyInit__pinmem(void)
{
	PyObject *m = PyModule_Create(&moddef);

	if (!m)
		return NULL;
	PmError = PyErr_NewExceptionWithDoc("pinmem.Error",
		"A libpinmem call failed; errno is the library's, strerror its sentence.",
		PyExc_OSError, NULL);
	PmBudgetError = PyErr_NewExceptionWithDoc("pinmem.BudgetError",
		"A pin was refused by a budget; .budget names it (\"global\", \"user\", \"cgroup\", \"rlimit\") "
		"and strerror is the library's sentence: how much is in use and what to do.",
		PmError, NULL);
	if (!PmError || !PmBudgetError ||
	    PyModule_AddObjectRef(m, "Error", PmError) ||
	    PyModule_AddObjectRef(m, "BudgetError", PmBudgetError) ||
	    add_type(m, &PmContext_Type) || add_type(m, &PmBuffer_Type) ||
	    add_type(m, &PmManifest_Type) || add_type(m, &PmStream_Type) ||
	    add_type(m, &PmBatch_Type) ||
	    PyModule_AddIntConstant(m, "PIN_AUTO", PM_PIN_AUTO) ||
	    PyModule_AddIntConstant(m, "PIN_MODULE", PM_PIN_MODULE) ||
	    PyModule_AddIntConstant(m, "PIN_MLOCK", PM_PIN_MLOCK) ||
	    PyModule_AddIntConstant(m, "PIN_NONE", PM_PIN_NONE)) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
