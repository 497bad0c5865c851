// SPDX-License-Identifier: MIT
/*
 * Element types by name, as numpy and torch spell them ("float32",
 * "torch.float32", "uint8", ...), with their buffer-protocol format and
 * DLPack type.  bfloat16 has no buffer-protocol format: it goes by DLPack.
 */
#include "pinmem_py.h"

#include <string.h>

static const struct pmpy_dtype dtypes[] = {
	{ "uint8", "B", kDLUInt, 8 },
	{ "int8", "b", kDLInt, 8 },
	{ "uint16", "H", kDLUInt, 16 },
	{ "int16", "h", kDLInt, 16 },
	{ "uint32", "I", kDLUInt, 32 },
	{ "int32", "i", kDLInt, 32 },
	{ "uint64", "Q", kDLUInt, 64 },
	{ "int64", "q", kDLInt, 64 },
	{ "float16", "e", kDLFloat, 16 },
	{ "float32", "f", kDLFloat, 32 },
	{ "float64", "d", kDLFloat, 64 },
	{ "bfloat16", "", kDLBfloat, 16 },
	{ "bool", "?", kDLBool, 8 },
};

const struct pmpy_dtype pmpy_uint8 = { "uint8", "B", kDLUInt, 8 };

/* Aliases numpy and torch print for the same types. */
static const struct { const char *alias, *name; } aliases[] = {
	{ "float", "float32" }, { "double", "float64" }, { "half", "float16" },
	{ "long", "int64" }, { "int", "int32" }, { "short", "int16" },
	{ "byte", "uint8" }, { "char", "int8" },
};

const struct pmpy_dtype *pmpy_dtype_lookup(PyObject *obj)
{
	PyObject *s = PyObject_Str(obj);
	const char *name;
	size_t i;

	if (!s)
		return NULL;
	name = PyUnicode_AsUTF8(s);
	if (!name) {
		Py_DECREF(s);
		return NULL;
	}
	if (!strncmp(name, "torch.", 6))
		name += 6;
	for (i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (!strcmp(name, aliases[i].alias))
			name = aliases[i].name;
	for (i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
		if (!strcmp(name, dtypes[i].name)) {
			Py_DECREF(s);
			return &dtypes[i];
		}
	PyErr_Format(PyExc_TypeError, "pinmem: unsupported dtype %R", obj);
	Py_DECREF(s);
	return NULL;
}
