// SPDX-License-Identifier: MIT
/*
 * Test-only stand-in for the CUDA runtime (see cudastub.h): device memory is
 * malloc'd, a copy is a memcpy run at once or held, an event is complete when
 * the copies queued before its record have run.  It checks what the real
 * runtime checks for the calls libpinmem makes (overlapping registration,
 * unknown pointers, streams and events) and returns the same error codes.
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cudastub.h"

#define API __attribute__((visibility("default")))
#define LOG_MAX 4096
#define FAILS_MAX 8

struct range {
	struct range *next;
	char *p;
	size_t len;
};

struct job {
	struct job *next;
	void *dst;
	const void *src;
	size_t len;
};

struct CUevent_st {
	struct CUevent_st *next;
	unsigned long seq;	/* copies queued when recorded */
	unsigned int flags;
};

struct CUstream_st {
	struct CUstream_st *next;
	unsigned int flags;
};

static struct {
	pthread_mutex_t lock;
	int devices, count_err, hold;
	struct cudastub_call log[LOG_MAX];
	int nlog;
	struct { char fn[40]; int nth, err; } fails[FAILS_MAX];
	struct range *regs, *allocs;
	struct job *queue, **tail;
	unsigned long queued, done;
	struct CUevent_st *events;
	struct CUstream_st *streams;
	int unregistered_copies;
} st = { .lock = PTHREAD_MUTEX_INITIALIZER, .devices = 1, .tail = &st.queue };

/* Log the call; the error injected for it, or cudaSuccess. */
static cudaError_t enter(const char *fn, const void *a, const void *b, size_t len,
			 unsigned int flags)
{
	struct cudastub_call *c = NULL;
	cudaError_t err = cudaSuccess;
	int i;

	if (st.nlog < LOG_MAX) {
		c = &st.log[st.nlog++];
		strncpy(c->fn, fn, sizeof(c->fn) - 1);
		c->a = a;
		c->b = b;
		c->len = len;
		c->flags = flags;
		c->ret = cudaSuccess;
	}
	for (i = 0; i < FAILS_MAX; i++)
		if (st.fails[i].nth && !strcmp(st.fails[i].fn, fn) && !--st.fails[i].nth)
			err = (cudaError_t)st.fails[i].err;
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

#define ENTER(a, b, len, flags)						\
	do {								\
		cudaError_t e_;						\
		pthread_mutex_lock(&st.lock);				\
		e_ = enter(__func__, a, b, len, flags);			\
		if (e_ != cudaSuccess)					\
			return leave(e_);				\
	} while (0)

static struct range *within(struct range *l, const void *p, size_t len)
{
	const char *a = p;

	for (; l; l = l->next)
		if (a >= l->p && len <= l->len && (size_t)(a - l->p) <= l->len - len)
			return l;
	return NULL;
}

static void run_until(unsigned long seq)
{
	struct job *j;

	while (st.done < seq && (j = st.queue)) {
		st.queue = j->next;
		if (!st.queue)
			st.tail = &st.queue;
		memcpy(j->dst, j->src, j->len);
		free(j);
		st.done++;
	}
}

static int stream_ok(cudaStream_t s)
{
	struct CUstream_st *p;

	for (p = st.streams; p; p = p->next)
		if (p == s)
			return 1;
	return 0;
}

static int event_ok(cudaEvent_t e)
{
	struct CUevent_st *p;

	for (p = st.events; p; p = p->next)
		if (p == e)
			return 1;
	return 0;
}

API cudaError_t cudaGetDeviceCount(int *count)
{
	ENTER(count, NULL, 0, 0);
	if (st.count_err)
		return leave((cudaError_t)st.count_err);
	*count = st.devices;
	return leave(cudaSuccess);
}

API cudaError_t cudaSetDevice(int device)
{
	ENTER(NULL, NULL, 0, (unsigned int)device);
	return leave(device < 0 || device >= st.devices ? cudaErrorInvalidDevice : cudaSuccess);
}

API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags)
{
	struct CUstream_st *s;

	ENTER(stream, NULL, 0, flags);
	s = calloc(1, sizeof(*s));
	if (!s)
		return leave(cudaErrorMemoryAllocation);
	s->flags = flags;
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
	if (!(s = *pp))
		return leave(cudaErrorInvalidResourceHandle);
	*pp = s->next;
	free(s);
	return leave(cudaSuccess);
}

API cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
	ENTER(stream, NULL, 0, 0);
	if (!stream_ok(stream))
		return leave(cudaErrorInvalidResourceHandle);
	run_until(st.queued);
	return leave(cudaSuccess);
}

static cudaError_t add_range(struct range **l, void *p, size_t len)
{
	struct range *r = malloc(sizeof(*r));

	if (!r)
		return cudaErrorMemoryAllocation;
	r->p = p;
	r->len = len;
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
	return leave(add_range(&st.regs, ptr, size));
}

API cudaError_t cudaHostUnregister(void *ptr)
{
	struct range *r;

	ENTER(ptr, NULL, 0, 0);
	r = take_range(&st.regs, ptr);
	if (!r)
		return leave(cudaErrorHostMemoryNotRegistered);
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
	run_until(st.queued);	/* cudaFree synchronizes */
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
	struct job *j;

	ENTER(dst, src, count, (unsigned int)kind);
	if (!stream_ok(stream))
		return leave(cudaErrorInvalidResourceHandle);
	if (kind == cudaMemcpyHostToDevice) {
		if (!within(st.allocs, dst, count))
			return leave(cudaErrorInvalidValue);
		if (!within(st.regs, src, count))
			st.unregistered_copies++;
	} else if (kind == cudaMemcpyDeviceToHost) {
		if (!within(st.allocs, src, count))
			return leave(cudaErrorInvalidValue);
	} else {
		return leave(cudaErrorInvalidMemcpyDirection);
	}
	j = calloc(1, sizeof(*j));
	if (!j)
		return leave(cudaErrorMemoryAllocation);
	j->dst = dst;
	j->src = src;
	j->len = count;
	*st.tail = j;
	st.tail = &j->next;
	st.queued++;
	if (!st.hold)
		run_until(st.queued);
	return leave(cudaSuccess);
}

API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
	struct CUevent_st *e;

	ENTER(event, NULL, 0, flags);
	e = calloc(1, sizeof(*e));
	if (!e)
		return leave(cudaErrorMemoryAllocation);
	e->flags = flags;
	e->next = st.events;
	st.events = e;
	*event = e;
	return leave(cudaSuccess);
}

API cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
	ENTER(event, stream, 0, 0);
	if (!event_ok(event) || !stream_ok(stream))
		return leave(cudaErrorInvalidResourceHandle);
	event->seq = st.queued;
	return leave(cudaSuccess);
}

API cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
				    unsigned int flags)
{
	ENTER(stream, event, 0, flags);
	if (!event_ok(event) || !stream_ok(stream))
		return leave(cudaErrorInvalidResourceHandle);
	return leave(cudaSuccess);	/* one queue: already in order */
}

API cudaError_t cudaEventQuery(cudaEvent_t event)
{
	ENTER(event, NULL, 0, 0);
	if (!event_ok(event))
		return leave(cudaErrorInvalidResourceHandle);
	return leave(st.done >= event->seq ? cudaSuccess : cudaErrorNotReady);
}

API cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
	ENTER(event, NULL, 0, 0);
	if (!event_ok(event))
		return leave(cudaErrorInvalidResourceHandle);
	run_until(event->seq);
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
	case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
	case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
	case cudaErrorNotReady: return "cudaErrorNotReady";
	case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
	case cudaErrorHostMemoryAlreadyRegistered: return "cudaErrorHostMemoryAlreadyRegistered";
	case cudaErrorHostMemoryNotRegistered: return "cudaErrorHostMemoryNotRegistered";
	default: return "cudaErrorUnknown";
	}
}

/* Control side (cudastub.h). */

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
	struct job *j;

	pthread_mutex_lock(&st.lock);
	while ((j = st.queue)) {
		st.queue = j->next;
		free(j);
	}
	st.tail = &st.queue;
	while ((e = st.events)) {
		st.events = e->next;
		free(e);
	}
	while ((s = st.streams)) {
		st.streams = s->next;
		free(s);
	}
	free_ranges(&st.regs, 0);
	free_ranges(&st.allocs, 1);
	memset(st.fails, 0, sizeof(st.fails));
	st.nlog = 0;
	st.queued = st.done = 0;
	st.hold = 0;
	st.unregistered_copies = 0;
	st.devices = devices;
	st.count_err = count_err;
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
	pthread_mutex_unlock(&st.lock);
}

API void cudastub_complete(void)
{
	pthread_mutex_lock(&st.lock);
	run_until(st.queued);
	pthread_mutex_unlock(&st.lock);
}

API void cudastub_mark(const char *label)
{
	pthread_mutex_lock(&st.lock);
	enter(label, NULL, NULL, 0, 0);
	pthread_mutex_unlock(&st.lock);
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
	if (!strcmp(what, "registrations"))
		return count_list(st.regs, offsetof(struct range, next));
	if (!strcmp(what, "allocs"))
		return count_list(st.allocs, offsetof(struct range, next));
	if (!strcmp(what, "events"))
		return count_list(st.events, offsetof(struct CUevent_st, next));
	if (!strcmp(what, "streams"))
		return count_list(st.streams, offsetof(struct CUstream_st, next));
	if (!strcmp(what, "unregistered_copies"))
		return st.unregistered_copies;
	return -1;
}
