// SPDX-License-Identifier: MIT
/*
 * lib/backend_cuda.c against the test-only CUDA runtime stand-in
 * (tests/cuda_stub/): device selection, the device guard on every thread
 * (no context on a device nobody chose, every thread keeps its device), the
 * non-blocking stream and events made up front on the chosen device,
 * registration order around pinning, copies, events and their reuse, a
 * failed event record that leaves no copy running, the CUDA error codes
 * turned into errno and sentences, and teardown.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "pinmem.h"
#include "cudastub.h"
#include "pm_test.h"

static const char *stub_path;
static cudastub_reset_fn *stub_reset;
static cudastub_fail_fn *stub_fail;
static cudastub_hold_fn *stub_hold;
static cudastub_complete_fn *stub_complete;
static cudastub_mark_fn *stub_mark;
static cudastub_log_at_fn *stub_log_at;
static cudastub_log_count_fn *stub_log_count;
static cudastub_find_fn *stub_find;
static cudastub_count_fn *stub_count;
static __typeof__(cudaGetDevice) *rt_get_device;
static __typeof__(cudaSetDevice) *rt_set_device;
static __typeof__(cudaStreamCreateWithFlags) *rt_stream_create;
static __typeof__(cudaStreamSynchronize) *rt_stream_sync;
static __typeof__(cudaStreamDestroy) *rt_stream_destroy;
static __typeof__(cudaMalloc) *rt_malloc;
static __typeof__(cudaFree) *rt_free;
static __typeof__(cudaMemcpyAsync) *rt_memcpy_async;

static void mark(const char *what)
{
	stub_mark(what);
}

static int setup(void **state)
{
	fake_reset();
	fake.on_call = mark;
	stub_reset(1, 0);
	return 0;
}

/* A context on the stand-in runtime; the module is the stand-in too. */
static int open_cuda(struct pm_ctx **ctx, enum pm_backend_kind kind, int device,
		     char *err, size_t len)
{
	struct pm_open_opts o = { .backend = kind, .cuda_library = stub_path,
				  .cuda_device = device, .errbuf = err, .errbuf_len = len };

	return pm_open_sys(ctx, &o, &fake_ops);
}

static struct pm_ctx *cuda_ctx(void)
{
	struct pm_ctx *ctx;
	char err[256] = "";

	if (open_cuda(&ctx, PM_BACKEND_CUDA, 0, err, sizeof(err)))
		fail_msg("pm_open: %s", err);
	return ctx;
}

/* A machine root for the GPU probe: with gpus entries under proc/driver/nvidia, or none. */
static char *probe_root(int gpus)
{
	static char root[64];
	char path[160];

	snprintf(root, sizeof(root), "/tmp/pm-gpu-probe.XXXXXX");
	assert_non_null(mkdtemp(root));
	snprintf(path, sizeof(path), "%s/proc", root);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/dev", root);
	assert_int_equal(mkdir(path, 0755), 0);
	/* a plain file is no device node: it must not count */
	snprintf(path, sizeof(path), "%s/dev/nvidia0", root);
	close(open(path, O_CREAT | O_WRONLY, 0644));
	snprintf(path, sizeof(path), "%s/proc/driver/nvidia/gpus", root);
	if (gpus) {
		char cmd[200];

		snprintf(cmd, sizeof(cmd), "mkdir -p %s/0000:41:00.0", path);
		assert_int_equal(system(cmd), 0);
	}
	return root;
}

static void rm_root(const char *root)
{
	char cmd[100];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	assert_int_equal(system(cmd), 0);
}

/* Write text to root + path, making the directories. */
static void put(const char *root, const char *path, const char *text)
{
	char full[256], cmd[300];
	FILE *f;

	snprintf(full, sizeof(full), "%s%s", root, path);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname %s)\"", full);
	assert_int_equal(system(cmd), 0);
	f = fopen(full, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int open_auto(struct pm_ctx **ctx, const char *root, const char *lib,
		     char *err, size_t len)
{
	static struct pm_sys_ops ops;	/* the context keeps a pointer to it */
	struct pm_open_opts o = { .backend = PM_BACKEND_AUTO, .cuda_library = lib,
				  .errbuf = err, .errbuf_len = len };

	ops = fake_ops;
	ops.root = root;
	return pm_open_sys(ctx, &o, &ops);
}

/* No NVIDIA GPU on the machine: AUTO takes host copies and says why. */
static void auto_without_gpu_uses_host(void **state)
{
	char *root = probe_root(0);
	struct pm_ctx_info in;
	struct pm_ctx *ctx;
	char note[512];

	stub_reset(0, 0);
	assert_int_equal(open_auto(&ctx, root, stub_path, NULL, 0), 0);
	pm_ctx_info(ctx, &in);
	assert_string_equal(in.backend, "host");
	assert_int_equal(in.cuda_device, -1);
	assert_int_equal(in.gpu_numa_node, -1);
	snprintf(note, sizeof(note),
		 "no CUDA device (device 0 asked for); no NVIDIA GPU here (no entries in %s/proc/driver/nvidia/gpus, no %s/dev/nvidia0), so copies go to host memory",
		 root, root);
	assert_string_equal(in.backend_note, note);
	pm_close(ctx);

	stub_reset(1, cudaErrorInsufficientDriver);
	assert_int_equal(open_auto(&ctx, root, stub_path, NULL, 0), 0);
	pm_ctx_info(ctx, &in);
	assert_string_equal(in.backend, "host");
	assert_non_null(strstr(in.backend_note, "cudaGetDeviceCount: cudaErrorInsufficientDriver"));
	assert_non_null(strstr(in.backend_note, "update the driver"));
	assert_non_null(strstr(in.backend_note, "; no NVIDIA GPU here"));
	pm_close(ctx);
	assert_int_equal(stub_count("streams"), 0);
	rm_root(root);
}

/*
 * A GPU is installed but cuda cannot use it: AUTO fails with a sentence that
 * says where it looked and how to point it at a runtime, never host copies
 * into memory GPU kernels would fault on.
 */
static void auto_with_gpu_never_falls_back(void **state)
{
	char *root = probe_root(1);
	struct pm_ctx *ctx = (void *)1;
	char err[1024], want[256];

	stub_reset(1, 0);
	assert_int_equal(open_auto(&ctx, root, "/nonexistent/libcudart.so", err, sizeof(err)),
			 -ENODEV);
	assert_null(ctx);
	snprintf(want, sizeof(want), "an NVIDIA GPU is present (%s/proc/driver/nvidia/gpus lists 1)",
		 root);
	assert_non_null(strstr(err, want));
	assert_non_null(strstr(err, "cannot load the CUDA runtime: /nonexistent/libcudart.so"));
	assert_non_null(strstr(err, "set PINMEM_CUDART"));
	assert_non_null(strstr(err, "nvidia/cu13/lib"));
	assert_non_null(strstr(err, "nvidia/cuda_runtime/lib"));
	/* the runtime's default search, named in the sentence */
	unsetenv("PINMEM_CUDART");
	stub_reset(0, 0);
	assert_int_equal(open_auto(&ctx, root, stub_path, err, sizeof(err)), -ENODEV);
	assert_non_null(strstr(err, "not usable: no CUDA device (device 0 asked for)"));
	assert_int_equal(fake.closes, fake.opens);
	/* the same machine with a runtime that works: cuda */
	stub_reset(1, 0);
	assert_int_equal(open_auto(&ctx, root, stub_path, err, sizeof(err)), 0);
	{
		struct pm_ctx_info in;

		pm_ctx_info(ctx, &in);
		assert_string_equal(in.backend, "cuda");
		assert_string_equal(in.backend_note, "");
	}
	pm_close(ctx);
	rm_root(root);
}

/*
 * The runtime loaded but says the GPU is not usable (a forked child's
 * cudaErrorInitializationError, CUDA_VISIBLE_DEVICES="" hiding every GPU):
 * the sentence names the CUDA error and what to do, and does not send the
 * user looking for another runtime.
 */
static void auto_names_the_cuda_error(void **state)
{
	char *root = probe_root(1);
	struct pm_ctx *ctx = (void *)1;
	char err[1024];

	stub_reset(1, cudaErrorInitializationError);
	assert_int_equal(open_auto(&ctx, root, stub_path, err, sizeof(err)), -ENODEV);
	assert_non_null(strstr(err, "cudaErrorInitializationError"));
	assert_non_null(strstr(err, "spawn"));
	assert_null(strstr(err, "PINMEM_CUDART"));
	stub_reset(1, cudaErrorNoDevice);
	assert_int_equal(open_auto(&ctx, root, stub_path, err, sizeof(err)), -ENODEV);
	assert_non_null(strstr(err, "cudaErrorNoDevice"));
	assert_non_null(strstr(err, "CUDA_VISIBLE_DEVICES"));
	assert_null(strstr(err, "PINMEM_CUDART"));
	stub_reset(1, 0);
	rm_root(root);
}

/*
 * A runtime whose driver context calls cannot be found: no guard is
 * possible, so the backend is not created (a cudaSetDevice fallback would
 * open a context on the caller's device 0 from every fresh thread), with a
 * sentence that says why, and no context anywhere.
 */
static void no_driver_guard_fails(void **state)
{
	const char *path = getenv("PM_TEST_CUDA_STUB_NODRV");
	struct pm_open_opts o = { .backend = PM_BACKEND_CUDA, .cuda_device = 1,
				  .flags = PM_OPEN_NO_MODULE };
	cudastub_reset_fn *reset;
	cudastub_count_fn *count;
	struct pm_ctx *ctx = (void *)1;
	char err[1024] = "";
	void *h;

	assert_non_null(path);	/* make unit-check sets it */
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	assert_non_null(h);
	*(void **)&reset = dlsym(h, "cudastub_reset");
	*(void **)&count = dlsym(h, "cudastub_count");
	assert_true(reset && count);
	assert_null(dlsym(h, "cuCtxPushCurrent_v2"));
	reset(2, 0);
	o.cuda_library = path;
	o.errbuf = err;
	o.errbuf_len = sizeof(err);
	assert_int_equal(pm_open(&ctx, &o), -ENODEV);
	assert_null(ctx);
	print_message("%s\n", err);
	assert_non_null(strstr(err, "cuCtxPushCurrent"));
	assert_non_null(strstr(err, "device 1"));
	assert_int_equal(count("context0"), 0);
	assert_int_equal(count("context1"), 0);
	assert_int_equal(count("streams"), 0);
	reset(0, 0);
	dlclose(h);
}

/* cudaFree failing leaves the memory known: a retry frees it, and the retained context is released. */
static void dev_free_failure_keeps_memory(void **state)
{
	struct pm_ctx *ctx = cuda_ctx();
	void *dev;

	assert_int_equal(stub_count("retained0"), 1);
	assert_int_equal(pm_dev_alloc(ctx, 4096, &dev), 0);
	stub_fail("cudaFree", 1, cudaErrorIllegalAddress);
	assert_int_equal(pm_dev_free(ctx, dev), -EIO);
	assert_int_equal(stub_count("allocs"), 1);
	assert_int_equal(pm_dev_free(ctx, dev), 0);
	assert_int_equal(stub_count("allocs"), 0);
	assert_int_equal(pm_dev_free(ctx, dev), -EINVAL);
	pm_close(ctx);
	assert_int_equal(stub_count("retained0"), 0);
}

/*
 * Teardown when the context cannot be pushed: no CUDA call on whatever the
 * thread has current, the host bookkeeping is freed anyway (LeakSanitizer in
 * unit-check-asan), and the primary context is released.
 */
static void teardown_without_guard(void **state)
{
	struct pm_ctx *ctx = cuda_ctx();
	void *dev;
	int i;

	assert_int_equal(pm_dev_alloc(ctx, 4096, &dev), 0);
	assert_int_equal(pm_dev_alloc(ctx, 4096, &dev), 0);
	stub_fail("cuCtxPushCurrent_v2", 1, CUDA_ERROR_INVALID_CONTEXT);
	i = stub_log_count();
	pm_close(ctx);
	for (; stub_log_at(i); i++)
		assert_string_not_equal(stub_log_at(i)->fn, "cudaFree");
	assert_int_equal(stub_count("retained0"), 0);
}

/*
 * Buffers are registered Portable: a consumer on another device (its own
 * context) copies from them as pinned memory, which the runtime allows only
 * for Portable registrations (the stand-in counts other copies as pageable).
 */
static void buffers_pinned_for_every_device(void **state)
{
	struct pm_ctx *ctx;
	struct pm_buf *b;
	cudaStream_t cs;
	char err[256] = "";
	void *dev;

	stub_reset(2, 0);
	if (open_cuda(&ctx, PM_BACKEND_CUDA, 0, err, sizeof(err)))
		fail_msg("pm_open: %s", err);
	assert_int_equal(pm_buf_alloc(ctx, 1 * MiB, NULL, &b), 0);
	assert_int_equal(rt_set_device(1), cudaSuccess);
	assert_int_equal(rt_stream_create(&cs, cudaStreamNonBlocking), cudaSuccess);
	assert_int_equal(rt_malloc(&dev, 1 * MiB), cudaSuccess);
	assert_int_equal(rt_memcpy_async(dev, pm_buf_ptr(b), 1 * MiB, cudaMemcpyHostToDevice, cs),
			 cudaSuccess);
	assert_int_equal(rt_stream_sync(cs), cudaSuccess);
	assert_int_equal(stub_count("unregistered_copies"), 0);
	assert_int_equal(rt_free(dev), cudaSuccess);
	assert_int_equal(rt_stream_destroy(cs), cudaSuccess);
	assert_int_equal(pm_buf_free(ctx, b), 0);
	pm_close(ctx);
}

/* A rank's thread: makes its device current as torch.cuda.set_device does, then opens. */
struct opener {
	int set_device;		/* -1: a thread that never chose a device */
	int ret, info_device;
};

static void *opener_main(void *arg)
{
	struct opener *op = arg;
	struct pm_ctx_info info;
	struct pm_ctx *ctx;
	char err[256] = "";

	if (op->set_device >= 0)
		rt_set_device(op->set_device);
	op->ret = open_cuda(&ctx, PM_BACKEND_CUDA, PM_CUDA_DEVICE_CURRENT, err, sizeof(err));
	if (op->ret)
		return NULL;
	pm_ctx_info(ctx, &info);
	op->info_device = info.cuda_device;
	pm_close(ctx);
	return NULL;
}

/*
 * PM_CUDA_DEVICE_CURRENT opens the opening thread's device: rank 3 of an
 * 8-GPU node gets GPU 3, with no context retained on GPU 0; a thread that
 * chose no device gets the runtime's default, 0.
 */
static void current_device_is_the_callers(void **state)
{
	struct opener rank3 = { .set_device = 3 }, fresh = { .set_device = -1 };
	pthread_t t;

	stub_reset(8, 0);
	assert_int_equal(pthread_create(&t, NULL, opener_main, &rank3), 0);
	pthread_join(t, NULL);
	assert_int_equal(rank3.ret, 0);
	assert_int_equal(rank3.info_device, 3);
	assert_int_equal(stub_count("retained0"), 0);
	assert_int_equal(pthread_create(&t, NULL, opener_main, &fresh), 0);
	pthread_join(t, NULL);
	assert_int_equal(fresh.ret, 0);
	assert_int_equal(fresh.info_device, 0);
}

/*
 * pm_buf_free right after queuing a copy from the buffer (no wait): the
 * buffer is unregistered, then unpinned, only once the copy read it.
 */
static void free_waits_for_its_copies(void **state)
{
	struct pm_ctx *ctx = cuda_ctx();
	struct pm_buf *b;
	uint64_t ev;
	void *dev;

	assert_int_equal(pm_buf_alloc(ctx, 1 * MiB, NULL, &b), 0);
	assert_int_equal(pm_dev_alloc(ctx, 1 * MiB, &dev), 0);
	stub_hold(1);
	assert_int_equal(pm_copy_h2d(ctx, dev, pm_buf_ptr(b), 1 * MiB, &ev), 0);
	assert_int_equal(pm_event_release(ctx, ev), 0);
	assert_int_equal(pm_buf_free(ctx, b), 0);
	stub_hold(0);
	assert_int_equal(stub_count("unregistered_in_flight"), 0);
	assert_int_equal(pm_dev_free(ctx, dev), 0);
	pm_close(ctx);
}

static void explicit_cuda_fails_clearly(void **state)
{
	struct pm_open_opts o = { .backend = PM_BACKEND_CUDA, .cuda_library = "/nonexistent/libcudart.so" };
	struct pm_ctx *ctx = (void *)1;
	char err[256];

	stub_reset(0, 0);
	assert_int_equal(open_cuda(&ctx, PM_BACKEND_CUDA, 0, err, sizeof(err)), -ENODEV);
	assert_null(ctx);
	assert_string_equal(err, "copy backend cuda unavailable: no CUDA device (device 0 asked for)");
	stub_reset(2, 0);
	assert_int_equal(open_cuda(&ctx, PM_BACKEND_CUDA, 3, err, sizeof(err)), -ENODEV);
	assert_string_equal(err, "copy backend cuda unavailable: CUDA device 3 asked for, 2 present");
	o.errbuf = err;
	o.errbuf_len = sizeof(err);
	assert_int_equal(pm_open_sys(&ctx, &o, &fake_ops), -ENODEV);
	assert_non_null(strstr(err, "copy backend cuda unavailable: cannot load the CUDA runtime: /nonexistent/libcudart.so"));
	/* A failing stream creation is reported and nothing is left behind. */
	stub_reset(1, 0);
	stub_fail("cudaStreamCreateWithFlags", 1, cudaErrorMemoryAllocation);
	assert_int_equal(open_cuda(&ctx, PM_BACKEND_CUDA, 0, err, sizeof(err)), -ENOMEM);
	assert_string_equal(err, "copy backend cuda unavailable: cudaStreamCreateWithFlags: cudaErrorMemoryAllocation (2)");
	assert_int_equal(fake.closes, fake.opens);
}

/* The runtime can also come from $PINMEM_CUDART. */
static void library_from_environment(void **state)
{
	struct pm_open_opts o = { .backend = PM_BACKEND_CUDA, .flags = PM_OPEN_NO_MODULE };
	struct pm_ctx_info in;
	struct pm_ctx *ctx;

	setenv("PINMEM_CUDART", stub_path, 1);
	assert_int_equal(pm_open_sys(&ctx, &o, &fake_ops), 0);
	unsetenv("PINMEM_CUDART");
	pm_ctx_info(ctx, &in);
	assert_string_equal(in.backend, "cuda");
	pm_close(ctx);
}

/* The chosen device's primary context, its stream and events, nothing on device 0. */
static void stream_on_chosen_device(void **state)
{
	struct pm_ctx *ctx;
	const struct cudastub_call *c;
	int i, dev = -1;

	stub_reset(2, 0);
	assert_int_equal(open_cuda(&ctx, PM_BACKEND_CUDA, 1, NULL, 0), 0);
	i = stub_find("cuDevicePrimaryCtxRetain", 0);
	assert_true(i >= 0);
	assert_int_equal(stub_log_at(i)->flags, 1);
	i = stub_find("cudaStreamCreateWithFlags", i);
	assert_true(i >= 0);
	c = stub_log_at(i);
	assert_int_equal(c->flags, cudaStreamNonBlocking);
	assert_int_equal(c->dev, 1);
	/* events up front, on the same device, before any copy */
	i = stub_find("cudaEventCreateWithFlags", 0);
	assert_true(i >= 0);
	assert_int_equal(stub_log_at(i)->dev, 1);
	assert_int_equal(stub_count("streams"), 1);
	assert_int_equal(stub_find("cudaSetDevice", 0), -1);	/* the caller's device is left alone */
	assert_int_equal(stub_count("context0"), 0);
	assert_int_equal(stub_count("calls_on0"), 0);
	assert_int_equal(rt_get_device(&dev), cudaSuccess);
	assert_int_equal(dev, 0);
	pm_close(ctx);
	assert_int_equal(stub_count("streams"), 0);
	assert_int_equal(stub_count("context0"), 0);
}

struct copier {
	struct pm_ctx *ctx;
	void *dev;
	const void *src;
	size_t len;
	int set_device;		/* -1: leave the thread's device alone */
	int ret, wait_ret, dev_after;
	uint64_t ev;
};

/* A thread of the caller's program (e.g. a PyTorch thread) copying through the context. */
static void *copier_main(void *arg)
{
	struct copier *cp = arg;

	if (cp->set_device >= 0)
		rt_set_device(cp->set_device);
	cp->ret = pm_copy_h2d(cp->ctx, cp->dev, cp->src, cp->len, &cp->ev);
	cp->wait_ret = cp->ret ? cp->ret : pm_event_wait(cp->ctx, cp->ev);
	rt_get_device(&cp->dev_after);
	return NULL;
}

/*
 * A context on device 1 used from the opening thread and from other threads
 * (one that never touched CUDA, one on device 2): every CUDA call runs on
 * device 1, every thread keeps its own current device, no context appears on
 * a device the user did not choose, and the bytes arrive.
 */
static void device_guard_on_every_thread(void **state)
{
	struct copier cp[2];
	struct pm_ctx *ctx;
	struct pm_buf *b;
	uint8_t back[8192], *src;
	uint64_t ev;
	pthread_t t;
	void *dev;
	int cur = -1;

	stub_reset(3, 0);
	assert_int_equal(open_cuda(&ctx, PM_BACKEND_CUDA, 1, NULL, 0), 0);
	assert_int_equal(pm_buf_alloc(ctx, 1 * MiB, NULL, &b), 0);
	src = pm_buf_ptr(b);
	for (int i = 0; i < 8192; i++)
		src[i] = (uint8_t)(i * 7 + 3);
	assert_int_equal(pm_dev_alloc(ctx, 8192, &dev), 0);
	assert_int_equal(pm_copy_h2d(ctx, dev, src, 4096, &ev), 0);	/* stays live */
	for (int i = 0; i < 2; i++) {
		cp[i] = (struct copier){ .ctx = ctx, .dev = (char *)dev + 4096 * i,
					 .src = src + 4096 * i, .len = 4096,
					 .set_device = i ? 2 : -1 };
		assert_int_equal(pthread_create(&t, NULL, copier_main, &cp[i]), 0);
		pthread_join(t, NULL);
		assert_int_equal(cp[i].ret, 0);
		assert_int_equal(cp[i].wait_ret, 0);
	}
	assert_int_equal(cp[0].dev_after, 0);	/* never set: still the default */
	assert_int_equal(cp[1].dev_after, 2);	/* its own device, restored */
	assert_int_equal(pm_copy_d2h(ctx, back, dev, 8192), 0);
	assert_memory_equal(back, src, 8192);
	assert_int_equal(pm_event_release(ctx, ev), 0);
	assert_int_equal(rt_get_device(&cur), cudaSuccess);
	assert_int_equal(cur, 0);
	assert_int_equal(stub_count("context0"), 0);
	assert_int_equal(stub_count("calls_on0"), 0);
	assert_int_equal(stub_count("calls_on2"), 0);	/* thread 2's device only by its own call */
	assert_int_equal(stub_count("context2"), 1);
	assert_int_equal(stub_count("unregistered_copies"), 0);
	pm_close(ctx);
	assert_int_equal(stub_count("context0"), 0);
}

/*
 * cudaEventRecord failing after cudaMemcpyAsync was queued: the copy may
 * still read the source, so pm_copy_h2d returns only once it no longer does
 * (the caller will reuse the source: the stream frees the slot).
 */
static void failed_record_leaves_no_copy_running(void **state)
{
	struct pm_ctx *ctx = cuda_ctx();
	uint8_t src[256] = { 9 };
	uint64_t ev = 0;
	void *dev;

	assert_int_equal(pm_dev_alloc(ctx, 256, &dev), 0);
	stub_hold(1);
	stub_fail("cudaEventRecord", 1, cudaErrorLaunchFailure);
	assert_int_equal(pm_copy_h2d(ctx, dev, src, 256, &ev), -EIO);
	assert_int_equal(ev, 0);
	assert_int_equal(stub_count("pending_copies"), 0);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "cudaEventRecord"));
	stub_hold(0);
	pm_close(ctx);
}

/*
 * Slots for device 1 go on device 1's NUMA node, read from its PCI device in
 * sysfs (a tree of the test's: node 0, the node this machine has); an
 * unknown node leaves them unplaced with a note; an explicit node wins, a
 * node that does not exist is refused.
 */
static void numa_placement(void **state)
{
	static struct pm_sys_ops ops;
	struct pm_open_opts o = { .backend = PM_BACKEND_CUDA, .cuda_device = 1 };
	struct pm_buf_opts bo = { 0 };
	char *root = probe_root(1);
	struct pm_ctx *ctx;
	struct pm_buf *b;

	stub_reset(2, 0);
	o.cuda_library = stub_path;
	ops = fake_ops;
	ops.root = root;
	put(root, "/sys/bus/pci/devices/0000:42:00.0/numa_node", "0\n");
	put(root, "/sys/devices/system/node/node0/cpulist", "0\n");
	assert_int_equal(pm_open_sys(&ctx, &o, &ops), 0);
	{
		struct pm_ctx_info in;

		assert_int_equal(pm_ctx_info(ctx, &in), 0);
		assert_int_equal(in.cuda_device, 1);
		assert_int_equal(in.gpu_numa_node, 0);
	}
	assert_int_equal(pm_buf_alloc(ctx, 4 * MiB, NULL, &b), 0);
	assert_int_equal(pm_buf_numa_node(b), 0);
	assert_int_equal(pm_buf_free(ctx, b), 0);
	bo.numa = PM_NUMA_NONE;
	assert_int_equal(pm_buf_alloc(ctx, 1 * MiB, &bo, &b), 0);
	assert_int_equal(pm_buf_numa_node(b), -1);
	assert_int_equal(pm_buf_free(ctx, b), 0);
	bo.numa = PM_NUMA_NODE(1000);
	assert_int_equal(pm_buf_alloc(ctx, 1 * MiB, &bo, &b), -EINVAL);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "NUMA node 1000: mbind"));
	pm_close(ctx);

	/* firmware that does not say (numa_node -1): not placed, and the note says why */
	put(root, "/sys/bus/pci/devices/0000:42:00.0/numa_node", "-1\n");
	assert_int_equal(pm_open_sys(&ctx, &o, &ops), 0);
	assert_int_equal(pm_buf_alloc(ctx, 1 * MiB, NULL, &b), 0);
	assert_int_equal(pm_buf_numa_node(b), -1);
	assert_non_null(strstr(pm_buf_note(b), "the GPU's NUMA node is unknown"));
	bo.numa = PM_NUMA_NODE(0);
	assert_int_equal(pm_buf_alloc(ctx, 1 * MiB, &bo, &b), 0);
	assert_int_equal(pm_buf_numa_node(b), 0);
	pm_close(ctx);
	rm_root(root);
}

/* Pinned first, then registered; unregistered first, then unpinned. */
static void registration_order(void **state)
{
	struct pm_ctx *ctx = cuda_ctx();
	struct pm_buf *b;
	const struct cudastub_call *c;
	int pin, reg, unreg, unpin;
	void *p;

	assert_int_equal(pm_buf_alloc(ctx, 2 * MiB, NULL, &b), 0);
	assert_true(pm_buf_backend_registered(b));
	p = pm_buf_ptr(b);
	pin = stub_find("pin", 0);
	reg = stub_find("cudaHostRegister", 0);
	assert_true(pin >= 0 && reg > pin);
	c = stub_log_at(reg);
	assert_ptr_equal(c->a, p);
	assert_int_equal(c->len, 2 * MiB);
	assert_int_equal(c->flags, cudaHostRegisterPortable);
	assert_int_equal(c->ret, cudaSuccess);
	assert_int_equal(stub_count("registrations"), 1);
	assert_int_equal(pm_buf_free(ctx, b), 0);
	unreg = stub_find("cudaHostUnregister", reg);
	unpin = stub_find("unpin", reg);
	assert_true(unreg > reg && unpin > unreg);
	assert_ptr_equal(stub_log_at(unreg)->a, p);
	assert_int_equal(stub_count("registrations"), 0);

	/* mlock'd memory is registered the same way, after the mlock. */
	fake.open_err = -ENOENT;
	pm_close(ctx);
	ctx = cuda_ctx();
	assert_int_equal(pm_buf_alloc(ctx, 1 * MiB, NULL, &b), 0);
	assert_int_equal(pm_buf_pin_mode(b), PM_PIN_MLOCK);
	assert_true(stub_find("cudaHostRegister", stub_find("mlock", 0)) > 0);
	pm_close(ctx);
	assert_true(stub_find("munlock", stub_find("cudaHostUnregister", 0)) > 0);
	assert_int_equal(stub_count("registrations"), 0);
}

static void registration_failure_undoes_pin(void **state)
{
	struct pm_ctx *ctx = cuda_ctx();
	struct pm_buf *b = (void *)1;
	uint64_t vsz = vm_size();

	stub_fail("cudaHostRegister", 1, cudaErrorMemoryAllocation);
	assert_int_equal(pm_buf_alloc(ctx, 1 * MiB, NULL, &b), -ENOMEM);
	assert_null(b);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "registering 1.0 MiB with the cuda backend failed: cudaHostRegister: cudaErrorMemoryAllocation (2)");
	assert_int_equal(fake.regions, 0);
	assert_int_equal(fake.unpins, 1);
	assert_no_mapping_leak(vsz);
	assert_int_equal(stub_count("registrations"), 0);
	/* The same memory twice: the runtime's refusal becomes -EEXIST. */
	assert_int_equal(pm_buf_alloc(ctx, 1 * MiB, NULL, &b), 0);
	{
		struct pm_buf *b2;

		assert_int_equal(pm_buf_pin_inplace(ctx, pm_buf_ptr(b), 4096, NULL, &b2), -EEXIST);
		assert_non_null(strstr(pm_ctx_last_error(ctx), "cudaErrorHostMemoryAlreadyRegistered"));
	}
	pm_close(ctx);
}

static void copies_events_and_reuse(void **state)
{
	struct pm_ctx *ctx = cuda_ctx();
	uint8_t back[4096], *src;
	uint64_t ev1, ev2;
	struct pm_buf *b;
	void *dev;
	int creates;

	assert_int_equal(pm_buf_alloc(ctx, 1 * MiB, NULL, &b), 0);
	src = pm_buf_ptr(b);
	memset(src, 0x3c, 4096);
	assert_int_equal(pm_dev_alloc(ctx, 4096, &dev), 0);
	stub_hold(1);
	assert_int_equal(pm_copy_h2d(ctx, dev, src, 4096, &ev1), 0);
	assert_int_equal(stub_log_at(stub_find("cudaMemcpyAsync", 0))->flags,
			 cudaMemcpyHostToDevice);
	assert_true(stub_find("cudaEventRecord", stub_find("cudaMemcpyAsync", 0)) > 0);
	assert_int_equal(pm_event_query(ctx, ev1), 0);
	stub_complete();
	assert_int_equal(pm_event_query(ctx, ev1), 1);
	assert_int_equal(pm_copy_d2h(ctx, back, dev, 4096), 0);
	assert_memory_equal(back, src, 4096);
	assert_int_equal(pm_event_release(ctx, ev1), 0);

	/* The slot is reused under a new name; the old name stays dead. */
	assert_int_equal(pm_copy_h2d(ctx, dev, src, 4096, &ev2), 0);
	assert_true(ev2 != ev1);
	assert_int_equal(pm_event_query(ctx, ev1), -EINVAL);
	assert_int_equal(pm_event_query(ctx, ev2), 0);
	assert_int_equal(pm_event_wait(ctx, ev2), 0);
	assert_int_equal(pm_event_query(ctx, ev2), 1);
	/* every event made up front (at open, on the context's device), none since */
	creates = 0;
	for (int i = stub_find("cudaEventCreateWithFlags", 0); i >= 0;
	     i = stub_find("cudaEventCreateWithFlags", i + 1)) {
		assert_int_equal(stub_log_at(i)->flags, cudaEventDisableTiming);
		assert_true(i < stub_find("cudaMemcpyAsync", 0));
		creates++;
	}
	assert_true(creates > 1);
	assert_int_equal(stub_count("unregistered_copies"), 0);
	pm_close(ctx);
	assert_int_equal(stub_count("events"), 0);
	assert_int_equal(stub_count("allocs"), 0);
	assert_int_equal(stub_count("registrations"), 0);
}

static void cuda_errors_become_errno(void **state)
{
	struct pm_ctx *ctx = cuda_ctx();
	uint8_t src[64];
	uint64_t ev = 0, ev2;
	void *dev;
	int records;

	assert_int_equal(pm_dev_alloc(ctx, 64, &dev), 0);
	stub_fail("cudaMalloc", 1, cudaErrorMemoryAllocation);
	assert_int_equal(pm_dev_alloc(ctx, 64, &dev), -ENOMEM);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "pm_dev_alloc on the cuda backend failed: cudaMalloc: cudaErrorMemoryAllocation (2)");

	/* A refused copy records no event and holds no event slot. */
	stub_fail("cudaMemcpyAsync", 1, cudaErrorInvalidValue);
	assert_int_equal(pm_copy_h2d(ctx, dev, src, 64, &ev), -EINVAL);
	assert_int_equal(ev, 0);
	assert_int_equal(stub_find("cudaEventRecord", 0), -1);
	assert_int_equal(pm_copy_h2d(ctx, dev, src, 64, &ev2), 0);
	assert_int_equal(ev2 & 0xffffffffu, 1);
	records = stub_find("cudaEventRecord", 0);
	assert_true(records >= 0);

	/* An asynchronous failure surfaces from query and wait. */
	stub_fail("cudaEventQuery", 1, cudaErrorIllegalAddress);
	assert_int_equal(pm_event_query(ctx, ev2), -EIO);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "pm_event_query on the cuda backend failed: cudaEventQuery: cudaErrorIllegalAddress (700)");
	stub_fail("cudaEventSynchronize", 1, cudaErrorIllegalAddress);
	assert_int_equal(pm_event_wait(ctx, ev2), -EIO);
	assert_int_equal(pm_event_release(ctx, ev2), 0);

	assert_int_equal(pm_dev_free(ctx, src), -EINVAL);
	assert_int_equal(pm_dev_free(ctx, dev), 0);
	assert_int_equal(stub_count("allocs"), 0);
	pm_close(ctx);
}

/* pm_close: wait for the stream, then free events, memory, the stream. */
static void teardown_order(void **state)
{
	struct pm_ctx *ctx = cuda_ctx();
	uint8_t src[64] = { 1 };
	uint64_t ev;
	void *dev;
	int sync, destroy;

	assert_int_equal(pm_dev_alloc(ctx, 64, &dev), 0);
	stub_hold(1);
	assert_int_equal(pm_copy_h2d(ctx, dev, src, 64, &ev), 0);
	pm_close(ctx);
	sync = stub_find("cudaStreamSynchronize", 0);
	destroy = stub_find("cudaStreamDestroy", 0);
	assert_true(sync >= 0 && destroy > sync);
	assert_true(stub_find("cudaFree", sync) > sync);
	assert_true(stub_find("cudaEventDestroy", sync) > sync);
	assert_int_equal(stub_count("events"), 0);
	assert_int_equal(stub_count("allocs"), 0);
	assert_int_equal(stub_count("streams"), 0);
}

#define LOAD(var, name)							\
	do {								\
		var = dlsym(h, name);					\
		if (!var) {						\
			fprintf(stderr, "%s: no %s\n", stub_path, name);	\
			return 1;					\
		}							\
	} while (0)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(auto_without_gpu_uses_host, setup),
		cmocka_unit_test_setup(current_device_is_the_callers, setup),
		cmocka_unit_test_setup(free_waits_for_its_copies, setup),
		cmocka_unit_test_setup(auto_with_gpu_never_falls_back, setup),
		cmocka_unit_test_setup(auto_names_the_cuda_error, setup),
		cmocka_unit_test_setup(no_driver_guard_fails, setup),
		cmocka_unit_test_setup(dev_free_failure_keeps_memory, setup),
		cmocka_unit_test_setup(teardown_without_guard, setup),
		cmocka_unit_test_setup(buffers_pinned_for_every_device, setup),
		cmocka_unit_test_setup(explicit_cuda_fails_clearly, setup),
		cmocka_unit_test_setup(library_from_environment, setup),
		cmocka_unit_test_setup(stream_on_chosen_device, setup),
		cmocka_unit_test_setup(registration_order, setup),
		cmocka_unit_test_setup(registration_failure_undoes_pin, setup),
		cmocka_unit_test_setup(copies_events_and_reuse, setup),
		cmocka_unit_test_setup(cuda_errors_become_errno, setup),
		cmocka_unit_test_setup(teardown_order, setup),
		cmocka_unit_test_setup(device_guard_on_every_thread, setup),
		cmocka_unit_test_setup(failed_record_leaves_no_copy_running, setup),
		cmocka_unit_test_setup(numa_placement, setup),
	};
	void *h;
	int r;

	stub_path = getenv("PM_TEST_CUDA_STUB");
	if (!stub_path) {
		fprintf(stderr, "test_backend_cuda: set PM_TEST_CUDA_STUB to the stand-in (make unit-check does)\n");
		return 1;
	}
	/* Held open across contexts, so its state outlives each pm_close. */
	h = dlopen(stub_path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	LOAD(stub_reset, "cudastub_reset");
	LOAD(stub_fail, "cudastub_fail");
	LOAD(stub_hold, "cudastub_hold");
	LOAD(stub_complete, "cudastub_complete");
	LOAD(stub_mark, "cudastub_mark");
	LOAD(stub_log_at, "cudastub_log_at");
	LOAD(stub_log_count, "cudastub_log_count");
	LOAD(stub_find, "cudastub_find");
	LOAD(stub_count, "cudastub_count");
	LOAD(rt_get_device, "cudaGetDevice");
	LOAD(rt_set_device, "cudaSetDevice");
	LOAD(rt_stream_create, "cudaStreamCreateWithFlags");
	LOAD(rt_stream_sync, "cudaStreamSynchronize");
	LOAD(rt_stream_destroy, "cudaStreamDestroy");
	LOAD(rt_malloc, "cudaMalloc");
	LOAD(rt_free, "cudaFree");
	LOAD(rt_memcpy_async, "cudaMemcpyAsync");
	r = cmocka_run_group_tests(tests, NULL, NULL);
	stub_reset(0, 0);
	dlclose(h);
	return r;
}
