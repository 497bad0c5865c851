// SPDX-License-Identifier: MIT
/*
 * The cuda copy backend.  The CUDA runtime is loaded with dlopen, so
 * libpinmem links and loads on machines without CUDA; the handful of calls it
 * makes are resolved into a table whose types come from cuda_runtime_api.h,
 * so a mismatch with the real prototypes is a compile error.  The test
 * stand-in (tests/cuda_stub/) is loaded the same way, by path.
 *
 * Host buffers are registered with cudaHostRegister(Portable); copies are
 * cudaMemcpyAsync on one non-blocking stream of the chosen device; an event
 * is a cudaEvent (timing disabled) recorded after its copy.  Events are
 * pooled and named by slot index and generation, so a released id is refused
 * rather than aliasing a newer event.
 *
 * Device guard: every CUDA call, on whichever thread (the caller's or the
 * stream's reader), runs with the chosen device's primary context pushed
 * (cuCtxPushCurrent) and popped after, so the caller's current device is
 * never changed and no context is ever created on a device the user did not
 * choose (with CUDA 12, cudaSetDevice alone creates one, so "set, then
 * restore the caller's device 0" would open a context on GPU 0 from every
 * rank).  Without the driver calls there is no such guard, so the backend
 * is not created (a fallback through cudaSetDevice would open a context on
 * the caller's device 0 from every fresh thread).  The stream
 * and the events are created up front, under the guard, on the chosen
 * device.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

#define CUDART_FNS(X)							\
	X(GetDeviceCount) X(SetDevice) X(StreamCreateWithFlags)		\
	X(StreamDestroy) X(StreamSynchronize) X(HostRegister)		\
	X(HostUnregister) X(Malloc) X(Free) X(MemcpyAsync)		\
	X(EventCreateWithFlags) X(EventRecord) X(EventQuery)		\
	X(EventSynchronize) X(EventDestroy) X(GetErrorName)		\
	X(StreamWaitEvent) X(GetDevice) X(DeviceGetPCIBusId)

struct cudart {
	void *dl;
#define X(n) __typeof__(cuda##n) *n;
	CUDART_FNS(X)
#undef X
};

/* The driver calls of the device guard (libcuda, or the test stand-in). */
#define CUDRV_FNS(X)							\
	X(Init, "cuInit") X(DeviceGet, "cuDeviceGet")			\
	X(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain")		\
	X(PrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2")		\
	X(CtxPush, "cuCtxPushCurrent_v2") X(CtxPop, "cuCtxPopCurrent_v2")

struct cudrv {
	void *dl;		/* libcuda when opened here, NULL otherwise */
	CUresult (*Init)(unsigned int);
	CUresult (*DeviceGet)(CUdevice *, int);
	CUresult (*PrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*PrimaryCtxRelease)(CUdevice);
	CUresult (*CtxPush)(CUcontext);
	CUresult (*CtxPop)(CUcontext *);
	CUdevice dev;
	CUcontext ctx;		/* the retained primary context; NULL: no driver guard */
};

/* Events made at create; more are made (under the guard) only if needed. */
#define EVENTS_UP_FRONT 64

struct cuda_event {
	cudaEvent_t ev;		/* created on first use, reused after release */
	uint32_t gen;
	bool live;
};

struct cuda_dev {
	struct cuda_dev *next;
	void *p;
};

struct cuda_be {
	struct pm_backend be;
	struct cudart rt;
	struct cudrv drv;
	int device;
	cudaStream_t stream;
	pthread_mutex_t lock;	/* events, devs, and ordering of stream work */
	struct cuda_event *events;
	size_t nevents;
	struct cuda_dev *devs;
};

static struct cuda_be *cb(struct pm_backend *be)
{
	return (struct cuda_be *)be;
}

static int cuda_errno(cudaError_t e)
{
	switch (e) {
	case cudaSuccess:
		return 0;
	case cudaErrorInvalidValue:
	case cudaErrorInvalidDevicePointer:
	case cudaErrorInvalidResourceHandle:
		return -EINVAL;
	case cudaErrorMemoryAllocation:
		return -ENOMEM;
	case cudaErrorHostMemoryAlreadyRegistered:
		return -EEXIST;
	case cudaErrorHostMemoryNotRegistered:
		return -ENOENT;
	case cudaErrorNoDevice:
	case cudaErrorInvalidDevice:
	case cudaErrorInsufficientDriver:
		return -ENODEV;
	case cudaErrorNotSupported:
		return -EOPNOTSUPP;
	case cudaErrorNotPermitted:
		return -EPERM;
	default:
		return -EIO;
	}
}

/* 0, or -errno with "call: cudaErrorName" recorded. */
static int check(struct cuda_be *c, cudaError_t e, const char *call)
{
	if (e == cudaSuccess)
		return 0;
	return pm_backend_error(&c->be, cuda_errno(e), "%s: %s (%d)", call,
				c->rt.GetErrorName(e), (int)e);
}

/* --- the device guard --- */

/* Make the chosen device's primary context current for this thread; 0 or -errno. */
static int guard_enter(struct cuda_be *c)
{
	CUresult cr = c->drv.CtxPush(c->drv.ctx);

	if (cr != CUDA_SUCCESS)
		return pm_backend_error(&c->be, -EIO, "cuCtxPushCurrent: CUresult %d", (int)cr);
	return 0;
}

/* Give the caller back its own context. */
static void guard_exit(struct cuda_be *c)
{
	CUcontext popped;

	c->drv.CtxPop(&popped);
}

/* One runtime call inside the guard: 0 or -errno (recorded). */
#define GUARDED(c, call, name)						\
	({								\
		int r_ = guard_enter(c);				\
		if (!r_) {						\
			r_ = check(c, call, name);			\
			guard_exit(c);					\
		}							\
		r_;							\
	})

/* --- ops; each runs its CUDA calls inside the guard --- */

static int cuda_register(struct pm_backend *be, void *ptr, size_t len)
{
	struct cuda_be *c = cb(be);

	return GUARDED(c, c->rt.HostRegister(ptr, len, cudaHostRegisterPortable),
		       "cudaHostRegister");
}

/*
 * The copies queued from the range finish first: unregistering (then
 * unpinning) pages a DMA still reads is undefined, and pm_buf_free and
 * pm_close may come before the caller waited for its last copies.
 */
static int cuda_unregister(struct pm_backend *be, void *ptr)
{
	struct cuda_be *c = cb(be);
	int r = guard_enter(c), r2;

	if (r)
		return r;
	r = check(c, c->rt.StreamSynchronize(c->stream), "cudaStreamSynchronize");
	/* unregistered whatever the stream says: the caller unpins it next */
	r2 = check(c, c->rt.HostUnregister(ptr), "cudaHostUnregister");
	guard_exit(c);
	return r ? r : r2;
}

static int cuda_dev_alloc(struct pm_backend *be, size_t len, void **devp)
{
	struct cuda_be *c = cb(be);
	struct cuda_dev *d = malloc(sizeof(*d));
	int r;

	if (!d)
		return pm_backend_error(be, -ENOMEM, "out of memory");
	r = GUARDED(c, c->rt.Malloc(&d->p, len), "cudaMalloc");
	if (r) {
		free(d);
		return r;
	}
	pthread_mutex_lock(&c->lock);
	d->next = c->devs;
	c->devs = d;
	pthread_mutex_unlock(&c->lock);
	*devp = d->p;
	return 0;
}

static int cuda_dev_free(struct pm_backend *be, void *dev)
{
	struct cuda_be *c = cb(be);
	struct cuda_dev **pp, *d;
	int r;

	pthread_mutex_lock(&c->lock);
	for (pp = &c->devs; *pp && (*pp)->p != dev; pp = &(*pp)->next)
		;
	d = *pp;
	pthread_mutex_unlock(&c->lock);
	if (!d)
		return pm_backend_error(be, -EINVAL, "%p is not device memory from pm_dev_alloc",
					dev);
	r = GUARDED(c, c->rt.Free(dev), "cudaFree");
	if (r)
		return r;	/* still ours: teardown frees it */
	pthread_mutex_lock(&c->lock);
	for (pp = &c->devs; *pp != d; pp = &(*pp)->next)
		;
	*pp = d->next;
	pthread_mutex_unlock(&c->lock);
	free(d);
	return 0;
}

/* Make events n.. up to cap (c->lock held, inside the guard). */
static int make_events(struct cuda_be *c, size_t cap)
{
	struct cuda_event *e = realloc(c->events, cap * sizeof(*e));
	size_t i;

	if (!e)
		return pm_backend_error(&c->be, -ENOMEM, "out of memory for events");
	memset(e + c->nevents, 0, (cap - c->nevents) * sizeof(*e));
	c->events = e;
	for (i = c->nevents; i < cap; i++) {
		if (check(c, c->rt.EventCreateWithFlags(&e[i].ev, cudaEventDisableTiming),
			  "cudaEventCreateWithFlags")) {
			c->nevents = i;
			return c->be.err[0] && strstr(c->be.err, "Memory") ? -ENOMEM : -EIO;
		}
	}
	c->nevents = cap;
	return 0;
}

/* A free event slot (c->lock held, inside the guard); its id in *id. */
static struct cuda_event *get_event(struct cuda_be *c, uint64_t *id)
{
	struct cuda_event *e;
	size_t i;

	for (i = 0; i < c->nevents && c->events[i].live; i++)
		;
	if (i == c->nevents && make_events(c, c->nevents ? c->nevents * 2 : EVENTS_UP_FRONT))
		return NULL;
	e = &c->events[i];
	*id = ((uint64_t)(e->gen + 1) << 32) | (i + 1);
	return e;
}

/* The live event named id (c->lock held), or NULL with the error recorded. */
static struct cuda_event *find_event(struct cuda_be *c, uint64_t id)
{
	size_t i = (id & 0xffffffffu) - 1;

	if (!(id & 0xffffffffu) || i >= c->nevents || !c->events[i].live ||
	    c->events[i].gen + 1 != (uint32_t)(id >> 32)) {
		pm_backend_error(&c->be, -EINVAL, "event %#llx is unknown or released",
				 (unsigned long long)id);
		return NULL;
	}
	return &c->events[i];
}

/* The copy part of cuda_copy_h2d (c->lock held, inside the guard). */
static int copy_locked(struct cuda_be *c, void *dst, const void *src, size_t len,
		       uint64_t *evp)
{
	struct cuda_event *e = NULL;
	uint64_t id = 0;
	int r;

	/* Take the event first: a copy must not be queued without its event. */
	if (evp) {
		e = get_event(c, &id);
		if (!e)
			return -ENOMEM;
	}
	r = check(c, c->rt.MemcpyAsync(dst, src, len, cudaMemcpyHostToDevice, c->stream),
		  "cudaMemcpyAsync");
	if (r || !e)
		return r;
	r = check(c, c->rt.EventRecord(e->ev, c->stream), "cudaEventRecord");
	if (r) {
		/*
		 * The copy is queued but nothing will say when it is done: wait
		 * for it here (error path only), so the caller may reuse src.
		 */
		c->rt.StreamSynchronize(c->stream);
		return r;
	}
	e->live = true;
	*evp = id;
	return 0;
}

static int cuda_copy_h2d(struct pm_backend *be, void *dst, const void *src,
			 size_t len, uint64_t *evp)
{
	struct cuda_be *c = cb(be);
	int r = guard_enter(c);

	if (r)
		return r;
	pthread_mutex_lock(&c->lock);
	r = copy_locked(c, dst, src, len, evp);
	pthread_mutex_unlock(&c->lock);
	guard_exit(c);
	return r;
}

static int cuda_record_on(struct pm_backend *be, void *stream, uint64_t *evp)
{
	struct cuda_be *c = cb(be);
	struct cuda_event *e;
	uint64_t id;
	int r = guard_enter(c);

	if (r)
		return r;
	pthread_mutex_lock(&c->lock);
	e = get_event(c, &id);
	r = e ? check(c, c->rt.EventRecord(e->ev, (cudaStream_t)stream), "cudaEventRecord")
	      : -ENOMEM;
	if (!r) {
		e->live = true;
		*evp = id;
	}
	pthread_mutex_unlock(&c->lock);
	guard_exit(c);
	return r;
}

static int cuda_stream_wait(struct pm_backend *be, void *stream, uint64_t id)
{
	struct cuda_be *c = cb(be);
	struct cuda_event *e;
	int r = guard_enter(c);

	if (r)
		return r;
	pthread_mutex_lock(&c->lock);
	e = find_event(c, id);
	r = e ? check(c, c->rt.StreamWaitEvent((cudaStream_t)stream, e->ev, 0),
		      "cudaStreamWaitEvent") : -EINVAL;
	pthread_mutex_unlock(&c->lock);
	guard_exit(c);
	return r;
}

static int cuda_copy_d2h(struct pm_backend *be, void *dst, const void *src,
			 size_t len)
{
	struct cuda_be *c = cb(be);
	int r = guard_enter(c);

	if (r)
		return r;
	pthread_mutex_lock(&c->lock);
	r = check(c, c->rt.MemcpyAsync(dst, src, len, cudaMemcpyDeviceToHost, c->stream),
		  "cudaMemcpyAsync");
	pthread_mutex_unlock(&c->lock);
	if (!r)
		r = check(c, c->rt.StreamSynchronize(c->stream), "cudaStreamSynchronize");
	guard_exit(c);
	return r;
}

static int cuda_event_query(struct pm_backend *be, uint64_t id)
{
	struct cuda_be *c = cb(be);
	struct cuda_event *e;
	cudaError_t err;
	int r = guard_enter(c);

	if (r)
		return r;
	pthread_mutex_lock(&c->lock);
	e = find_event(c, id);
	if (!e) {
		r = -EINVAL;
	} else {
		err = c->rt.EventQuery(e->ev);
		r = err == cudaErrorNotReady ? 0 : err == cudaSuccess ? 1 :
		    check(c, err, "cudaEventQuery");
	}
	pthread_mutex_unlock(&c->lock);
	guard_exit(c);
	return r;
}

static int cuda_event_wait(struct pm_backend *be, uint64_t id)
{
	struct cuda_be *c = cb(be);
	struct cuda_event *e;
	cudaEvent_t ev;

	pthread_mutex_lock(&c->lock);
	e = find_event(c, id);
	ev = e ? e->ev : NULL;
	pthread_mutex_unlock(&c->lock);
	if (!e)
		return -EINVAL;
	/* Outside the lock: other threads keep queueing copies meanwhile. */
	return GUARDED(c, c->rt.EventSynchronize(ev), "cudaEventSynchronize");
}

static int cuda_event_release(struct pm_backend *be, uint64_t id)
{
	struct cuda_be *c = cb(be);
	struct cuda_event *e;

	pthread_mutex_lock(&c->lock);
	e = find_event(c, id);
	if (e) {
		e->live = false;
		e->gen++;
	}
	pthread_mutex_unlock(&c->lock);
	return e ? 0 : -EINVAL;
}

/*
 * Everything this backend made, and its host bookkeeping in every case.
 * Without the guard (the context cannot be pushed) nothing is called on
 * another context: the stream, events and device memory then go with the
 * primary context when its last retain is released.
 */
static void cuda_teardown(struct cuda_be *c)
{
	bool guarded = c->drv.ctx && !guard_enter(c);
	struct cuda_dev *d;
	size_t i;

	if (guarded && c->stream) {
		c->rt.StreamSynchronize(c->stream);
		c->rt.StreamDestroy(c->stream);
	}
	for (i = 0; guarded && i < c->nevents; i++)
		c->rt.EventDestroy(c->events[i].ev);
	while ((d = c->devs)) {
		c->devs = d->next;
		if (guarded)
			c->rt.Free(d->p);
		free(d);
	}
	if (guarded)
		guard_exit(c);
	if (c->drv.ctx)
		c->drv.PrimaryCtxRelease(c->drv.dev);
	free(c->events);
	if (c->drv.dl)
		dlclose(c->drv.dl);
	if (c->rt.dl)
		dlclose(c->rt.dl);
	pthread_mutex_destroy(&c->lock);
	pm_backend_fini(&c->be);
	free(c);
}

static void cuda_destroy(struct pm_backend *be)
{
	cuda_teardown(cb(be));
}

static const struct pm_backend_ops cuda_ops = {
	.name = "cuda",
	.register_host = cuda_register,
	.unregister_host = cuda_unregister,
	.dev_alloc = cuda_dev_alloc,
	.dev_free = cuda_dev_free,
	.copy_h2d = cuda_copy_h2d,
	.copy_d2h = cuda_copy_d2h,
	.event_query = cuda_event_query,
	.event_wait = cuda_event_wait,
	.event_release = cuda_event_release,
	.record_on = cuda_record_on,
	.stream_wait = cuda_stream_wait,
	.destroy = cuda_destroy,
};

#ifndef PM_CUDA_LIBDIR
#define PM_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif

/* The runtime: an explicit path, $PINMEM_CUDART, or the usual sonames; 0 or -ELIBACC. */
static int load_cudart(struct cudart *rt, const char *path, char *note, size_t len)
{
	static const char *const names[] = {
		"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0",
		"libcudart.so", PM_CUDA_LIBDIR "/libcudart.so",
	};
	const char *missing = NULL, *from = "";
	size_t i;

	if (!path) {
		path = getenv("PINMEM_CUDART");
		from = " named by PINMEM_CUDART";
	}
	if (path && *path) {
		rt->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		if (!rt->dl) {
			snprintf(note, len, "cannot load the CUDA runtime%s: %s", from, dlerror());
			return -ELIBACC;
		}
	} else {
		for (i = 0; i < sizeof(names) / sizeof(names[0]) && !rt->dl; i++)
			rt->dl = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		if (!rt->dl) {
			snprintf(note, len,
				 "no CUDA runtime found (looked for libcudart.so.13, .12, .11.0 and libcudart.so on the library path, and %s/libcudart.so)",
				 PM_CUDA_LIBDIR);
			return -ELIBACC;
		}
	}
#define X(n) \
	if (!missing && !(rt->n = (__typeof__(rt->n))dlsym(rt->dl, "cuda" #n))) \
		missing = "cuda" #n;
	CUDART_FNS(X)
#undef X
	if (missing) {
		snprintf(note, len, "the CUDA runtime lacks %s", missing);
		dlclose(rt->dl);
		rt->dl = NULL;
		return -ELIBACC;
	}
	return 0;
}

/*
 * The driver calls of the guard, from the runtime's own library (the test
 * stand-in has them) or from libcuda, which the runtime has loaded by now,
 * and the chosen device's primary context retained; 0 or -ENODEV with why
 * in note.
 */
static int load_driver(struct cuda_be *c, char *note, size_t len)
{
	struct cudrv *d = &c->drv;
	const char *missing = NULL;
	void *h = c->rt.dl;
	CUresult cr;

	if (!dlsym(h, "cuCtxPushCurrent_v2")) {
		d->dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
		h = d->dl;
	}
	if (!h) {
		snprintf(note, len,
			 "the CUDA runtime loaded but the driver library libcuda.so.1 did not (%s): libpinmem keeps every CUDA call on device %d through the driver's cuCtxPushCurrent, so it does not run without it; install the NVIDIA driver's libcuda",
			 dlerror(), c->device);
		return -ENODEV;
	}
#define X(n, sym) \
	if (!missing && !(*(void **)&d->n = dlsym(h, sym))) \
		missing = sym;
	CUDRV_FNS(X)
#undef X
	if (missing) {
		snprintf(note, len,
			 "the CUDA driver library lacks %s: libpinmem keeps every CUDA call on device %d through the driver's primary context calls, so it does not run without them; update the NVIDIA driver",
			 missing, c->device);
		return -ENODEV;
	}
	cr = d->Init(0);
	if (cr == CUDA_SUCCESS)
		cr = d->DeviceGet(&d->dev, c->device);
	if (cr == CUDA_SUCCESS)
		cr = d->PrimaryCtxRetain(&d->ctx, d->dev);
	if (cr != CUDA_SUCCESS) {
		d->ctx = NULL;
		snprintf(note, len,
			 "the CUDA driver refused device %d's primary context (CUresult %d), which every CUDA call of libpinmem runs in; check nvidia-smi and that the device is not in exclusive-process mode held by another process",
			 c->device, (int)cr);
		return -ENODEV;
	}
	return 0;
}

/* What to do about a runtime error at device discovery. */
static const char *cuda_advice(cudaError_t e)
{
	switch (e) {
	case cudaErrorInitializationError:
		return "the CUDA runtime cannot initialise in this process; a process forked after CUDA was initialised in its parent never can: start workers with the spawn method, or open a context with PM_BACKEND_HOST or PM_BACKEND_NONE in the child";
	case cudaErrorNoDevice:
		return "no CUDA device is visible to this process: check CUDA_VISIBLE_DEVICES (empty hides every GPU) and nvidia-smi";
	case cudaErrorInsufficientDriver:
		return "the NVIDIA driver is older than this CUDA runtime: update the driver, or point PINMEM_CUDART at an older libcudart";
	default:
		return "check nvidia-smi and the kernel log (dmesg) for the GPU's state";
	}
}

int pm_backend_cuda_create(const struct pm_backend_cfg *cfg,
			   struct pm_backend **bep, char *note, size_t note_len)
{
	struct cuda_be *c = calloc(1, sizeof(*c));
	cudaError_t e;
	int n = 0, r;

	if (!c)
		return -ENOMEM;
	pm_backend_init(&c->be, &cuda_ops);
	pthread_mutex_init(&c->lock, NULL);
	c->device = cfg ? cfg->cuda_device : 0;
	r = load_cudart(&c->rt, cfg ? cfg->cuda_library : NULL, note, note_len);
	if (r)
		goto fail;
	r = -ENODEV;
	e = c->rt.GetDeviceCount(&n);
	if (e != cudaSuccess) {
		snprintf(note, note_len, "cudaGetDeviceCount: %s (%d): %s", c->rt.GetErrorName(e),
			 (int)e, cuda_advice(e));
		goto fail;
	}
	if (c->device == PM_CUDA_DEVICE_CURRENT) {
		e = c->rt.GetDevice(&c->device);
		if (e != cudaSuccess) {
			snprintf(note, note_len, "cudaGetDevice: %s (%d): %s", c->rt.GetErrorName(e),
				 (int)e, cuda_advice(e));
			goto fail;
		}
	}
	if (c->device < 0 || c->device >= n) {
		snprintf(note, note_len, n ? "CUDA device %d asked for, %d present" :
			 "no CUDA device (device %d asked for)", c->device, n);
		goto fail;
	}
	r = load_driver(c, note, note_len);
	if (r)
		goto fail;
	r = guard_enter(c);
	if (!r) {
		r = check(c, c->rt.StreamCreateWithFlags(&c->stream, cudaStreamNonBlocking),
			  "cudaStreamCreateWithFlags");
		if (r)
			c->stream = NULL;
		if (!r) {
			pthread_mutex_lock(&c->lock);
			r = make_events(c, EVENTS_UP_FRONT);
			pthread_mutex_unlock(&c->lock);
		}
		/* for NUMA placement; without it buffers are simply not placed */
		if (!r && c->rt.DeviceGetPCIBusId(c->be.pci_bus_id, sizeof(c->be.pci_bus_id),
						  c->device) != cudaSuccess)
			c->be.pci_bus_id[0] = '\0';
		guard_exit(c);
	}
	if (r) {
		snprintf(note, note_len, "%s", c->be.err);
		goto fail;
	}
	c->be.cuda_device = c->device;
	*bep = &c->be;
	return 0;
fail:
	cuda_teardown(c);
	return r;
}
