// SPDX-License-Identifier: MIT
/*
 * pinmem.module_stats(): the module's STATS ioctl, read through a file of
 * its own, so a script (or a test) can see machine-wide and per-user pinned
 * bytes without holding a context.  The caller's own file has no regions:
 * its "file" numbers are those of this probe, so only global and user are
 * returned.  From ABI 1.5 the REFUSALS ioctl adds every refusal reason
 * (cgroup and refs too) and the users whose counters were dropped.
 */
#include "pinmem_py.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "uapi/pinmem.h"

/* Reason names by PINMEM_REASON_*, as pinctl prints them. */
static const char *const reasons[PINMEM_REASON_COUNT] = {
	"global", "user", "rlimit", "fault", "regions", "cgroup", "refs",
};

static PyObject *counters(const struct pinmem_counters *c)
{
	return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K}",
			     "pinned_bytes", (unsigned long long)c->pinned_bytes,
			     "limit_bytes", (unsigned long long)c->limit_bytes,
			     "peak_bytes", (unsigned long long)c->peak_bytes,
			     "regions", (unsigned long long)c->regions,
			     "pins", (unsigned long long)c->pins,
			     "unpins", (unsigned long long)c->unpins,
			     "refused_global", (unsigned long long)c->refused_global,
			     "refused_user", (unsigned long long)c->refused_user,
			     "refused_rlimit", (unsigned long long)c->refused_rlimit,
			     "refused_fault", (unsigned long long)c->refused_fault,
			     "refused_regions", (unsigned long long)c->refused_regions);
}

/* {reason: count} of one REFUSALS array; adds it to @dict as "refused". */
static int add_refused(PyObject *dict, const __u64 *by_reason)
{
	PyObject *r = PyDict_New(), *v;
	int ret = -1;

	if (!r)
		return -1;
	for (int i = 0; i < PINMEM_REASON_COUNT; i++) {
		v = PyLong_FromUnsignedLongLong(by_reason[i]);
		if (!v || PyDict_SetItemString(r, reasons[i], v)) {
			Py_XDECREF(v);
			goto out;
		}
		Py_DECREF(v);
	}
	ret = PyDict_SetItemString(dict, "refused", r);
out:
	Py_DECREF(r);
	return ret;
}

/* ABI 1.5: "refused" by reason in global and user, and the evicted users. */
static int add_refusals(PyObject *res, const struct pinmem_refusals *rf)
{
	PyObject *ev;
	int ret;

	if (add_refused(PyDict_GetItemString(res, "global"), rf->global) ||
	    add_refused(PyDict_GetItemString(res, "user"), rf->user))
		return -1;
	ev = Py_BuildValue("{s:K,s:K,s:I}", "users", (unsigned long long)rf->evicted_users,
			   "idle_users", (unsigned long long)rf->idle_users,
			   "max_idle_users", rf->max_idle_users);
	if (!ev || add_refused(ev, rf->evicted)) {
		Py_XDECREF(ev);
		return -1;
	}
	ret = PyDict_SetItemString(res, "users_evicted", ev);
	Py_DECREF(ev);
	return ret;
}

PyObject *pmpy_module_stats(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "device", NULL };
	const char *dev = "/dev/pinmem";
	struct pinmem_refusals rf;
	struct pinmem_stats st;
	PyObject *res;
	int fd, r, err, have_rf;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|s", kwlist, &dev))
		return NULL;
	fd = open(dev, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return PyErr_SetFromErrnoWithFilename(PyExc_OSError, dev);
	memset(&st, 0, sizeof(st));
	r = ioctl(fd, PINMEM_IOC_STATS, &st);
	err = errno;
	memset(&rf, 0, sizeof(rf));
	have_rf = !r && !ioctl(fd, PINMEM_IOC_REFUSALS, &rf);	/* ENOTTY before 1.5 */
	close(fd);
	if (r < 0) {
		errno = err;
		return PyErr_SetFromErrnoWithFilename(PyExc_OSError, dev);
	}
	res = Py_BuildValue("{s:I,s:N,s:N,s:K}", "uid", st.uid, "global", counters(&st.global),
			    "user", counters(&st.user),
			    "unlimited", (unsigned long long)PINMEM_UNLIMITED);
	if (res && have_rf && add_refusals(res, &rf))
		Py_CLEAR(res);
	return res;
}
