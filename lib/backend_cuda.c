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
 */
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
	X(StreamWaitEvent)

struct cudart {
	void *dl;
#define X(n) __typeof__(cuda##n) *n;
	CUDART_FNS(X)
#undef X
};

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

static int cuda_register(struct pm_backend *be, void *ptr, size_t len)
{
	struct cuda_be *c = cb(be);
	int r = check(c, c->rt.SetDevice(c->device), "cudaSetDevice");

	if (!r)
		r = check(c, c->rt.HostRegister(ptr, len, cudaHostRegisterPortable),
			  "cudaHostRegister");
	return r;
}

static int cuda_unregister(struct pm_backend *be, void *ptr)
{
	struct cuda_be *c = cb(be);

	return check(c, c->rt.HostUnregister(ptr), "cudaHostUnregister");
}

static int cuda_dev_alloc(struct pm_backend *be, size_t len, void **devp)
{
	struct cuda_be *c = cb(be);
	struct cuda_dev *d = malloc(sizeof(*d));
	int r;

	if (!d)
		return pm_backend_error(be, -ENOMEM, "out of memory");
	r = check(c, c->rt.SetDevice(c->device), "cudaSetDevice");
	if (!r)
		r = check(c, c->rt.Malloc(&d->p, len), "cudaMalloc");
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

	pthread_mutex_lock(&c->lock);
	for (pp = &c->devs; *pp && (*pp)->p != dev; pp = &(*pp)->next)
		;
	d = *pp;
	if (d)
		*pp = d->next;
	pthread_mutex_unlock(&c->lock);
	if (!d)
		return pm_backend_error(be, -EINVAL, "%p is not device memory from pm_dev_alloc",
					dev);
	free(d);
	return check(c, c->rt.Free(dev), "cudaFree");
}

/* A free event slot (c->lock held); its id in *id. */
static struct cuda_event *get_event(struct cuda_be *c, uint64_t *id)
{
	struct cuda_event *e;
	size_t i, n;

	for (i = 0; i < c->nevents && c->events[i].live; i++)
		;
	if (i == c->nevents) {
		n = c->nevents ? c->nevents * 2 : 16;
		e = realloc(c->events, n * sizeof(*e));
		if (!e) {
			pm_backend_error(&c->be, -ENOMEM, "out of memory for events");
			return NULL;
		}
		memset(e + c->nevents, 0, (n - c->nevents) * sizeof(*e));
		c->events = e;
		c->nevents = n;
	}
	e = &c->events[i];
	if (!e->ev && check(c, c->rt.EventCreateWithFlags(&e->ev, cudaEventDisableTiming),
			    "cudaEventCreateWithFlags")) {
		e->ev = NULL;
		return NULL;
	}
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

static int cuda_copy_h2d(struct pm_backend *be, void *dst, const void *src,
			 size_t len, uint64_t after, uint64_t *evp)
{
	struct cuda_be *c = cb(be);
	struct cuda_event *e = NULL, *a;
	uint64_t id = 0;
	int r;

	pthread_mutex_lock(&c->lock);
	if (after) {
		a = find_event(c, after);
		r = a ? check(c, c->rt.StreamWaitEvent(c->stream, a->ev, 0),
			      "cudaStreamWaitEvent") : -EINVAL;
		if (r) {
			pthread_mutex_unlock(&c->lock);
			return r;
		}
	}
	/* Take the event first: a copy must not be queued without its event. */
	if (evp) {
		e = get_event(c, &id);
		if (!e) {
			pthread_mutex_unlock(&c->lock);
			return -ENOMEM;
		}
	}
	r = check(c, c->rt.MemcpyAsync(dst, src, len, cudaMemcpyHostToDevice, c->stream),
		  "cudaMemcpyAsync");
	if (!r && e)
		r = check(c, c->rt.EventRecord(e->ev, c->stream), "cudaEventRecord");
	if (!r && e) {
		e->live = true;
		*evp = id;
	}
	pthread_mutex_unlock(&c->lock);
	return r;
}

static int cuda_record_on(struct pm_backend *be, void *stream, uint64_t *evp)
{
	struct cuda_be *c = cb(be);
	struct cuda_event *e;
	uint64_t id;
	int r = -ENOMEM;

	pthread_mutex_lock(&c->lock);
	e = get_event(c, &id);
	if (e)
		r = check(c, c->rt.EventRecord(e->ev, (cudaStream_t)stream), "cudaEventRecord");
	if (!r) {
		e->live = true;
		*evp = id;
	}
	pthread_mutex_unlock(&c->lock);
	return r;
}

static int cuda_stream_wait(struct pm_backend *be, void *stream, uint64_t id)
{
	struct cuda_be *c = cb(be);
	struct cuda_event *e;
	int r = -EINVAL;

	pthread_mutex_lock(&c->lock);
	e = find_event(c, id);
	if (e)
		r = check(c, c->rt.StreamWaitEvent((cudaStream_t)stream, e->ev, 0),
			  "cudaStreamWaitEvent");
	pthread_mutex_unlock(&c->lock);
	return r;
}

static int cuda_copy_d2h(struct pm_backend *be, void *dst, const void *src,
			 size_t len)
{
	struct cuda_be *c = cb(be);
	int r;

	pthread_mutex_lock(&c->lock);
	r = check(c, c->rt.MemcpyAsync(dst, src, len, cudaMemcpyDeviceToHost, c->stream),
		  "cudaMemcpyAsync");
	pthread_mutex_unlock(&c->lock);
	if (!r)
		r = check(c, c->rt.StreamSynchronize(c->stream), "cudaStreamSynchronize");
	return r;
}

static int cuda_event_query(struct pm_backend *be, uint64_t id)
{
	struct cuda_be *c = cb(be);
	struct cuda_event *e;
	cudaError_t err;
	int r;

	pthread_mutex_lock(&c->lock);
	e = find_event(c, id);
	if (!e) {
		pthread_mutex_unlock(&c->lock);
		return -EINVAL;
	}
	err = c->rt.EventQuery(e->ev);
	r = err == cudaErrorNotReady ? 0 : err == cudaSuccess ? 1 :
	    check(c, err, "cudaEventQuery");
	pthread_mutex_unlock(&c->lock);
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
	return check(c, c->rt.EventSynchronize(ev), "cudaEventSynchronize");
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

static void cuda_teardown(struct cuda_be *c)
{
	struct cuda_dev *d;
	size_t i;

	if (c->stream) {
		c->rt.StreamSynchronize(c->stream);
		c->rt.StreamDestroy(c->stream);
	}
	for (i = 0; i < c->nevents; i++)
		if (c->events[i].ev)
			c->rt.EventDestroy(c->events[i].ev);
	while ((d = c->devs)) {
		c->devs = d->next;
		c->rt.Free(d->p);
		free(d);
	}
	free(c->events);
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

/* The runtime: an explicit path, $PINMEM_CUDART, or the usual sonames. */
static int load_cudart(struct cudart *rt, const char *path, char *note, size_t len)
{
	static const char *const names[] = {
		"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0",
		"libcudart.so", PM_CUDA_LIBDIR "/libcudart.so",
	};
	const char *missing = NULL;
	size_t i;

	if (!path)
		path = getenv("PINMEM_CUDART");
	if (path && *path) {
		rt->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		if (!rt->dl) {
			snprintf(note, len, "cannot load the CUDA runtime: %s", dlerror());
			return -ENODEV;
		}
	} else {
		for (i = 0; i < sizeof(names) / sizeof(names[0]) && !rt->dl; i++)
			rt->dl = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		if (!rt->dl) {
			snprintf(note, len, "no CUDA runtime (libcudart.so) found");
			return -ENODEV;
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
		return -ENODEV;
	}
	return 0;
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
		snprintf(note, note_len, "cudaGetDeviceCount: %s", c->rt.GetErrorName(e));
		goto fail;
	}
	if (c->device < 0 || c->device >= n) {
		snprintf(note, note_len, n ? "CUDA device %d asked for, %d present" :
			 "no CUDA device (device %d asked for)", c->device, n);
		goto fail;
	}
	r = check(c, c->rt.SetDevice(c->device), "cudaSetDevice");
	if (!r)
		r = check(c, c->rt.StreamCreateWithFlags(&c->stream, cudaStreamNonBlocking),
			  "cudaStreamCreateWithFlags");
	if (r) {
		snprintf(note, note_len, "%s", c->be.err);
		c->stream = NULL;
		goto fail;
	}
	*bep = &c->be;
	return 0;
fail:
	cuda_teardown(c);
	return r;
}
