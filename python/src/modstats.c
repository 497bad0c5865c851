// SPDX-License-Identifier: MIT
/*
 * pinmem.module_stats(): the module's STATS ioctl, read through a file of
 * its own, so a script (or a test) can see machine-wide and per-user pinned
 * bytes without holding a context.  The caller's own file has no regions:
 * its "file" numbers are those of this probe, so only global and user are
 * returned.
 */
#include "pinmem_py.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "uapi/pinmem.h"

static PyObject *counters(const struct pinmem_counters *c)
{
	return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K}",
			     "pinned_bytes", (unsigned long long)c->pinned_bytes,
			     "limit_bytes", (unsigned long long)c->limit_bytes,
			     "peak_bytes", (unsigned long long)c->peak_bytes,
			     "regions", (unsigned long long)c->regions,
			     "pins", (unsigned long long)c->pins,
			     "unpins", (unsigned long long)c->unpins,
			     "refused_global", (unsigned long long)c->refused_global,
			     "refused_user", (unsigned long long)c->refused_user,
			     "refused_rlimit", (unsigned long long)c->refused_rlimit,
			     "refused_fault", (unsigned long long)c->refused_fault);
}

PyObject *pmpy_module_stats(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "device", NULL };
	const char *dev = "/dev/pinmem";
	struct pinmem_stats st;
	int fd, r, err;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|s", kwlist, &dev))
		return NULL;
	fd = open(dev, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return PyErr_SetFromErrnoWithFilename(PyExc_OSError, dev);
	memset(&st, 0, sizeof(st));
	r = ioctl(fd, PINMEM_IOC_STATS, &st);
	err = errno;
	close(fd);
	if (r < 0) {
		errno = err;
		return PyErr_SetFromErrnoWithFilename(PyExc_OSError, dev);
	}
	return Py_BuildValue("{s:I,s:N,s:N,s:K}", "uid", st.uid, "global", counters(&st.global),
			     "user", counters(&st.user),
			     "unlimited", (unsigned long long)PINMEM_UNLIMITED);
}
