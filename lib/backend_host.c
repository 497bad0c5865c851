// SPDX-License-Identifier: MIT
/*
 * The host copy backend: "device" memory is ordinary memory and one worker
 * thread performs the queued copies in order, so the whole pipeline (async
 * copies, events, slot recycling) runs and is tested on machines without a
 * GPU.  It checks what CUDA would refuse: a copy outside device memory, an
 * overlapping host registration, an unknown pointer or event.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

struct host_range {
	struct host_range *next;
	uint8_t *p;
	size_t len;
};

struct host_job {
	void *dst;
	const void *src;
	size_t len;
};

/* An event is complete once the copies up to seq have run. */
struct host_event {
	uint64_t id;
	uint64_t seq;
};

struct host_be {
	struct pm_backend be;
	pthread_mutex_t lock;
	pthread_cond_t work, done;
	pthread_t thread;
	bool stop;
	struct host_job *q;		/* ring of queued copies */
	size_t qcap, qhead, qlen;
	uint64_t submitted, completed;	/* copy sequence numbers, from 1 */
	struct host_event *events;	/* live events */
	size_t nevents, evcap;
	uint64_t next_id;		/* event ids, from 1 */
	struct host_range *devs;	/* dev_alloc'd memory */
	struct host_range *regs;	/* registered host memory */
};

static struct host_be *hb(struct pm_backend *be)
{
	return (struct host_be *)be;
}

static void *worker(void *arg)
{
	struct host_be *h = arg;
	struct host_job j;

	/* not the name of the thread that started it (a stream's reader) */
	pthread_setname_np(pthread_self(), "pinmem-copy");
	pthread_mutex_lock(&h->lock);
	for (;;) {
		while (!h->qlen && !h->stop)
			pthread_cond_wait(&h->work, &h->lock);
		if (!h->qlen)
			break;
		j = h->q[h->qhead];
		pthread_mutex_unlock(&h->lock);
		if (j.len)
			memcpy(j.dst, j.src, j.len);
		pthread_mutex_lock(&h->lock);
		h->qhead = (h->qhead + 1) % h->qcap;
		h->qlen--;
		h->completed++;
		pthread_cond_broadcast(&h->done);
	}
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

static struct host_range *find_range(struct host_range *list, const void *p,
				     size_t len)
{
	const uint8_t *a = p;

	for (; list; list = list->next)
		if (a >= list->p && len <= list->len &&
		    (size_t)(a - list->p) <= list->len - len)
			return list;
	return NULL;
}

static bool overlaps(struct host_range *list, const void *p, size_t len)
{
	const uint8_t *a = p;

	for (; list; list = list->next)
		if (a < list->p + list->len && list->p < a + len)
			return true;
	return false;
}

static int add_range(struct host_range **list, void *p, size_t len)
{
	struct host_range *r = malloc(sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->p = p;
	r->len = len;
	r->next = *list;
	*list = r;
	return 0;
}

/* Unlink the range starting at p; NULL if none. */
static struct host_range *take_range(struct host_range **list, const void *p)
{
	struct host_range **pp, *r;

	for (pp = list; *pp && (*pp)->p != p; pp = &(*pp)->next)
		;
	r = *pp;
	if (r)
		*pp = r->next;
	return r;
}

static void wait_all(struct host_be *h)
{
	uint64_t upto = h->submitted;

	while (h->completed < upto)
		pthread_cond_wait(&h->done, &h->lock);
}

static int host_register(struct pm_backend *be, void *ptr, size_t len)
{
	struct host_be *h = hb(be);
	int r;

	pthread_mutex_lock(&h->lock);
	if (overlaps(h->regs, ptr, len))
		r = pm_backend_error(be, -EEXIST, "%p + %zu overlaps memory already registered",
				     ptr, len);
	else
		r = add_range(&h->regs, ptr, len);
	pthread_mutex_unlock(&h->lock);
	return r;
}

static int host_unregister(struct pm_backend *be, void *ptr)
{
	struct host_be *h = hb(be);
	struct host_range *r;

	pthread_mutex_lock(&h->lock);
	r = take_range(&h->regs, ptr);
	if (r)
		wait_all(h);	/* as the cuda backend: copies queued from it finish first */
	pthread_mutex_unlock(&h->lock);
	if (!r)
		return pm_backend_error(be, -ENOENT, "%p is not registered", ptr);
	free(r);
	return 0;
}

static int host_dev_alloc(struct pm_backend *be, size_t len, void **devp)
{
	struct host_be *h = hb(be);
	void *p = malloc(len);
	int r;

	if (!p)
		return pm_backend_error(be, -ENOMEM, "malloc of %zu bytes failed", len);
	pthread_mutex_lock(&h->lock);
	r = add_range(&h->devs, p, len);
	pthread_mutex_unlock(&h->lock);
	if (r) {
		free(p);
		return pm_backend_error(be, r, "out of memory");
	}
	*devp = p;
	return 0;
}

static int host_dev_free(struct pm_backend *be, void *dev)
{
	struct host_be *h = hb(be);
	struct host_range *r;

	pthread_mutex_lock(&h->lock);
	r = take_range(&h->devs, dev);
	/* Like cudaFree: copies still queued may target it. */
	if (r)
		wait_all(h);
	pthread_mutex_unlock(&h->lock);
	if (!r)
		return pm_backend_error(be, -EINVAL, "%p is not device memory from pm_dev_alloc",
					dev);
	free(r->p);
	free(r);
	return 0;
}

static int grow(void **arr, size_t *cap, size_t elem)
{
	size_t n = *cap ? *cap * 2 : 16;
	void *p = realloc(*arr, n * elem);

	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = n;
	return 0;
}

static int grow_queue(struct host_be *h)
{
	size_t old = h->qcap, tail, i;
	int r = grow((void **)&h->q, &h->qcap, sizeof(*h->q));

	if (r)
		return r;
	/* Unwrap the ring: the part before qhead moves behind the old end. */
	tail = h->qhead + h->qlen > old ? h->qhead + h->qlen - old : 0;
	for (i = 0; i < tail; i++)
		h->q[old + i] = h->q[i];
	return 0;
}

/* A new live event complete when copy seq has run (h->lock held, room made). */
static uint64_t add_event(struct host_be *h, uint64_t seq)
{
	h->events[h->nevents++] = (struct host_event){ ++h->next_id, seq };
	return h->next_id;
}

static int host_copy_h2d(struct pm_backend *be, void *dst, const void *src,
			 size_t len, uint64_t *evp)
{
	struct host_be *h = hb(be);
	int r = 0;

	pthread_mutex_lock(&h->lock);
	if (!find_range(h->devs, dst, len)) {
		r = pm_backend_error(be, -EINVAL,
				     "destination %p + %zu is not inside device memory from pm_dev_alloc",
				     dst, len);
		goto out;
	}
	if ((h->qlen == h->qcap && grow_queue(h)) ||
	    (evp && h->nevents == h->evcap &&
	     grow((void **)&h->events, &h->evcap, sizeof(*h->events)))) {
		r = pm_backend_error(be, -ENOMEM, "out of memory queueing a copy");
		goto out;
	}
	h->q[(h->qhead + h->qlen) % h->qcap] = (struct host_job){ dst, src, len };
	h->qlen++;
	h->submitted++;
	if (evp)
		*evp = add_event(h, h->submitted);
	pthread_cond_signal(&h->work);
out:
	pthread_mutex_unlock(&h->lock);
	return r;
}

static int host_copy_d2h(struct pm_backend *be, void *dst, const void *src,
			 size_t len)
{
	struct host_be *h = hb(be);
	int r = 0;

	pthread_mutex_lock(&h->lock);
	if (!find_range(h->devs, src, len))
		r = pm_backend_error(be, -EINVAL,
				     "source %p + %zu is not inside device memory from pm_dev_alloc",
				     src, len);
	else
		wait_all(h);
	pthread_mutex_unlock(&h->lock);
	if (!r && len)
		memcpy(dst, src, len);
	return r;
}

/* Index of live event ev, or -1 (with the error recorded). */
static ssize_t find_event(struct host_be *h, uint64_t ev)
{
	size_t i;

	for (i = 0; i < h->nevents; i++)
		if (h->events[i].id == ev)
			return (ssize_t)i;
	pm_backend_error(&h->be, -EINVAL, "event %llu is unknown or released",
			 (unsigned long long)ev);
	return -1;
}

static int host_event_query(struct pm_backend *be, uint64_t ev)
{
	struct host_be *h = hb(be);
	int r;

	ssize_t i;

	pthread_mutex_lock(&h->lock);
	i = find_event(h, ev);
	r = i < 0 ? -EINVAL : h->completed >= h->events[i].seq;
	pthread_mutex_unlock(&h->lock);
	return r;
}

static int host_event_wait(struct pm_backend *be, uint64_t ev)
{
	struct host_be *h = hb(be);
	ssize_t i;
	uint64_t seq;
	int r = 0;

	pthread_mutex_lock(&h->lock);
	i = find_event(h, ev);
	if (i < 0) {
		r = -EINVAL;
	} else {
		seq = h->events[i].seq;
		while (h->completed < seq)
			pthread_cond_wait(&h->done, &h->lock);
	}
	pthread_mutex_unlock(&h->lock);
	return r;
}

/*
 * There are no device streams here: a consumer's work on the host is done
 * when it releases, so the event covers the copies queued so far.
 */
static int host_record_on(struct pm_backend *be, void *stream, uint64_t *evp)
{
	struct host_be *h = hb(be);
	int r = 0;

	pthread_mutex_lock(&h->lock);
	if (h->nevents == h->evcap &&
	    grow((void **)&h->events, &h->evcap, sizeof(*h->events)))
		r = pm_backend_error(be, -ENOMEM, "out of memory for an event");
	else
		*evp = add_event(h, h->submitted);
	pthread_mutex_unlock(&h->lock);
	return r;
}

/* The caller's "stream" is the caller: wait here. */
static int host_stream_wait(struct pm_backend *be, void *stream, uint64_t ev)
{
	return host_event_wait(be, ev);
}

static int host_event_release(struct pm_backend *be, uint64_t ev)
{
	struct host_be *h = hb(be);
	ssize_t i;

	pthread_mutex_lock(&h->lock);
	i = find_event(h, ev);
	if (i >= 0)
		h->events[i] = h->events[--h->nevents];
	pthread_mutex_unlock(&h->lock);
	return i < 0 ? -EINVAL : 0;
}

static void free_ranges(struct host_range *r, bool free_mem)
{
	struct host_range *next;

	for (; r; r = next) {
		next = r->next;
		if (free_mem)
			free(r->p);
		free(r);
	}
}

static void host_destroy(struct pm_backend *be)
{
	struct host_be *h = hb(be);

	pthread_mutex_lock(&h->lock);
	h->stop = true;
	pthread_cond_signal(&h->work);
	pthread_mutex_unlock(&h->lock);
	pthread_join(h->thread, NULL);
	free_ranges(h->devs, true);
	free_ranges(h->regs, false);
	free(h->q);
	free(h->events);
	pthread_cond_destroy(&h->work);
	pthread_cond_destroy(&h->done);
	pthread_mutex_destroy(&h->lock);
	pm_backend_fini(be);
	free(h);
}

static const struct pm_backend_ops host_ops = {
	.name = "host",
	.register_host = host_register,
	.unregister_host = host_unregister,
	.dev_alloc = host_dev_alloc,
	.dev_free = host_dev_free,
	.copy_h2d = host_copy_h2d,
	.copy_d2h = host_copy_d2h,
	.event_query = host_event_query,
	.event_wait = host_event_wait,
	.event_release = host_event_release,
	.record_on = host_record_on,
	.stream_wait = host_stream_wait,
	.destroy = host_destroy,
};

int pm_backend_host_create(struct pm_backend **bep)
{
	struct host_be *h = calloc(1, sizeof(*h));
	int r;

	if (!h)
		return -ENOMEM;
	pm_backend_init(&h->be, &host_ops);
	pthread_mutex_init(&h->lock, NULL);
	pthread_cond_init(&h->work, NULL);
	pthread_cond_init(&h->done, NULL);
	r = pthread_create(&h->thread, NULL, worker, h);
	if (r) {
		pthread_cond_destroy(&h->work);
		pthread_cond_destroy(&h->done);
		pthread_mutex_destroy(&h->lock);
		pm_backend_fini(&h->be);
		free(h);
		return -r;
	}
	*bep = &h->be;
	return 0;
}
