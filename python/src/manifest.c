// SPDX-License-Identifier: MIT
/*
 * pinmem.Manifest: the items a stream reads (path, offset, length, crc32c).
 */
#include "pinmem_py.h"

#include <errno.h>
#include <string.h>

static PyObject *manifest_error(int r, const char *err)
{
	return PyErr_Format(r == -ENOENT ? PyExc_FileNotFoundError :
			    r == -EINVAL ? PyExc_ValueError : PmError,
			    "%s", *err ? err : strerror(-r));
}

/* Items are appended by reallocating arrays a stream's reader thread reads. */
static int manifest_frozen(PmManifest *self)
{
	if (self->mutating) {
		PyErr_SetString(PyExc_RuntimeError,
				"pinmem: the manifest is being changed by another thread");
		return -1;
	}
	if (!self->streams)
		return 0;
	PyErr_Format(PyExc_RuntimeError,
		     "pinmem: the manifest is read by %zd open stream(s); close them (and release "
		     "their batches) before adding items", self->streams);
	return -1;
}

static int manifest_init(PmManifest *self, PyObject *args, PyObject *kw)
{
	int r;

	if (!PyArg_ParseTuple(args, ":Manifest"))
		return -1;
	if (self->m)
		return 0;
	r = pm_manifest_create(&self->m);
	if (r < 0) {
		errno = -r;
		PyErr_SetFromErrno(PyExc_OSError);
		return -1;
	}
	return 0;
}

static void manifest_dealloc(PmManifest *self)
{
	pm_manifest_destroy(self->m);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *manifest_add(PmManifest *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "path", "offset", "length", "crc32c", NULL };
	unsigned long long off, len;
	PyObject *crc = Py_None;
	unsigned long c = 0;
	char err[512] = "";
	PyObject *path;
	int r;

	if (manifest_frozen(self) ||
	    !PyArg_ParseTupleAndKeywords(args, kw, "O&KK|O", kwlist, PyUnicode_FSConverter,
					 &path, &off, &len, &crc))
		return NULL;
	if (crc != Py_None) {
		c = PyLong_AsUnsignedLong(crc);
		if (PyErr_Occurred() || c > UINT32_MAX) {
			Py_DECREF(path);
			return PyErr_Format(PyExc_ValueError, "pinmem: crc32c must be a 32-bit int");
		}
	}
	r = pm_manifest_add(self->m, PyBytes_AS_STRING(path), off, len,
			    crc != Py_None, (uint32_t)c, err, sizeof(err));
	Py_DECREF(path);
	if (r < 0)
		return manifest_error(r, err);
	Py_RETURN_NONE;
}

static PyObject *manifest_add_file(PmManifest *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "path", "item_bytes", NULL };
	unsigned long long item = 0;
	char err[512] = "";
	PyObject *path;
	int r;

	if (manifest_frozen(self) ||
	    !PyArg_ParseTupleAndKeywords(args, kw, "O&|K", kwlist, PyUnicode_FSConverter,
					 &path, &item))
		return NULL;
	self->mutating = true;
	Py_BEGIN_ALLOW_THREADS
	r = pm_manifest_add_file(self->m, PyBytes_AS_STRING(path), item, err, sizeof(err));
	Py_END_ALLOW_THREADS
	self->mutating = false;
	Py_DECREF(path);
	if (r < 0)
		return manifest_error(r, err);
	Py_RETURN_NONE;
}

/* load(path), add_tar(path): @fn on one path, without the GIL. */
static PyObject *manifest_path_call(PmManifest *self, PyObject *args,
				    int (*fn)(struct pm_manifest *, const char *, char *, size_t))
{
	char err[512] = "";
	PyObject *path;
	int r;

	if (manifest_frozen(self) || !PyArg_ParseTuple(args, "O&", PyUnicode_FSConverter, &path))
		return NULL;
	self->mutating = true;
	Py_BEGIN_ALLOW_THREADS
	r = fn(self->m, PyBytes_AS_STRING(path), err, sizeof(err));
	Py_END_ALLOW_THREADS
	self->mutating = false;
	Py_DECREF(path);
	if (r < 0)
		return manifest_error(r, err);
	Py_RETURN_NONE;
}

static PyObject *manifest_add_tar(PmManifest *self, PyObject *args)
{
	return manifest_path_call(self, args, pm_manifest_add_tar);
}

static PyObject *manifest_group(PmManifest *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "first", "fields", NULL };
	PyObject *fields = Py_None, *seq = NULL;
	const char **names = NULL;
	char err[512] = "";
	Py_ssize_t first, n = 0;
	int r;

	if (manifest_frozen(self) ||
	    !PyArg_ParseTupleAndKeywords(args, kw, "n|O", kwlist, &first, &fields))
		return NULL;
	if (first < 0)
		return PyErr_Format(PyExc_ValueError, "pinmem: group from item %zd", first);
	if (fields != Py_None) {
		seq = PySequence_Fast(fields, "pinmem: fields must be a sequence of str or None");
		if (!seq)
			return NULL;
		n = PySequence_Fast_GET_SIZE(seq);
		if ((size_t)first + (size_t)n != pm_manifest_count(self->m)) {
			Py_DECREF(seq);
			return PyErr_Format(PyExc_ValueError,
					    "pinmem: group from item %zd: %zd fields for %zd items",
					    first, n,
					    (Py_ssize_t)pm_manifest_count(self->m) - first);
		}
		names = calloc((size_t)n + 1, sizeof(*names));
		if (!names) {
			Py_DECREF(seq);
			return PyErr_NoMemory();
		}
		for (Py_ssize_t k = 0; k < n; k++) {
			PyObject *f = PySequence_Fast_GET_ITEM(seq, k);

			if (f == Py_None)
				continue;
			names[k] = PyUnicode_Check(f) ? PyUnicode_AsUTF8(f) : NULL;
			if (!names[k]) {
				if (!PyErr_Occurred())
					PyErr_SetString(PyExc_TypeError,
							"pinmem: fields must be a sequence of str or None");
				free(names);
				Py_DECREF(seq);
				return NULL;
			}
		}
	}
	r = pm_manifest_group(self->m, (size_t)first, names, err, sizeof(err));
	free(names);
	Py_XDECREF(seq);
	if (r < 0)
		return manifest_error(r, err);
	Py_RETURN_NONE;
}

static PyObject *manifest_field(PmManifest *self, PyObject *arg)
{
	Py_ssize_t i = PyLong_AsSsize_t(arg);
	const char *f;

	if (i == -1 && PyErr_Occurred())
		return NULL;
	f = i < 0 ? NULL : pm_manifest_field(self->m, (size_t)i);
	if (!f)
		return PyErr_Format(PyExc_IndexError, "pinmem: manifest item %zd out of range", i);
	return PyUnicode_DecodeFSDefault(f);
}

static PyObject *manifest_sample(PmManifest *self, PyObject *arg)
{
	Py_ssize_t i = PyLong_AsSsize_t(arg);
	int64_t q;

	if (i == -1 && PyErr_Occurred())
		return NULL;
	q = i < 0 ? -ERANGE : pm_manifest_sample(self->m, (size_t)i);
	if (q < 0)
		return PyErr_Format(PyExc_IndexError, "pinmem: manifest item %zd out of range", i);
	return PyLong_FromLongLong(q);
}

static PyObject *manifest_load(PmManifest *self, PyObject *args)
{
	return manifest_path_call(self, args, pm_manifest_load);
}

static PyObject *manifest_parse(PmManifest *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "text", "name", "base_dir", NULL };
	const char *name = "<string>", *base = ".";
	char err[512] = "";
	Py_buffer text;
	int r;

	if (manifest_frozen(self) ||
	    !PyArg_ParseTupleAndKeywords(args, kw, "s*|ss", kwlist, &text, &name, &base))
		return NULL;
	r = pm_manifest_parse(self->m, text.buf, (size_t)text.len, name, base, err, sizeof(err));
	PyBuffer_Release(&text);
	if (r < 0)
		return manifest_error(r, err);
	Py_RETURN_NONE;
}

static Py_ssize_t manifest_len(PmManifest *self)
{
	return (Py_ssize_t)pm_manifest_count(self->m);
}

static PyObject *manifest_item(PmManifest *self, PyObject *arg)
{
	Py_ssize_t i = PyLong_AsSsize_t(arg);
	struct pm_item it;

	if (i == -1 && PyErr_Occurred())
		return NULL;
	if (i < 0 || pm_manifest_item(self->m, (size_t)i, &it) < 0)
		return PyErr_Format(PyExc_IndexError, "pinmem: manifest item %zd out of range", i);
	return Py_BuildValue("(O&KKN)", PyUnicode_DecodeFSDefault, it.path,
			     (unsigned long long)it.offset, (unsigned long long)it.length,
			     it.has_crc32c ? PyLong_FromUnsignedLong(it.crc32c) : Py_NewRef(Py_None));
}

static PyObject *manifest_nbytes(PmManifest *self, void *unused)
{
	return PyLong_FromUnsignedLongLong(pm_manifest_bytes(self->m));
}

static PyMethodDef manifest_methods[] = {
	{ "add", (PyCFunction)(void (*)(void))manifest_add, METH_VARARGS | METH_KEYWORDS,
	  "add(path, offset, length, crc32c=None): append one item." },
	{ "add_file", (PyCFunction)(void (*)(void))manifest_add_file, METH_VARARGS | METH_KEYWORDS,
	  "add_file(path, item_bytes=0): append a whole file cut into items of item_bytes (0: one item)." },
	{ "load", (PyCFunction)manifest_load, METH_VARARGS,
	  "load(path): append the items of a manifest file (lines 'path offset length [crc32c]')." },
	{ "parse", (PyCFunction)(void (*)(void))manifest_parse, METH_VARARGS | METH_KEYWORDS,
	  "parse(text, name='<string>', base_dir='.'): append the items of manifest text." },
	{ "item", (PyCFunction)manifest_item, METH_O,
	  "item(i) -> (path, offset, length, crc32c or None)." },
	{ "add_tar", (PyCFunction)manifest_add_tar, METH_VARARGS,
	  "add_tar(path): append each regular member of a tar shard (ustar, GNU, pax) as an item\n"
	  "read in place, members grouped into samples by WebDataset key; a bad archive is\n"
	  "ValueError naming it and the header's offset, and adds nothing." },
	{ "group", (PyCFunction)(void (*)(void))manifest_group, METH_VARARGS | METH_KEYWORDS,
	  "group(first, fields=None): the items from first to the last one added become one\n"
	  "sample (kept whole in one batch), item first + k named fields[k]." },
	{ "field", (PyCFunction)manifest_field, METH_O,
	  "field(i) -> item i's name in its sample ('input.npy'), '' for none." },
	{ "sample", (PyCFunction)manifest_sample, METH_O,
	  "sample(i) -> the sample number of item i." },
	{ NULL },
};

static PyGetSetDef manifest_getset[] = {
	{ "nbytes", (getter)manifest_nbytes, NULL, "Sum of item lengths.", NULL },
	{ NULL },
};

static PySequenceMethods manifest_as_sequence = {
	.sq_length = (lenfunc)manifest_len,
};

PyTypeObject PmManifest_Type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "pinmem.Manifest",
	.tp_basicsize = sizeof(PmManifest),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Manifest(): the items a Stream reads, in order: path, offset, length, crc32c.",
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)manifest_init,
	.tp_dealloc = (destructor)manifest_dealloc,
	.tp_methods = manifest_methods,
	.tp_getset = manifest_getset,
	.tp_as_sequence = &manifest_as_sequence,
};
