// SPDX-License-Identifier: MIT
/*
 * Test-only stand-in for the CUDA runtime (see cudastub.h): device memory is
 * malloc'd, every stream is a worker thread running its queue in order, an
 * event completes when its stream's worker reaches the record.  It checks
 * what the real runtime checks for the calls libpinmem makes (overlapping
 * registration, unknown pointers, streams and events, an event recorded on
 * another device's stream) and returns the same error codes.
 *
 * One lock guards everything; one condition variable announces every change
 * (work queued, work done, hold released), which is plenty for tests.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cudastub.h"

#define API __attribute__((visibility("default")))
#define LOG_MAX 8192
#define FAILS_MAX 8
#define DEV_MAX 8
#define STACK_MAX 8

struct range {
	struct range *next;
	char *p;
	size_t len;
	int dev;		/* the device current at allocation or registration */
	unsigned int flags;	/* cudaHostRegister's */
};

enum op_kind { OP_COPY, OP_RECORD, OP_WAIT, OP_KERNEL };

struct op {
	struct op *next;
	enum op_kind kind;
	void *dst;
	const void *src;
	size_t len;
	struct CUevent_st *ev;
	unsigned long seq;	/* OP_RECORD: record number; OP_WAIT: wait for it */
	unsigned int delay_us;
};

struct CUevent_st {
	struct CUevent_st *next;
	unsigned int flags;
	int dev;
	unsigned long recorded, done;	/* records queued, records reached */
};

struct CUstream_st {
	struct CUstream_st *next;
	unsigned int flags;
	int dev;
	int per_thread;		/* cudaStreamPerThread of thread 'owner' */
	struct op *running;	/* the op the worker runs outside the lock, or NULL */
	pthread_t owner;
	struct op *head, **tail;
	int stop;
	pthread_t thread;
};

struct CUctx_st {
	int dev;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	int devices, count_err, hold, forcing;
	unsigned int copy_delay_us;	/* every copy takes at least this long */
	struct cudastub_call log[LOG_MAX];
	int nlog;
	struct { char fn[40]; int nth, err; } fails[FAILS_MAX];
	struct range *regs, *allocs;
	struct CUevent_st *events;
	struct CUstream_st *streams;
	struct CUstream_st *legacy[DEV_MAX];	/* the NULL stream of each device */
	struct CUctx_st primary[DEV_MAX];
	int context[DEV_MAX];
	int calls_on[DEV_MAX];
	int retained[DEV_MAX];	/* cuDevicePrimaryCtxRetain minus Release */
	int unregistered_copies, pending_copies;
	int unregistered_in_flight;	/* host ranges unregistered under a queued copy */
	pid_t pid;		/* the process that initialised the runtime */
	unsigned long generation;	/* bumped by reset: threads forget their device */
} st = {
	.lock = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .devices = 1,
	.primary = { { 0 }, { 1 }, { 2 }, { 3 }, { 4 }, { 5 }, { 6 }, { 7 } },
};

/*
 * This thread's runtime device and pushed driver contexts.  Static TLS
 * (initial-exec, a few dozen bytes of glibc's surplus): LeakSanitizer's
 * exit scan crashes on the dynamic TLS of a dlopen'ed library.
 */
#define TLS __thread __attribute__((tls_model("initial-exec")))
static TLS int t_dev;
static TLS int t_stack[STACK_MAX], t_depth;
static TLS unsigned long t_generation;

static int *current_slot(void)
{
	if (t_generation != st.generation) {
		t_generation = st.generation;
		t_dev = 0;
		t_depth = 0;
	}
	return t_depth ? &t_stack[t_depth - 1] : &t_dev;
}

static int current(void)
{
	return *current_slot();
}

/* The current device gets its context (the runtime creates it lazily). */
static void need_context(void)
{
	int d = current();

	if (d >= 0 && d < DEV_MAX)
		st.context[d] = 1;
}

/* Log the call; the error injected for it, or cudaSuccess. */
static cudaError_t enter(const char *fn, const void *a, const void *b, size_t len,
			 unsigned int flags)
{
	struct cudastub_call *c = NULL;
	cudaError_t err = cudaSuccess;
	int i;

	if (st.nlog < LOG_MAX) {
		c = &st.log[st.nlog++];
		memset(c, 0, sizeof(*c));
		strncpy(c->fn, fn, sizeof(c->fn) - 1);
		c->a = a;
		c->b = b;
		c->len = len;
		c->flags = flags;
		c->dev = current();
		c->pid = (int)getpid();
	}
	for (i = 0; i < FAILS_MAX; i++)
		if (st.fails[i].nth && !strcmp(st.fails[i].fn, fn) && !--st.fails[i].nth)
			err = (cudaError_t)st.fails[i].err;
	/* Like CUDA: a child forked after its parent initialised the runtime cannot use it. */
	if (!st.pid)
		st.pid = getpid();
	else if (st.pid != getpid())
		err = cudaErrorInitializationError;
	if (c)
		c->ret = err;
	return err;
}

static cudaError_t leave(cudaError_t err)
{
	if (st.nlog)
		st.log[st.nlog - 1].ret = err;
	pthread_mutex_unlock(&st.lock);
	return err;
}

/* A runtime call that works on the current device's context. */
#define ENTER(a, b, len, flags)						\
	do {								\
		cudaError_t e_;						\
		pthread_mutex_lock(&st.lock);				\
		e_ = enter(__func__, a, b, len, flags);			\
		if (current() < DEV_MAX)				\
			st.calls_on[current()]++;			\
		need_context();						\
		if (e_ != cudaSuccess)					\
			return leave(e_);				\
	} while (0)

/* A call that needs no context (device queries, driver calls). */
#define ENTER_NOCTX(a, b, len, flags)					\
	do {								\
		cudaError_t e_;						\
		pthread_mutex_lock(&st.lock);				\
		e_ = enter(__func__, a, b, len, flags);			\
		if (e_ != cudaSuccess)					\
			return leave(e_);				\
	} while (0)

/* A driver call: logged, injected errors returned as CUresult. */
#define ENTER_DRV(a, b, len, flags)					\
	do {								\
		cudaError_t e_;						\
		pthread_mutex_lock(&st.lock);				\
		e_ = enter(__func__, a, b, len, flags);			\
		if (e_ != cudaSuccess)					\
			return (CUresult)leave(e_);			\
	} while (0)

static struct range *within(struct range *l, const void *p, size_t len)
{
	const char *a = p;

	for (; l; l = l->next)
		if (a >= l->p && len <= l->len && (size_t)(a - l->p) <= l->len - len)
			return l;
	return NULL;
}

/*
 * Whether host memory counts as pinned for work on device dev: registered,
 * and Portable unless registered with dev current (the runtime pins it for
 * the registering context only otherwise).
 */
static int pinned_for(const void *p, size_t len, int dev)
{
	struct range *r = within(st.regs, p, len);

	return r && ((r->flags & cudaHostRegisterPortable) || r->dev == dev);
}

/* Device memory [p, p + len) allocated on dev (the runtime refuses another device's). */
static int device_mem_on(const void *p, size_t len, int dev)
{
	struct range *r = within(st.allocs, p, len);

	return r && r->dev == dev;
}

/* --- streams: a worker per stream --- */

static int may_run(struct CUstream_st *s)
{
	/* hold 2: synchronizing calls wait for the release too */
	return !st.hold || (st.forcing && st.hold != 2) || s->stop;
}

static void *worker(void *arg)
{
	struct CUstream_st *s = arg;
	struct op *o;

	pthread_mutex_lock(&st.lock);
	for (;;) {
		while (!(s->head && may_run(s)) && !(s->stop && !s->head))
			pthread_cond_wait(&st.cv, &st.lock);
		if (!s->head)
			break;
		o = s->head;
		if (o->kind == OP_WAIT && o->ev->done < o->seq) {
			pthread_cond_wait(&st.cv, &st.lock);
			continue;
		}
		s->head = o->next;
		if (!s->head)
			s->tail = &s->head;
		s->running = o;
		if (o->kind == OP_COPY || o->kind == OP_KERNEL) {
			pthread_mutex_unlock(&st.lock);
			if (o->delay_us)
				usleep(o->delay_us);
			memcpy(o->dst, o->src, o->len);
			pthread_mutex_lock(&st.lock);
			if (o->kind == OP_COPY)
				st.pending_copies--;
		} else if (o->kind == OP_RECORD && o->ev->done < o->seq) {
			o->ev->done = o->seq;
		}
		s->running = NULL;
		free(o);
		pthread_cond_broadcast(&st.cv);
	}
	pthread_mutex_unlock(&st.lock);
	return NULL;
}

static cudaError_t stream_new(unsigned int flags, int dev, struct CUstream_st **sp)
{
	struct CUstream_st *s = calloc(1, sizeof(*s));

	if (!s)
		return cudaErrorMemoryAllocation;
	s->flags = flags;
	s->dev = dev;
	s->tail = &s->head;
	if (pthread_create(&s->thread, NULL, worker, s)) {
		free(s);
		return cudaErrorMemoryAllocation;
	}
	*sp = s;
	return cudaSuccess;
}

/* Let the worker finish its queue, then end it (st.lock held, dropped meanwhile). */
static void stream_end(struct CUstream_st *s)
{
	s->stop = 1;
	pthread_cond_broadcast(&st.cv);
	pthread_mutex_unlock(&st.lock);
	pthread_join(s->thread, NULL);
	pthread_mutex_lock(&st.lock);
	free(s);
}

/*
 * The stream a handle names, or NULL: NULL and cudaStreamLegacy name the
 * current device's legacy stream, cudaStreamPerThread this thread's own
 * default stream on it (what torch.from_dlpack passes as 1 or 2).
 */
static struct CUstream_st *stream_of(cudaStream_t h)
{
	struct CUstream_st *p;
	int d = current();

	if (h == cudaStreamPerThread) {
		for (p = st.streams; p; p = p->next)
			if (p->per_thread && p->dev == d && pthread_equal(p->owner, pthread_self()))
				return p;
		if (d >= DEV_MAX || stream_new(0, d, &p))
			return NULL;
		p->per_thread = 1;
		p->owner = pthread_self();
		p->next = st.streams;
		st.streams = p;
		return p;
	}
	if (!h || h == cudaStreamLegacy) {
		if (d >= DEV_MAX)
			return NULL;
		if (!st.legacy[d] && stream_new(0, d, &st.legacy[d]))
			return NULL;
		return st.legacy[d];
	}
	for (p = st.streams; p; p = p->next)
		if (p == h)
			return p;
	return NULL;
}

static int event_ok(cudaEvent_t e)
{
	struct CUevent_st *p;

	for (p = st.events; p; p = p->next)
		if (p == e)
			return 1;
	return 0;
}

static cudaError_t queue(struct CUstream_st *s, struct op *o)
{
	struct op *n = malloc(sizeof(*n));

	if (!n)
		return cudaErrorMemoryAllocation;
	*n = *o;
	n->next = NULL;
	*s->tail = n;
	s->tail = &n->next;
	if (n->kind == OP_COPY)
		st.pending_copies++;
	pthread_cond_broadcast(&st.cv);
	return cudaSuccess;
}

static int idle(struct CUstream_st *s)
{
	return !s->head && !s->running;
}

static int all_idle(void)
{
	struct CUstream_st *s;
	int d;

	for (s = st.streams; s; s = s->next)
		if (!idle(s))
			return 0;
	for (d = 0; d < DEV_MAX; d++)
		if (st.legacy[d] && !idle(st.legacy[d]))
			return 0;
	return 1;
}

/* Wait, running held work, until done() (st.lock held). */
static void force_until(int (*done)(void *), void *arg)
{
	st.forcing++;
	pthread_cond_broadcast(&st.cv);
	while (!done(arg))
		pthread_cond_wait(&st.cv, &st.lock);
	st.forcing--;
}

static int stream_idle(void *s)
{
	return idle(s);
}

static int device_idle(void *unused)
{
	(void)unused;
	return all_idle();
}

static int event_reached(void *e)
{
	struct CUevent_st *ev = e;

	return ev->done >= ev->recorded;
}

/* --- runtime calls --- */

API cudaError_t cudaGetDeviceCount(int *count)
{
	ENTER_NOCTX(count, NULL, 0, 0);
	if (st.count_err)
		return leave((cudaError_t)st.count_err);
	*count = st.devices;
	return leave(cudaSuccess);
}

API cudaError_t cudaGetDevice(int *device)
{
	ENTER_NOCTX(device, NULL, 0, 0);
	*device = current();
	return leave(cudaSuccess);
}

/* Device d sits at PCI bus 0x41 + d, upper case like the runtime's. */
API cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device)
{
	ENTER_NOCTX(pciBusId, NULL, (size_t)len, (unsigned int)device);
	if (device < 0 || device >= st.devices)
		return leave(cudaErrorInvalidDevice);
	snprintf(pciBusId, (size_t)len, "0000:%02X:00.0", 0x41 + device);
	return leave(cudaSuccess);
}

/* Like CUDA 12: making a device current creates its context. */
API cudaError_t cudaSetDevice(int device)
{
	ENTER_NOCTX(NULL, NULL, 0, (unsigned int)device);
	if (device < 0 || device >= st.devices)
		return leave(cudaErrorInvalidDevice);
	*current_slot() = device;
	need_context();
	return leave(cudaSuccess);
}

API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags)
{
	struct CUstream_st *s;
	cudaError_t e;

	ENTER(stream, NULL, 0, flags);
	e = stream_new(flags, current(), &s);
	if (e)
		return leave(e);
	s->next = st.streams;
	st.streams = s;
	*stream = s;
	return leave(cudaSuccess);
}

API cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
	struct CUstream_st **pp, *s;

	ENTER(stream, NULL, 0, 0);
	for (pp = &st.streams; *pp && *pp != stream; pp = &(*pp)->next)
		;
	if (!(s = *pp) || s->per_thread)
		return leave(cudaErrorInvalidResourceHandle);
	*pp = s->next;
	stream_end(s);		/* its queued work still runs, as in CUDA */
	return leave(cudaSuccess);
}

API cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
	struct CUstream_st *s;

	ENTER(stream, NULL, 0, 0);
	s = stream_of(stream);
	if (!s)
		return leave(cudaErrorInvalidResourceHandle);
	force_until(stream_idle, s);
	return leave(cudaSuccess);
}

API cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
				    unsigned int flags)
{
	struct CUstream_st *s;

	ENTER(stream, event, 0, flags);
	s = stream_of(stream);
	if (!s || !event_ok(event))
		return leave(cudaErrorInvalidResourceHandle);
	/* waits for the record queued last before this call (none: no wait) */
	return leave(queue(s, &(struct op){ .kind = OP_WAIT, .ev = event,
					    .seq = event->recorded }));
}

static cudaError_t add_range(struct range **l, void *p, size_t len)
{
	struct range *r = malloc(sizeof(*r));

	if (!r)
		return cudaErrorMemoryAllocation;
	r->p = p;
	r->len = len;
	r->dev = current();
	r->next = *l;
	*l = r;
	return cudaSuccess;
}

static struct range *take_range(struct range **l, const void *p)
{
	struct range **pp, *r;

	for (pp = l; *pp && (*pp)->p != p; pp = &(*pp)->next)
		;
	r = *pp;
	if (r)
		*pp = r->next;
	return r;
}

API cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
	struct range *r;

	ENTER(ptr, NULL, size, flags);
	if (!ptr || !size)
		return leave(cudaErrorInvalidValue);
	for (r = st.regs; r; r = r->next)
		if ((char *)ptr < r->p + r->len && r->p < (char *)ptr + size)
			return leave(cudaErrorHostMemoryAlreadyRegistered);
	if (add_range(&st.regs, ptr, size))
		return leave(cudaErrorMemoryAllocation);
	st.regs->flags = flags;
	return leave(cudaSuccess);
}

static int reads_from(const struct op *o, const struct range *r)
{
	const char *src = o->src;

	return o->kind == OP_COPY && src < r->p + r->len && src + o->len > r->p;
}

/* Whether a copy running or queued on s reads from r. */
static int stream_reads(const struct CUstream_st *s, const struct range *r)
{
	const struct op *o;

	if (s->running && reads_from(s->running, r))
		return 1;
	for (o = s->head; o; o = o->next)
		if (reads_from(o, r))
			return 1;
	return 0;
}

/* Whether a copy on any stream still reads from r. */
static int copy_from(const struct range *r)
{
	const struct CUstream_st *s;
	int d;

	for (s = st.streams; s; s = s->next)
		if (stream_reads(s, r))
			return 1;
	for (d = 0; d < DEV_MAX; d++)
		if (st.legacy[d] && stream_reads(st.legacy[d], r))
			return 1;
	return 0;
}

API cudaError_t cudaHostUnregister(void *ptr)
{
	struct range *r;

	ENTER(ptr, NULL, 0, 0);
	r = take_range(&st.regs, ptr);
	if (!r)
		return leave(cudaErrorHostMemoryNotRegistered);
	if (copy_from(r))
		st.unregistered_in_flight++;	/* the DMA would read unpinned pages */
	free(r);
	return leave(cudaSuccess);
}

API cudaError_t cudaMalloc(void **devPtr, size_t size)
{
	void *p;

	ENTER(devPtr, NULL, size, 0);
	p = malloc(size ? size : 1);
	if (!p || add_range(&st.allocs, p, size)) {
		free(p);
		return leave(cudaErrorMemoryAllocation);
	}
	*devPtr = p;
	return leave(cudaSuccess);
}

API cudaError_t cudaFree(void *devPtr)
{
	struct range *r;

	ENTER(devPtr, NULL, 0, 0);
	force_until(device_idle, NULL);	/* cudaFree synchronizes */
	r = take_range(&st.allocs, devPtr);
	if (!r)
		return leave(cudaErrorInvalidValue);
	free(r->p);
	free(r);
	return leave(cudaSuccess);
}

API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
				enum cudaMemcpyKind kind, cudaStream_t stream)
{
	struct CUstream_st *s;

	ENTER(dst, src, count, (unsigned int)kind);
	s = stream_of(stream);
	if (!s)
		return leave(cudaErrorInvalidResourceHandle);
	if (kind == cudaMemcpyHostToDevice) {
		if (!device_mem_on(dst, count, s->dev))
			return leave(cudaErrorInvalidValue);
		if (!pinned_for(src, count, s->dev))
			st.unregistered_copies++;
	} else if (kind == cudaMemcpyDeviceToHost) {
		if (!device_mem_on(src, count, s->dev))
			return leave(cudaErrorInvalidValue);
	} else {
		return leave(cudaErrorInvalidMemcpyDirection);
	}
	return leave(queue(s, &(struct op){ .kind = OP_COPY, .dst = dst, .src = src,
					    .len = count, .delay_us = st.copy_delay_us }));
}

API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
	struct CUevent_st *e;

	ENTER(event, NULL, 0, flags);
	e = calloc(1, sizeof(*e));
	if (!e)
		return leave(cudaErrorMemoryAllocation);
	e->flags = flags;
	e->dev = current();
	e->next = st.events;
	st.events = e;
	*event = e;
	return leave(cudaSuccess);
}

API cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
	struct CUstream_st *s;

	ENTER(event, stream, 0, 0);
	s = stream_of(stream);
	/* the runtime refuses an event and a stream of different devices */
	if (!s || !event_ok(event) || event->dev != s->dev)
		return leave(cudaErrorInvalidResourceHandle);
	return leave(queue(s, &(struct op){ .kind = OP_RECORD, .ev = event,
					    .seq = ++event->recorded }));
}

API cudaError_t cudaEventQuery(cudaEvent_t event)
{
	ENTER(event, NULL, 0, 0);
	if (!event_ok(event))
		return leave(cudaErrorInvalidResourceHandle);
	return leave(event_reached(event) ? cudaSuccess : cudaErrorNotReady);
}

API cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
	ENTER(event, NULL, 0, 0);
	if (!event_ok(event))
		return leave(cudaErrorInvalidResourceHandle);
	force_until(event_reached, event);
	return leave(cudaSuccess);
}

API cudaError_t cudaEventDestroy(cudaEvent_t event)
{
	struct CUevent_st **pp, *e;

	ENTER(event, NULL, 0, 0);
	for (pp = &st.events; *pp && *pp != event; pp = &(*pp)->next)
		;
	if (!(e = *pp))
		return leave(cudaErrorInvalidResourceHandle);
	/* queued records and waits still name it: finish them first */
	force_until(device_idle, NULL);
	*pp = e->next;
	free(e);
	return leave(cudaSuccess);
}

API const char *cudaGetErrorName(cudaError_t error)
{
	switch (error) {
	case cudaSuccess: return "cudaSuccess";
	case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
	case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
	case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
	case cudaErrorNoDevice: return "cudaErrorNoDevice";
	case cudaErrorInitializationError: return "cudaErrorInitializationError";
	case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
	case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
	case cudaErrorNotReady: return "cudaErrorNotReady";
	case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
	case cudaErrorHostMemoryAlreadyRegistered: return "cudaErrorHostMemoryAlreadyRegistered";
	case cudaErrorHostMemoryNotRegistered: return "cudaErrorHostMemoryNotRegistered";
	default: return "cudaErrorUnknown";
	}
}

/* --- the driver calls of a device guard: primary contexts pushed and popped --- */

API CUresult cuInit(unsigned int flags)
{
	ENTER_DRV(NULL, NULL, 0, flags);
	return (CUresult)leave(cudaSuccess);
}

API CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	ENTER_DRV(device, NULL, 0, (unsigned int)ordinal);
	if (ordinal < 0 || ordinal >= st.devices)
		return (CUresult)leave((cudaError_t)CUDA_ERROR_INVALID_DEVICE);
	*device = ordinal;
	return (CUresult)leave(cudaSuccess);
}

API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	ENTER_DRV(pctx, NULL, 0, (unsigned int)dev);
	if (dev < 0 || dev >= st.devices)
		return (CUresult)leave((cudaError_t)CUDA_ERROR_INVALID_DEVICE);
	st.context[dev] = 1;
	st.retained[dev]++;
	*pctx = &st.primary[dev];
	return (CUresult)leave(cudaSuccess);
}

API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	ENTER_DRV(NULL, NULL, 0, (unsigned int)dev);
	if (dev < 0 || dev >= st.devices || !st.retained[dev])
		return (CUresult)leave((cudaError_t)CUDA_ERROR_INVALID_CONTEXT);
	st.retained[dev]--;
	return (CUresult)leave(cudaSuccess);
}

#ifndef CUDASTUB_NO_DRIVER	/* the variant of a runtime without the context calls */

API CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
	ENTER_DRV(ctx, NULL, 0, 0);
	current_slot();		/* forget a previous generation's stack */
	if (!ctx || t_depth == STACK_MAX)
		return (CUresult)leave((cudaError_t)CUDA_ERROR_INVALID_VALUE);
	t_stack[t_depth++] = ctx->dev;
	return (CUresult)leave(cudaSuccess);
}

API CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
	ENTER_DRV(pctx, NULL, 0, 0);
	current_slot();
	if (!t_depth)
		return (CUresult)leave((cudaError_t)CUDA_ERROR_INVALID_CONTEXT);
	t_depth--;
	if (pctx)
		*pctx = &st.primary[t_stack[t_depth]];
	return (CUresult)leave(cudaSuccess);
}

#endif

/* --- control side (cudastub.h) --- */

static void free_ranges(struct range **l, int free_mem)
{
	struct range *r;

	while ((r = *l)) {
		*l = r->next;
		if (free_mem)
			free(r->p);
		free(r);
	}
}

API void cudastub_reset(int devices, int count_err)
{
	struct CUevent_st *e;
	struct CUstream_st *s;
	int d;

	pthread_mutex_lock(&st.lock);
	st.hold = 0;
	while ((s = st.streams)) {
		st.streams = s->next;
		stream_end(s);
	}
	for (d = 0; d < DEV_MAX; d++)
		if ((s = st.legacy[d])) {
			st.legacy[d] = NULL;
			stream_end(s);
		}
	while ((e = st.events)) {
		st.events = e->next;
		free(e);
	}
	free_ranges(&st.regs, 0);
	free_ranges(&st.allocs, 1);
	memset(st.fails, 0, sizeof(st.fails));
	memset(st.context, 0, sizeof(st.context));
	memset(st.calls_on, 0, sizeof(st.calls_on));
	memset(st.retained, 0, sizeof(st.retained));
	st.nlog = 0;
	st.unregistered_copies = 0;
	st.unregistered_in_flight = 0;
	st.pending_copies = 0;
	st.pid = getpid();
	st.copy_delay_us = 0;
	st.devices = devices;
	st.count_err = count_err;
	st.generation++;
	pthread_mutex_unlock(&st.lock);
}

API void cudastub_fail(const char *fn, int nth, int err)
{
	int i;

	pthread_mutex_lock(&st.lock);
	for (i = 0; i < FAILS_MAX; i++)
		if (!st.fails[i].nth) {
			strncpy(st.fails[i].fn, fn, sizeof(st.fails[i].fn) - 1);
			st.fails[i].nth = nth;
			st.fails[i].err = err;
			break;
		}
	pthread_mutex_unlock(&st.lock);
}

API void cudastub_hold(int on)
{
	pthread_mutex_lock(&st.lock);
	st.hold = on;
	pthread_cond_broadcast(&st.cv);
	pthread_mutex_unlock(&st.lock);
}

API void cudastub_complete(void)
{
	pthread_mutex_lock(&st.lock);
	force_until(device_idle, NULL);
	pthread_mutex_unlock(&st.lock);
}

API void cudastub_copy_delay(unsigned int us)
{
	pthread_mutex_lock(&st.lock);
	st.copy_delay_us = us;
	pthread_mutex_unlock(&st.lock);
}

API void cudastub_mark(const char *label)
{
	pthread_mutex_lock(&st.lock);
	enter(label, NULL, NULL, 0, 0);
	pthread_mutex_unlock(&st.lock);
}

API int cudastub_kernel_read(void *stream, void *dst, const void *src, size_t len,
			     unsigned int delay_us)
{
	struct CUstream_st *s;

	ENTER(stream, src, len, delay_us);
	s = stream_of(stream);
	/* a kernel launches on the current device's streams only */
	if (!s || s->dev != current())
		return leave(cudaErrorInvalidResourceHandle);
	/* this device's memory, or pinned host memory (a consumer's own copy) */
	if (!device_mem_on(src, len, s->dev) && !pinned_for(src, len, s->dev))
		return leave(cudaErrorIllegalAddress);
	return leave(queue(s, &(struct op){ .kind = OP_KERNEL, .dst = dst, .src = src,
					    .len = len, .delay_us = delay_us }));
}

API int cudastub_log_count(void)
{
	return st.nlog;
}

API const struct cudastub_call *cudastub_log_at(int i)
{
	return i >= 0 && i < st.nlog ? &st.log[i] : NULL;
}

API int cudastub_find(const char *fn, int from)
{
	int i;

	for (i = from < 0 ? 0 : from; i < st.nlog; i++)
		if (!strcmp(st.log[i].fn, fn))
			return i;
	return -1;
}

/* Lock-free: a forked child asks with the parent's threads (and lock) gone. */
API int cudastub_calls_by(int pid)
{
	int i, n = 0;

	for (i = 0; i < st.nlog; i++)
		n += st.log[i].pid == pid;
	return n;
}

static int count_list(const void *head, size_t next_off)
{
	const void *p;
	int n = 0;

	for (p = head; p; p = *(const void *const *)((const char *)p + next_off))
		n++;
	return n;
}

API int cudastub_count(const char *what)
{
	int r = -1, d;

	pthread_mutex_lock(&st.lock);
	if (!strcmp(what, "registrations"))
		r = count_list(st.regs, offsetof(struct range, next));
	else if (!strcmp(what, "allocs"))
		r = count_list(st.allocs, offsetof(struct range, next));
	else if (!strcmp(what, "events"))
		r = count_list(st.events, offsetof(struct CUevent_st, next));
	else if (!strcmp(what, "streams"))
		r = count_list(st.streams, offsetof(struct CUstream_st, next));
	else if (!strcmp(what, "unregistered_copies"))
		r = st.unregistered_copies;
	else if (!strcmp(what, "unregistered_in_flight"))
		r = st.unregistered_in_flight;
	else if (!strcmp(what, "pending_copies"))
		r = st.pending_copies;
	else if (!strncmp(what, "context", 7) && (d = atoi(what + 7)) >= 0 && d < DEV_MAX)
		r = st.context[d];
	else if (!strncmp(what, "calls_on", 8) && (d = atoi(what + 8)) >= 0 && d < DEV_MAX)
		r = st.calls_on[d];
	else if (!strncmp(what, "retained", 8) && (d = atoi(what + 8)) >= 0 && d < DEV_MAX)
		r = st.retained[d];
	pthread_mutex_unlock(&st.lock);
	return r;
}
