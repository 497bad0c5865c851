/* SPDX-License-Identifier: MIT */
/*
 * libpinmem: pinned host buffers for GPU data loading.
 *
 * A context (pm_open) finds what the machine offers: /dev/pinmem and its ABI,
 * a copy backend (cuda when built with the CUDA Toolkit and a GPU is present,
 * else host), io_uring, huge pages.  Buffers (pm_buf_alloc) are anonymous
 * memory, faulted in by several threads, pinned through the module or mlock,
 * registered with the copy backend, and registrable with io_uring.
 *
 * Conventions (liburing style): calls return 0 or a negative errno; there is
 * no global state; every object has a create and a destroy call.  After a
 * failing call on a context, pm_ctx_last_error() gives one sentence a person
 * can act on.  Thread safety is stated per call: "any thread" means the call
 * may run concurrently with any other call on the same context except
 * pm_close(); "one thread" means the caller serializes it against calls on the
 * same object.  Options structs may be NULL for defaults; zero-initialised
 * options are the defaults; unknown flags and non-zero reserved fields are
 * -EINVAL (new options will be carved out of the reserved fields, so a
 * program built against this header keeps working with later libraries).
 *
 * Fork: buffers from pm_buf_alloc (and stream slots) are MADV_DONTFORK, so a
 * forked child (DataLoader workers) neither copies nor maps them; memory
 * given to pm_buf_pin_inplace keeps its own fork behaviour (a MAP_SHARED
 * ring stays shared).  A context or stream used in a forked child fails with
 * -ECHILD and a sentence; pm_close and pm_stream_destroy there only free the
 * child's bookkeeping.
 */
#ifndef PINMEM_H
#define PINMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef PM_API
#define PM_API __attribute__((visibility("default")))
#endif

struct io_uring;
struct pm_ctx;
struct pm_buf;

/* How a buffer is kept resident, best first. */
enum pm_pin_mode {
	PM_PIN_AUTO = 0,	/* request only: module if usable, else mlock */
	PM_PIN_MODULE,		/* pinned by /dev/pinmem (FOLL_LONGTERM, budgeted) */
	PM_PIN_MLOCK,		/* mlock(2): resident, but CUDA still stages it */
	PM_PIN_NONE,		/* ordinary pageable memory */
};

/* Which pages back a buffer. */
enum pm_page_kind {
	PM_PAGES_DEFAULT = 0,	/* base pages (THP may still apply system-wide) */
	PM_PAGES_THP,		/* 2 MiB-aligned, madvise(MADV_HUGEPAGE) */
	PM_PAGES_HUGETLB,	/* MAP_HUGETLB from the hugetlb pool */
};

/* Copy backend of a context. */
enum pm_backend_kind {
	PM_BACKEND_AUTO = 0,	/* cuda if it works; host only on a machine without NVIDIA GPUs (a GPU cuda cannot use is -ENODEV) */
	PM_BACKEND_HOST,	/* worker thread copying into malloc'd "device" memory */
	PM_BACKEND_CUDA,	/* CUDA runtime, loaded with dlopen */
	PM_BACKEND_NONE,	/* no copies; buffers are not registered anywhere */
};

/* pm_open_opts.flags */
#define PM_OPEN_NO_MODULE	(1U << 0)	/* do not use /dev/pinmem */
#define PM_OPEN_REQUIRE_MODULE	(1U << 1)	/* fail without a usable module (-ENODEV, open's errno, -EPROTO) */

/*
 * pm_open_opts.cuda_device: the opening thread's current CUDA device
 * (cudaGetDevice, which creates no context), so that a process that called
 * cudaSetDevice(LOCAL_RANK) (torch.cuda.set_device) gets its own GPU rather
 * than a context on GPU 0.  pm_ctx_info.cuda_device says which it was.
 */
#define PM_CUDA_DEVICE_CURRENT	(-1)

struct pm_open_opts {
	unsigned int flags;		/* PM_OPEN_* */
	enum pm_backend_kind backend;	/* PM_BACKEND_AUTO by default */
	const char *device;		/* NULL: PINMEM_DEVICE ("/dev/pinmem") */
	const char *cuda_library;	/* NULL: $PINMEM_CUDART, else libcudart.so.N */
	int cuda_device;		/* CUDA device ordinal, default 0; or PM_CUDA_DEVICE_CURRENT */
	char *errbuf;			/* if set, pm_open's failure sentence goes here */
	size_t errbuf_len;
	uint64_t reserved[4];		/* must be zero */
};

/* What a context found; strings live as long as the context. */
struct pm_ctx_info {
	bool module;			/* /dev/pinmem open and its ABI accepted */
	uint32_t module_abi_major;	/* 0 when !module */
	uint32_t module_abi_minor;
	const char *module_note;	/* why the module is not used, "" if it is */
	const char *backend;		/* "cuda", "host" or "none" */
	const char *backend_note;	/* why AUTO picked host (no GPU here), "" otherwise */
	bool uring;			/* io_uring_queue_init works */
	bool thp;			/* THP is "always" or "madvise" */
	bool hugetlb;			/* free pages in the default hugetlb pool */
	uint64_t hugetlb_page_size;	/* bytes, 0 when unknown */
	uint64_t hugetlb_free_pages;
	uint32_t page_size;
	uint32_t pad;
	int32_t cuda_device;		/* the CUDA device of a cuda backend, -1 otherwise */
	int32_t gpu_numa_node;		/* its NUMA node, -1 when unknown or no GPU */
	uint64_t reserved[3];		/* zero */
};

/* pm_buf_opts.flags */
#define PM_BUF_STRICT_PIN	(1U << 0)	/* fail rather than get a lesser pin mode */
#define PM_BUF_STRICT_PAGES	(1U << 1)	/* fail rather than get a lesser page kind */
#define PM_BUF_STRICT		(PM_BUF_STRICT_PIN | PM_BUF_STRICT_PAGES)
#define PM_BUF_NO_BACKEND	(1U << 2)	/* do not register with the copy backend */

/*
 * Pin modes step down (module -> mlock) only when the better one is
 * unavailable: no usable module, or a mapping the module cannot pin
 * (EOPNOTSUPP).  A budget refusal is always an error, never a step down:
 * -ENOSPC (global), -EDQUOT (per user), -ENOMEM (RLIMIT_MEMLOCK, for the
 * module and for mlock alike; pm_ctx_last_error() tells it from an ENOMEM
 * no budget counted).  PM_PIN_AUTO never yields PM_PIN_NONE; ask
 * for PM_PIN_NONE to get pageable memory.  Page kinds step down hugetlb ->
 * THP -> default.  Every step down is explained by pm_buf_note().
 */
struct pm_buf_opts {
	enum pm_pin_mode pin;		/* requested mode, PM_PIN_AUTO by default */
	enum pm_page_kind pages;	/* requested pages, PM_PAGES_DEFAULT by default */
	unsigned int flags;		/* PM_BUF_* */
	unsigned int fault_threads;	/* threads faulting pages in; 0: automatic */
	uint32_t numa;			/* pm_buf_alloc's NUMA node: PM_NUMA_* */
	uint64_t reserved[4];		/* must be zero */
};

/*
 * NUMA placement of pm_buf_alloc memory (pm_buf_opts.numa, pm_stream_opts.numa):
 * AUTO puts a cuda context's buffers on its GPU's node (the PCI device's
 * numa_node in sysfs) with mbind before the pages are faulted, by threads on
 * that node's CPUs; the node obtained is pm_buf_numa_node().  Caller-owned
 * memory (pm_buf_pin_inplace) is never moved.
 */
#define PM_NUMA_AUTO		0U		/* the GPU's node if known, else first touch */
#define PM_NUMA_NONE		1U		/* first touch (no placement) */
#define PM_NUMA_NODE(n)		((uint32_t)(n) + 2U)	/* node n; -EINVAL if it has no memory */

/* io_uring registers at most 1 GiB per iovec. */
#define PM_URING_IOVEC_MAX	(1ULL << 30)

/* The library's version, "MAJOR.MINOR.PATCH" (a program may run against a newer library than its header).  Any thread. */
PM_API const char *pm_version(void);

/* Open a context; *ctxp is set on success.  Any thread. */
PM_API int pm_open(struct pm_ctx **ctxp, const struct pm_open_opts *opts);
/* Free every buffer and device allocation still held, then the context.  One thread, last call. */
PM_API void pm_close(struct pm_ctx *ctx);
/* Describe what the context found.  Any thread. */
PM_API int pm_ctx_info(struct pm_ctx *ctx, struct pm_ctx_info *info);
/* Sentence explaining this thread's last failing call on ctx, "" if none; valid until this thread's next failure.  Any thread. */
PM_API const char *pm_ctx_last_error(struct pm_ctx *ctx);

/* Allocate, fault in, pin and register a buffer of >= size bytes (rounded up to pages).  Any thread. */
PM_API int pm_buf_alloc(struct pm_ctx *ctx, size_t size,
			const struct pm_buf_opts *opts, struct pm_buf **bufp);
/* Pin and register caller-owned memory; ptr and len must be page-aligned (-EINVAL).  Any thread. */
PM_API int pm_buf_pin_inplace(struct pm_ctx *ctx, void *ptr, size_t len,
			      const struct pm_buf_opts *opts, struct pm_buf **bufp);
/* Undo everything in reverse order; -EINVAL if buf is not a live buffer of ctx, -EBUSY while io_uring-registered.  Any thread. */
PM_API int pm_buf_free(struct pm_ctx *ctx, struct pm_buf *buf);

/* Start of the buffer.  Any thread. */
PM_API void *pm_buf_ptr(const struct pm_buf *buf);
/* Usable bytes (the size asked for, rounded up to pages).  Any thread. */
PM_API size_t pm_buf_size(const struct pm_buf *buf);
/* Pin mode obtained: PM_PIN_MODULE, PM_PIN_MLOCK or PM_PIN_NONE.  Any thread. */
PM_API enum pm_pin_mode pm_buf_pin_mode(const struct pm_buf *buf);
/* Page kind obtained.  Any thread. */
PM_API enum pm_page_kind pm_buf_page_kind(const struct pm_buf *buf);
/* Bytes backed by PMD-sized or larger pages: the module's count, else read from
 * /proc/self/smaps at the first call (not while pinning: it is slow) and kept, a
 * snapshot of that moment (0 while smaps cannot be read).  Any thread. */
PM_API uint64_t pm_buf_huge_bytes(const struct pm_buf *buf);
/* Physically contiguous runs reported by the module; 0 when not module-pinned.  Any thread. */
PM_API uint64_t pm_buf_segments(const struct pm_buf *buf);
/* True when the copy backend registered the buffer (cudaHostRegister).  Any thread. */
PM_API bool pm_buf_backend_registered(const struct pm_buf *buf);
/* NUMA node of the buffer's first page when it was placed (PM_NUMA_*), -1 when not.  Any thread. */
PM_API int pm_buf_numa_node(const struct pm_buf *buf);
/* Why the buffer got less than it asked for, "" if it did not.  Any thread. */
PM_API const char *pm_buf_note(const struct pm_buf *buf);

/* Fill iov with iovecs covering buf, each <= 1 GiB and a multiple of unit (0: no unit) so no unit straddles two; returns the count needed, or -errno.  Any thread. */
PM_API int pm_buf_iovecs(const struct pm_buf *buf, size_t unit,
			 struct iovec *iov, unsigned int max);
/* io_uring_register_buffers() of pm_buf_iovecs(buf, unit); fixed buffer i is iovec i.  One thread per ring. */
PM_API int pm_buf_register_uring(struct pm_buf *buf, struct io_uring *ring,
				 size_t unit);
/* io_uring_unregister_buffers() of a ring buf was registered with.  One thread per ring. */
PM_API int pm_buf_unregister_uring(struct pm_buf *buf, struct io_uring *ring);

/* Allocate len bytes of device memory (host backend: ordinary memory).  Any thread. */
PM_API int pm_dev_alloc(struct pm_ctx *ctx, size_t len, void **devp);
/* Free device memory from pm_dev_alloc; -EINVAL if unknown.  Any thread. */
PM_API int pm_dev_free(struct pm_ctx *ctx, void *dev);
/* Queue an async copy host -> device, in order after earlier copies; *ev (if ev) names its completion.  Any thread. */
PM_API int pm_copy_h2d(struct pm_ctx *ctx, void *dst_dev, const void *src_host,
		       size_t len, uint64_t *ev);
/* Synchronous copy device -> host, after all queued copies.  Any thread. */
PM_API int pm_copy_d2h(struct pm_ctx *ctx, void *dst_host, const void *src_dev,
		       size_t len);
/* 1 if the copies up to ev are done, 0 if pending, -errno if one failed.  Any thread. */
PM_API int pm_event_query(struct pm_ctx *ctx, uint64_t ev);
/* Wait until the copies up to ev are done; 0 or the copy's -errno.  Any thread. */
PM_API int pm_event_wait(struct pm_ctx *ctx, uint64_t ev);
/* Forget ev (its resources are reused); -EINVAL if unknown.  Any thread. */
PM_API int pm_event_release(struct pm_ctx *ctx, uint64_t ev);

/* "auto", "module", "mlock" or "none". */
PM_API const char *pm_pin_mode_name(enum pm_pin_mode mode);
/* "default", "thp" or "hugetlb". */
PM_API const char *pm_page_kind_name(enum pm_page_kind kind);

#ifdef __cplusplus
}
#endif

#endif /* PINMEM_H */
