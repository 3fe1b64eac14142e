//go:build cgo

package cuda

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

// The handful of CUDA driver types this package needs, declared here so that
// no CUDA toolkit header is needed to build. They mirror the driver ABI of
// CUDA 11.2 and later; versioned entry points are looked up by their exported
// symbol names (cuMemAlloc_v2 and so on).
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUevent;
typedef void *CUmodule;
typedef void *CUfunction;
typedef struct { char reserved[64]; } CUipcMemHandle;
typedef struct { char reserved[64]; } CUipcEventHandle;
typedef struct { char bytes[16]; } CUuuid;

static void *gorun_cu_lib;

static CUresult (*p_cuInit)(unsigned int);
static CUresult (*p_cuDriverGetVersion)(int *);
static CUresult (*p_cuGetErrorName)(CUresult, const char **);
static CUresult (*p_cuGetErrorString)(CUresult, const char **);
static CUresult (*p_cuDeviceGetCount)(int *);
static CUresult (*p_cuDeviceGet)(CUdevice *, int);
static CUresult (*p_cuDeviceGetName)(char *, int, CUdevice);
static CUresult (*p_cuDeviceGetAttribute)(int *, int, CUdevice);
static CUresult (*p_cuDeviceTotalMem)(size_t *, CUdevice);
static CUresult (*p_cuDeviceGetPCIBusId)(char *, int, CUdevice);
static CUresult (*p_cuDeviceGetUuid)(CUuuid *, CUdevice);
static CUresult (*p_cuDeviceCanAccessPeer)(int *, CUdevice, CUdevice);
static CUresult (*p_cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
static CUresult (*p_cuDevicePrimaryCtxRelease)(CUdevice);
static CUresult (*p_cuDevicePrimaryCtxGetState)(CUdevice, unsigned int *, int *);
static CUresult (*p_cuDevicePrimaryCtxSetFlags)(CUdevice, unsigned int);
static CUresult (*p_cuCtxSetCurrent)(CUcontext);
static CUresult (*p_cuCtxGetCurrent)(CUcontext *);
static CUresult (*p_cuCtxSynchronize)(void);
static CUresult (*p_cuCtxEnablePeerAccess)(CUcontext, unsigned int);
static CUresult (*p_cuMemGetInfo)(size_t *, size_t *);
static CUresult (*p_cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*p_cuMemFree)(CUdeviceptr);
static CUresult (*p_cuMemHostAlloc)(void **, size_t, unsigned int);
static CUresult (*p_cuMemFreeHost)(void *);
static CUresult (*p_cuMemGetAddressRange)(CUdeviceptr *, size_t *, CUdeviceptr);
static CUresult (*p_cuMemcpy)(CUdeviceptr, CUdeviceptr, size_t);
static CUresult (*p_cuMemcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
static CUresult (*p_cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
static CUresult (*p_cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
static CUresult (*p_cuMemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t);
static CUresult (*p_cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
static CUresult (*p_cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
// CUmemcpyAttributes (CUDA 12.8 and later): the source's access order, two
// location hints (CUmemLocation: a type and an id) and flags.
typedef struct { int srcAccessOrder; int srcType, srcId, dstType, dstId; unsigned int flags; } gorun_memcpyAttributes;
// cuMemcpyBatchAsync_v2 (CUDA 13: no failIdx); optional, NULL in older drivers.
static CUresult (*p_cuMemcpyBatchAsync)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t,
	gorun_memcpyAttributes *, size_t *, size_t, CUstream);
static CUresult (*p_cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
static CUresult (*p_cuMemcpyPeerAsync)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream);
static CUresult (*p_cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
static CUresult (*p_cuStreamCreate)(CUstream *, unsigned int);
static CUresult (*p_cuStreamDestroy)(CUstream);
static CUresult (*p_cuStreamSynchronize)(CUstream);
static CUresult (*p_cuStreamQuery)(CUstream);
static CUresult (*p_cuStreamWaitEvent)(CUstream, CUevent, unsigned int);
static CUresult (*p_cuEventCreate)(CUevent *, unsigned int);
static CUresult (*p_cuEventDestroy)(CUevent);
static CUresult (*p_cuEventRecord)(CUevent, CUstream);
static CUresult (*p_cuEventSynchronize)(CUevent);
static CUresult (*p_cuEventQuery)(CUevent);
static CUresult (*p_cuEventElapsedTime)(float *, CUevent, CUevent);
static CUresult (*p_cuIpcGetMemHandle)(CUipcMemHandle *, CUdeviceptr);
static CUresult (*p_cuIpcOpenMemHandle)(CUdeviceptr *, CUipcMemHandle, unsigned int);
static CUresult (*p_cuIpcCloseMemHandle)(CUdeviceptr);
static CUresult (*p_cuIpcGetEventHandle)(CUipcEventHandle *, CUevent);
static CUresult (*p_cuIpcOpenEventHandle)(CUevent *, CUipcEventHandle);
static CUresult (*p_cuPointerGetAttribute)(void *, int, CUdeviceptr);
static CUresult (*p_cuModuleLoadDataEx)(CUmodule *, const void *, unsigned int, int *, void **);
static CUresult (*p_cuModuleUnload)(CUmodule);
static CUresult (*p_cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
static CUresult (*p_cuOccupancyMaxActiveBlocksPerMultiprocessor)(int *, CUfunction, int, size_t);
static CUresult (*p_cuLaunchKernel)(CUfunction, unsigned int, unsigned int, unsigned int,
	unsigned int, unsigned int, unsigned int, unsigned int, CUstream, void **, void **);

// gorun_cu_sym resolves the first of up to two names that the library exports.
static int gorun_cu_sym(void **slot, const char *name, const char *fallback, char *missing, size_t missingLen) {
	*slot = dlsym(gorun_cu_lib, name);
	if (*slot == NULL && fallback != NULL) {
		*slot = dlsym(gorun_cu_lib, fallback);
	}
	if (*slot == NULL) {
		strncpy(missing, name, missingLen - 1);
		missing[missingLen - 1] = 0;
		return -1;
	}
	return 0;
}

#define SYM(p, name, fb) if (gorun_cu_sym((void **)&(p), name, fb, err, errLen) != 0) return 2;

// gorun_cu_load opens libcuda.so.1 and resolves every entry point. It returns
// 0 on success, 1 when the library cannot be opened (err holds dlerror) and 2
// when a symbol is missing (err holds its name).
static int gorun_cu_load(char *err, size_t errLen) {
	if (gorun_cu_lib != NULL) return 0;
	gorun_cu_lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (gorun_cu_lib == NULL) {
		const char *e = dlerror();
		strncpy(err, e ? e : "dlopen libcuda.so.1 failed", errLen - 1);
		err[errLen - 1] = 0;
		return 1;
	}
	SYM(p_cuInit, "cuInit", NULL)
	SYM(p_cuDriverGetVersion, "cuDriverGetVersion", NULL)
	SYM(p_cuGetErrorName, "cuGetErrorName", NULL)
	SYM(p_cuGetErrorString, "cuGetErrorString", NULL)
	SYM(p_cuDeviceGetCount, "cuDeviceGetCount", NULL)
	SYM(p_cuDeviceGet, "cuDeviceGet", NULL)
	SYM(p_cuDeviceGetName, "cuDeviceGetName", NULL)
	SYM(p_cuDeviceGetAttribute, "cuDeviceGetAttribute", NULL)
	SYM(p_cuDeviceTotalMem, "cuDeviceTotalMem_v2", NULL)
	SYM(p_cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId", NULL)
	SYM(p_cuDeviceGetUuid, "cuDeviceGetUuid_v2", "cuDeviceGetUuid")
	SYM(p_cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer", NULL)
	SYM(p_cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", NULL)
	SYM(p_cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease")
	SYM(p_cuDevicePrimaryCtxGetState, "cuDevicePrimaryCtxGetState", NULL)
	SYM(p_cuDevicePrimaryCtxSetFlags, "cuDevicePrimaryCtxSetFlags_v2", "cuDevicePrimaryCtxSetFlags")
	SYM(p_cuCtxSetCurrent, "cuCtxSetCurrent", NULL)
	SYM(p_cuCtxGetCurrent, "cuCtxGetCurrent", NULL)
	SYM(p_cuCtxSynchronize, "cuCtxSynchronize", NULL)
	SYM(p_cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess", NULL)
	SYM(p_cuMemGetInfo, "cuMemGetInfo_v2", NULL)
	SYM(p_cuMemAlloc, "cuMemAlloc_v2", NULL)
	SYM(p_cuMemFree, "cuMemFree_v2", NULL)
	SYM(p_cuMemHostAlloc, "cuMemHostAlloc", NULL)
	SYM(p_cuMemFreeHost, "cuMemFreeHost", NULL)
	SYM(p_cuMemGetAddressRange, "cuMemGetAddressRange_v2", NULL)
	SYM(p_cuMemcpy, "cuMemcpy", NULL)
	SYM(p_cuMemcpyAsync, "cuMemcpyAsync", NULL)
	SYM(p_cuMemcpyHtoD, "cuMemcpyHtoD_v2", NULL)
	SYM(p_cuMemcpyDtoH, "cuMemcpyDtoH_v2", NULL)
	SYM(p_cuMemcpyDtoD, "cuMemcpyDtoD_v2", NULL)
	SYM(p_cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", NULL)
	SYM(p_cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", NULL)
	SYM(p_cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", NULL)
	SYM(p_cuMemcpyPeerAsync, "cuMemcpyPeerAsync", NULL)
	SYM(p_cuMemsetD8Async, "cuMemsetD8Async", NULL)
	SYM(p_cuStreamCreate, "cuStreamCreate", NULL)
	SYM(p_cuStreamDestroy, "cuStreamDestroy_v2", NULL)
	SYM(p_cuStreamSynchronize, "cuStreamSynchronize", NULL)
	SYM(p_cuStreamQuery, "cuStreamQuery", NULL)
	SYM(p_cuStreamWaitEvent, "cuStreamWaitEvent", NULL)
	SYM(p_cuEventCreate, "cuEventCreate", NULL)
	SYM(p_cuEventDestroy, "cuEventDestroy_v2", NULL)
	SYM(p_cuEventRecord, "cuEventRecord", NULL)
	SYM(p_cuEventSynchronize, "cuEventSynchronize", NULL)
	SYM(p_cuEventQuery, "cuEventQuery", NULL)
	SYM(p_cuEventElapsedTime, "cuEventElapsedTime", "cuEventElapsedTime_v2")
	SYM(p_cuIpcGetMemHandle, "cuIpcGetMemHandle", NULL)
	SYM(p_cuIpcOpenMemHandle, "cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle")
	SYM(p_cuIpcCloseMemHandle, "cuIpcCloseMemHandle", NULL)
	SYM(p_cuIpcGetEventHandle, "cuIpcGetEventHandle", NULL)
	SYM(p_cuIpcOpenEventHandle, "cuIpcOpenEventHandle", NULL)
	SYM(p_cuPointerGetAttribute, "cuPointerGetAttribute", NULL)
	SYM(p_cuModuleLoadDataEx, "cuModuleLoadDataEx", NULL)
	SYM(p_cuModuleUnload, "cuModuleUnload", NULL)
	SYM(p_cuModuleGetFunction, "cuModuleGetFunction", NULL)
	SYM(p_cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor", NULL)
	SYM(p_cuLaunchKernel, "cuLaunchKernel", NULL)
	// Optional: only the CUDA 13 form, whose arguments are declared above
	// (CUDA 12.8's cuMemcpyBatchAsync takes a failIdx more).
	p_cuMemcpyBatchAsync = dlsym(gorun_cu_lib, "cuMemcpyBatchAsync_v2");
	return 0;
}

// Every wrapper that needs a context makes it current first, in the same C
// call, so that Go may run each call on whichever OS thread it likes.
#define CTX(ctx) do { CUresult _r = p_cuCtxSetCurrent((CUcontext)(ctx)); if (_r != 0) return _r; } while (0)

static CUresult w_cuInit(void) { return p_cuInit(0); }
static CUresult w_cuDriverGetVersion(int *v) { return p_cuDriverGetVersion(v); }
static const char *w_cuGetErrorName(CUresult r) {
	const char *s = NULL;
	if (p_cuGetErrorName == NULL || p_cuGetErrorName(r, &s) != 0) return NULL;
	return s;
}
static const char *w_cuGetErrorString(CUresult r) {
	const char *s = NULL;
	if (p_cuGetErrorString == NULL || p_cuGetErrorString(r, &s) != 0) return NULL;
	return s;
}
static CUresult w_cuDeviceGetCount(int *n) { return p_cuDeviceGetCount(n); }
static CUresult w_cuDeviceGet(int *d, int ordinal) { return p_cuDeviceGet(d, ordinal); }
static CUresult w_cuDeviceGetName(char *buf, int len, int d) { return p_cuDeviceGetName(buf, len, d); }
static CUresult w_cuDeviceGetAttribute(int *v, int attr, int d) { return p_cuDeviceGetAttribute(v, attr, d); }
static CUresult w_cuDeviceTotalMem(unsigned long long *v, int d) {
	size_t n = 0;
	CUresult r = p_cuDeviceTotalMem(&n, d);
	*v = n;
	return r;
}
static CUresult w_cuDeviceGetPCIBusId(char *buf, int len, int d) { return p_cuDeviceGetPCIBusId(buf, len, d); }
static CUresult w_cuDeviceGetUuid(void *out, int d) { return p_cuDeviceGetUuid((CUuuid *)out, d); }
static CUresult w_cuDeviceCanAccessPeer(int *v, int d, int peer) { return p_cuDeviceCanAccessPeer(v, d, peer); }
static CUresult w_cuDevicePrimaryCtxRetain(uintptr_t *ctx, int d) {
	CUcontext c = NULL;
	CUresult r = p_cuDevicePrimaryCtxRetain(&c, d);
	*ctx = (uintptr_t)c;
	return r;
}
static CUresult w_cuDevicePrimaryCtxRelease(int d) { return p_cuDevicePrimaryCtxRelease(d); }
static CUresult w_cuDevicePrimaryCtxGetState(int d, unsigned int *flags, int *active) {
	return p_cuDevicePrimaryCtxGetState(d, flags, active);
}
static CUresult w_cuDevicePrimaryCtxSetFlags(int d, unsigned int flags) { return p_cuDevicePrimaryCtxSetFlags(d, flags); }
static CUresult w_cuCtxSynchronize(uintptr_t ctx) { CTX(ctx); return p_cuCtxSynchronize(); }
static CUresult w_cuCtxSetCurrent(uintptr_t ctx) { return p_cuCtxSetCurrent((CUcontext)ctx); }
static CUresult w_cuCtxGetCurrent(uintptr_t *ctx) {
	CUcontext c = NULL;
	CUresult r = p_cuCtxGetCurrent(&c);
	*ctx = (uintptr_t)c;
	return r;
}
static CUresult w_cuCtxEnablePeerAccess(uintptr_t ctx, uintptr_t peer) {
	CTX(ctx);
	return p_cuCtxEnablePeerAccess((CUcontext)peer, 0);
}
static CUresult w_cuMemGetInfo(uintptr_t ctx, unsigned long long *freeb, unsigned long long *total) {
	size_t f = 0, t = 0;
	CTX(ctx);
	CUresult r = p_cuMemGetInfo(&f, &t);
	*freeb = f;
	*total = t;
	return r;
}
static CUresult w_cuMemAlloc(uintptr_t ctx, unsigned long long *p, unsigned long long n) {
	CUdeviceptr d = 0;
	CTX(ctx);
	CUresult r = p_cuMemAlloc(&d, (size_t)n);
	*p = d;
	return r;
}
static CUresult w_cuMemFree(uintptr_t ctx, unsigned long long p) { CTX(ctx); return p_cuMemFree(p); }
static CUresult w_cuMemHostAlloc(uintptr_t ctx, void **p, unsigned long long n, unsigned int flags) {
	CTX(ctx);
	return p_cuMemHostAlloc(p, (size_t)n, flags);
}
static CUresult w_cuMemFreeHost(uintptr_t ctx, void *p) { CTX(ctx); return p_cuMemFreeHost(p); }
static CUresult w_cuMemGetAddressRange(uintptr_t ctx, unsigned long long *base, unsigned long long *size, unsigned long long p) {
	CUdeviceptr b = 0;
	size_t s = 0;
	CTX(ctx);
	CUresult r = p_cuMemGetAddressRange(&b, &s, p);
	*base = b;
	*size = s;
	return r;
}
static CUresult w_cuMemcpy(uintptr_t ctx, unsigned long long dst, unsigned long long src, unsigned long long n) {
	CTX(ctx);
	return p_cuMemcpy(dst, src, (size_t)n);
}
static CUresult w_cuMemcpyAsync(uintptr_t ctx, unsigned long long dst, unsigned long long src, unsigned long long n, uintptr_t s) {
	CTX(ctx);
	return p_cuMemcpyAsync(dst, src, (size_t)n, (CUstream)s);
}
static CUresult w_cuMemcpyHtoD(uintptr_t ctx, unsigned long long dst, const void *src, unsigned long long n) {
	CTX(ctx);
	return p_cuMemcpyHtoD(dst, src, (size_t)n);
}
static CUresult w_cuMemcpyDtoH(uintptr_t ctx, void *dst, unsigned long long src, unsigned long long n) {
	CTX(ctx);
	return p_cuMemcpyDtoH(dst, src, (size_t)n);
}
static CUresult w_cuMemcpyDtoD(uintptr_t ctx, unsigned long long dst, unsigned long long src, unsigned long long n) {
	CTX(ctx);
	return p_cuMemcpyDtoD(dst, src, (size_t)n);
}
static CUresult w_cuMemcpyHtoDAsync(uintptr_t ctx, unsigned long long dst, const void *src, unsigned long long n, uintptr_t s) {
	CTX(ctx);
	return p_cuMemcpyHtoDAsync(dst, src, (size_t)n, (CUstream)s);
}
static CUresult w_cuMemcpyDtoHAsync(uintptr_t ctx, void *dst, unsigned long long src, unsigned long long n, uintptr_t s) {
	CTX(ctx);
	return p_cuMemcpyDtoHAsync(dst, src, (size_t)n, (CUstream)s);
}
// w_cuMemcpyBatchAsync queues count copies between addresses of the unified
// address space, accessed in stream order, as one batch.
static CUresult w_cuMemcpyBatchAsync(uintptr_t ctx, unsigned long long *dst, unsigned long long *src, unsigned long long *n, unsigned long long count, uintptr_t s) {
	if (p_cuMemcpyBatchAsync == NULL) return 801; // CUDA_ERROR_NOT_SUPPORTED
	CTX(ctx);
	gorun_memcpyAttributes a = {1, 0, 0, 0, 0, 0}; // CU_MEMCPY_SRC_ACCESS_ORDER_STREAM
	size_t idx = 0;
	return p_cuMemcpyBatchAsync((CUdeviceptr *)dst, (CUdeviceptr *)src, (size_t *)n, (size_t)count, &a, &idx, 1, (CUstream)s);
}
static int w_hasMemcpyBatch(void) { return p_cuMemcpyBatchAsync != NULL; }
static CUresult w_cuMemcpyDtoDAsync(uintptr_t ctx, unsigned long long dst, unsigned long long src, unsigned long long n, uintptr_t s) {
	CTX(ctx);
	return p_cuMemcpyDtoDAsync(dst, src, (size_t)n, (CUstream)s);
}
static CUresult w_cuMemcpyPeerAsync(uintptr_t ctx, unsigned long long dst, uintptr_t dstCtx, unsigned long long src, uintptr_t srcCtx, unsigned long long n, uintptr_t s) {
	CTX(ctx);
	return p_cuMemcpyPeerAsync(dst, (CUcontext)dstCtx, src, (CUcontext)srcCtx, (size_t)n, (CUstream)s);
}
static CUresult w_cuMemsetD8Async(uintptr_t ctx, unsigned long long p, unsigned char v, unsigned long long n, uintptr_t s) {
	CTX(ctx);
	return p_cuMemsetD8Async(p, v, (size_t)n, (CUstream)s);
}
static CUresult w_cuStreamCreate(uintptr_t ctx, uintptr_t *s, unsigned int flags) {
	CUstream st = NULL;
	CTX(ctx);
	CUresult r = p_cuStreamCreate(&st, flags);
	*s = (uintptr_t)st;
	return r;
}
static CUresult w_cuStreamDestroy(uintptr_t ctx, uintptr_t s) { CTX(ctx); return p_cuStreamDestroy((CUstream)s); }
static CUresult w_cuStreamSynchronize(uintptr_t ctx, uintptr_t s) { CTX(ctx); return p_cuStreamSynchronize((CUstream)s); }
static CUresult w_cuStreamQuery(uintptr_t ctx, uintptr_t s) { CTX(ctx); return p_cuStreamQuery((CUstream)s); }
static CUresult w_cuStreamWaitEvent(uintptr_t ctx, uintptr_t s, uintptr_t e) {
	CTX(ctx);
	return p_cuStreamWaitEvent((CUstream)s, (CUevent)e, 0);
}
static CUresult w_cuEventCreate(uintptr_t ctx, uintptr_t *e, unsigned int flags) {
	CUevent ev = NULL;
	CTX(ctx);
	CUresult r = p_cuEventCreate(&ev, flags);
	*e = (uintptr_t)ev;
	return r;
}
static CUresult w_cuEventDestroy(uintptr_t ctx, uintptr_t e) { CTX(ctx); return p_cuEventDestroy((CUevent)e); }
static CUresult w_cuEventRecord(uintptr_t ctx, uintptr_t e, uintptr_t s) { CTX(ctx); return p_cuEventRecord((CUevent)e, (CUstream)s); }
static CUresult w_cuEventSynchronize(uintptr_t ctx, uintptr_t e) { CTX(ctx); return p_cuEventSynchronize((CUevent)e); }
static CUresult w_cuEventQuery(uintptr_t ctx, uintptr_t e) { CTX(ctx); return p_cuEventQuery((CUevent)e); }
static CUresult w_cuEventElapsedTime(uintptr_t ctx, float *ms, uintptr_t start, uintptr_t end) {
	CTX(ctx);
	return p_cuEventElapsedTime(ms, (CUevent)start, (CUevent)end);
}
static CUresult w_cuIpcGetMemHandle(uintptr_t ctx, void *h, unsigned long long p) {
	CTX(ctx);
	return p_cuIpcGetMemHandle((CUipcMemHandle *)h, p);
}
static CUresult w_cuIpcOpenMemHandle(uintptr_t ctx, unsigned long long *p, const void *h, unsigned int flags) {
	CUipcMemHandle hh;
	CUdeviceptr d = 0;
	memcpy(&hh, h, sizeof hh);
	CTX(ctx);
	CUresult r = p_cuIpcOpenMemHandle(&d, hh, flags);
	*p = d;
	return r;
}
static CUresult w_cuIpcCloseMemHandle(uintptr_t ctx, unsigned long long p) { CTX(ctx); return p_cuIpcCloseMemHandle(p); }
static CUresult w_cuIpcGetEventHandle(uintptr_t ctx, void *h, uintptr_t e) {
	CTX(ctx);
	return p_cuIpcGetEventHandle((CUipcEventHandle *)h, (CUevent)e);
}
static CUresult w_cuIpcOpenEventHandle(uintptr_t ctx, uintptr_t *e, const void *h) {
	CUipcEventHandle hh;
	CUevent ev = NULL;
	memcpy(&hh, h, sizeof hh);
	CTX(ctx);
	CUresult r = p_cuIpcOpenEventHandle(&ev, hh);
	*e = (uintptr_t)ev;
	return r;
}
// w_cuPointerGetAttribute reads one attribute into a zeroed 8-byte slot; the
// attributes this package asks for are at most 8 bytes wide.
static CUresult w_cuPointerGetAttribute(uintptr_t ctx, unsigned long long *v, int attr, unsigned long long p) {
	unsigned long long slot = 0;
	if (ctx != 0) CTX(ctx);
	CUresult r = p_cuPointerGetAttribute(&slot, attr, p);
	*v = slot;
	return r;
}
static CUresult w_cuModuleLoadData(uintptr_t ctx, uintptr_t *m, const void *image, char *log, unsigned int logLen) {
	// CU_JIT_ERROR_LOG_BUFFER = 5, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
	int opts[2] = {5, 6};
	void *vals[2] = {(void *)log, (void *)(uintptr_t)logLen};
	CUmodule mod = NULL;
	CTX(ctx);
	CUresult r = p_cuModuleLoadDataEx(&mod, image, 2, opts, vals);
	*m = (uintptr_t)mod;
	return r;
}
static CUresult w_cuModuleUnload(uintptr_t ctx, uintptr_t m) { CTX(ctx); return p_cuModuleUnload((CUmodule)m); }
static CUresult w_cuModuleGetFunction(uintptr_t ctx, uintptr_t *f, uintptr_t m, const char *name) {
	CUfunction fn = NULL;
	CTX(ctx);
	CUresult r = p_cuModuleGetFunction(&fn, (CUmodule)m, name);
	*f = (uintptr_t)fn;
	return r;
}
static CUresult w_cuOccupancy(uintptr_t ctx, int *n, uintptr_t f, int block, size_t shmem) {
	CTX(ctx);
	return p_cuOccupancyMaxActiveBlocksPerMultiprocessor(n, (CUfunction)f, block, shmem);
}
// w_cuLaunchKernel launches f with nargs parameters, each held in an 8-byte
// slot of args (4-byte parameters in the low half: the host is little-endian).
static CUresult w_cuLaunchKernel(uintptr_t ctx, uintptr_t f, unsigned int gx, unsigned int gy, unsigned int gz,
	unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem, uintptr_t s,
	unsigned long long *args, int nargs) {
	void *params[16];
	if (nargs > 16) return 1; // CUDA_ERROR_INVALID_VALUE
	for (int i = 0; i < nargs; i++) params[i] = &args[i];
	CTX(ctx);
	return p_cuLaunchKernel((CUfunction)f, gx, gy, gz, bx, by, bz, shmem, (CUstream)s, params, NULL);
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// maxKernelArgs is the most parameters Launch passes to a kernel; the C
// shim keeps the parameter pointer array on its stack.
const maxKernelArgs = 16

// cgoEnabled reports whether this build can reach the driver at all.
const cgoEnabled = true

func drvLoad() error {
	var buf [512]C.char
	switch C.gorun_cu_load(&buf[0], C.size_t(len(buf))) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("dlopen libcuda.so.1: %s", C.GoString(&buf[0]))
	default:
		return fmt.Errorf("libcuda.so.1 lacks %s (driver too old)", C.GoString(&buf[0]))
	}
}

func res(r C.CUresult) Result { return Result(r) }

func drvInit() Result { return res(C.w_cuInit()) }

func drvDriverGetVersion() (int, Result) {
	var v C.int
	r := C.w_cuDriverGetVersion(&v)
	return int(v), res(r)
}

func drvGetErrorName(r Result) string {
	s := C.w_cuGetErrorName(C.CUresult(r))
	if s == nil {
		return ""
	}
	return C.GoString(s)
}

func drvGetErrorString(r Result) string {
	s := C.w_cuGetErrorString(C.CUresult(r))
	if s == nil {
		return ""
	}
	return C.GoString(s)
}

func drvDeviceGetCount() (int, Result) {
	var n C.int
	r := C.w_cuDeviceGetCount(&n)
	return int(n), res(r)
}

func drvDeviceGet(ordinal int) (int, Result) {
	var d C.int
	r := C.w_cuDeviceGet(&d, C.int(ordinal))
	return int(d), res(r)
}

func drvDeviceGetName(d int) (string, Result) {
	var buf [256]C.char
	r := C.w_cuDeviceGetName(&buf[0], C.int(len(buf)), C.int(d))
	return C.GoString(&buf[0]), res(r)
}

func drvDeviceGetAttribute(attr, d int) (int, Result) {
	var v C.int
	r := C.w_cuDeviceGetAttribute(&v, C.int(attr), C.int(d))
	return int(v), res(r)
}

func drvDeviceTotalMem(d int) (uint64, Result) {
	var v C.ulonglong
	r := C.w_cuDeviceTotalMem(&v, C.int(d))
	return uint64(v), res(r)
}

func drvDeviceGetPCIBusID(d int) (string, Result) {
	var buf [64]C.char
	r := C.w_cuDeviceGetPCIBusId(&buf[0], C.int(len(buf)), C.int(d))
	return C.GoString(&buf[0]), res(r)
}

func drvDeviceGetUUID(d int) ([16]byte, Result) {
	var u [16]byte
	r := C.w_cuDeviceGetUuid(unsafe.Pointer(&u[0]), C.int(d))
	return u, res(r)
}

func drvDeviceCanAccessPeer(d, peer int) (bool, Result) {
	var v C.int
	r := C.w_cuDeviceCanAccessPeer(&v, C.int(d), C.int(peer))
	return v != 0, res(r)
}

func drvPrimaryCtxRetain(d int) (uintptr, Result) {
	var c C.uintptr_t
	r := C.w_cuDevicePrimaryCtxRetain(&c, C.int(d))
	return uintptr(c), res(r)
}

func drvPrimaryCtxRelease(d int) Result { return res(C.w_cuDevicePrimaryCtxRelease(C.int(d))) }

func drvPrimaryCtxGetState(d int) (uint32, bool, Result) {
	var flags C.uint
	var active C.int
	r := C.w_cuDevicePrimaryCtxGetState(C.int(d), &flags, &active)
	return uint32(flags), active != 0, res(r)
}

func drvPrimaryCtxSetFlags(d int, flags uint32) Result {
	return res(C.w_cuDevicePrimaryCtxSetFlags(C.int(d), C.uint(flags)))
}

func drvCtxSynchronize(ctx uintptr) Result { return res(C.w_cuCtxSynchronize(C.uintptr_t(ctx))) }

// drvCtxSetCurrent and drvCtxGetCurrent are the bare calls, which every
// wrapper above makes before its own (for BenchmarkDriverCalls).
func drvCtxSetCurrent(ctx uintptr) Result { return res(C.w_cuCtxSetCurrent(C.uintptr_t(ctx))) }

func drvCtxGetCurrent() (uintptr, Result) {
	var c C.uintptr_t
	r := C.w_cuCtxGetCurrent(&c)
	return uintptr(c), res(r)
}

func drvCtxEnablePeerAccess(ctx, peer uintptr) Result {
	return res(C.w_cuCtxEnablePeerAccess(C.uintptr_t(ctx), C.uintptr_t(peer)))
}

func drvMemGetInfo(ctx uintptr) (free, total uint64, r Result) {
	var f, t C.ulonglong
	rr := C.w_cuMemGetInfo(C.uintptr_t(ctx), &f, &t)
	return uint64(f), uint64(t), res(rr)
}

func drvMemAlloc(ctx uintptr, n uint64) (DevicePtr, Result) {
	var p C.ulonglong
	r := C.w_cuMemAlloc(C.uintptr_t(ctx), &p, C.ulonglong(n))
	return DevicePtr(p), res(r)
}

func drvMemFree(ctx uintptr, p DevicePtr) Result {
	return res(C.w_cuMemFree(C.uintptr_t(ctx), C.ulonglong(p)))
}

func drvMemHostAlloc(ctx uintptr, n uint64, flags uint32) (unsafe.Pointer, Result) {
	var p unsafe.Pointer
	r := C.w_cuMemHostAlloc(C.uintptr_t(ctx), &p, C.ulonglong(n), C.uint(flags))
	return p, res(r)
}

func drvMemFreeHost(ctx uintptr, p unsafe.Pointer) Result {
	return res(C.w_cuMemFreeHost(C.uintptr_t(ctx), p))
}

func drvMemGetAddressRange(ctx uintptr, p DevicePtr) (DevicePtr, uint64, Result) {
	var base, size C.ulonglong
	r := C.w_cuMemGetAddressRange(C.uintptr_t(ctx), &base, &size, C.ulonglong(p))
	return DevicePtr(base), uint64(size), res(r)
}

func drvMemcpy(ctx uintptr, dst, src DevicePtr, n uint64) Result {
	return res(C.w_cuMemcpy(C.uintptr_t(ctx), C.ulonglong(dst), C.ulonglong(src), C.ulonglong(n)))
}

func drvMemcpyAsync(ctx uintptr, dst, src DevicePtr, n uint64, s uintptr) Result {
	return res(C.w_cuMemcpyAsync(C.uintptr_t(ctx), C.ulonglong(dst), C.ulonglong(src), C.ulonglong(n), C.uintptr_t(s)))
}

func drvMemcpyHtoD(ctx uintptr, dst DevicePtr, src unsafe.Pointer, n uint64) Result {
	return res(C.w_cuMemcpyHtoD(C.uintptr_t(ctx), C.ulonglong(dst), src, C.ulonglong(n)))
}

func drvMemcpyDtoH(ctx uintptr, dst unsafe.Pointer, src DevicePtr, n uint64) Result {
	return res(C.w_cuMemcpyDtoH(C.uintptr_t(ctx), dst, C.ulonglong(src), C.ulonglong(n)))
}

func drvMemcpyDtoD(ctx uintptr, dst, src DevicePtr, n uint64) Result {
	return res(C.w_cuMemcpyDtoD(C.uintptr_t(ctx), C.ulonglong(dst), C.ulonglong(src), C.ulonglong(n)))
}

func drvMemcpyHtoDAsync(ctx uintptr, dst DevicePtr, src unsafe.Pointer, n uint64, s uintptr) Result {
	return res(C.w_cuMemcpyHtoDAsync(C.uintptr_t(ctx), C.ulonglong(dst), src, C.ulonglong(n), C.uintptr_t(s)))
}

func drvMemcpyDtoHAsync(ctx uintptr, dst unsafe.Pointer, src DevicePtr, n uint64, s uintptr) Result {
	return res(C.w_cuMemcpyDtoHAsync(C.uintptr_t(ctx), dst, C.ulonglong(src), C.ulonglong(n), C.uintptr_t(s)))
}

func drvMemcpyBatchAsync(ctx uintptr, dst, src, n *uint64, count int, s uintptr) Result {
	return res(C.w_cuMemcpyBatchAsync(C.uintptr_t(ctx), (*C.ulonglong)(unsafe.Pointer(dst)), (*C.ulonglong)(unsafe.Pointer(src)),
		(*C.ulonglong)(unsafe.Pointer(n)), C.ulonglong(count), C.uintptr_t(s)))
}

func drvHasMemcpyBatch() bool { return C.w_hasMemcpyBatch() != 0 }

func drvMemcpyDtoDAsync(ctx uintptr, dst, src DevicePtr, n uint64, s uintptr) Result {
	return res(C.w_cuMemcpyDtoDAsync(C.uintptr_t(ctx), C.ulonglong(dst), C.ulonglong(src), C.ulonglong(n), C.uintptr_t(s)))
}

func drvMemcpyPeerAsync(ctx uintptr, dst DevicePtr, dstCtx uintptr, src DevicePtr, srcCtx uintptr, n uint64, s uintptr) Result {
	return res(C.w_cuMemcpyPeerAsync(C.uintptr_t(ctx), C.ulonglong(dst), C.uintptr_t(dstCtx),
		C.ulonglong(src), C.uintptr_t(srcCtx), C.ulonglong(n), C.uintptr_t(s)))
}

func drvMemsetD8Async(ctx uintptr, p DevicePtr, v byte, n uint64, s uintptr) Result {
	return res(C.w_cuMemsetD8Async(C.uintptr_t(ctx), C.ulonglong(p), C.uchar(v), C.ulonglong(n), C.uintptr_t(s)))
}

func drvStreamCreate(ctx uintptr, flags uint32) (uintptr, Result) {
	var s C.uintptr_t
	r := C.w_cuStreamCreate(C.uintptr_t(ctx), &s, C.uint(flags))
	return uintptr(s), res(r)
}

func drvStreamDestroy(ctx, s uintptr) Result {
	return res(C.w_cuStreamDestroy(C.uintptr_t(ctx), C.uintptr_t(s)))
}

func drvStreamSynchronize(ctx, s uintptr) Result {
	return res(C.w_cuStreamSynchronize(C.uintptr_t(ctx), C.uintptr_t(s)))
}

func drvStreamQuery(ctx, s uintptr) Result {
	return res(C.w_cuStreamQuery(C.uintptr_t(ctx), C.uintptr_t(s)))
}

func drvStreamWaitEvent(ctx, s, e uintptr) Result {
	return res(C.w_cuStreamWaitEvent(C.uintptr_t(ctx), C.uintptr_t(s), C.uintptr_t(e)))
}

func drvEventCreate(ctx uintptr, flags uint32) (uintptr, Result) {
	var e C.uintptr_t
	r := C.w_cuEventCreate(C.uintptr_t(ctx), &e, C.uint(flags))
	return uintptr(e), res(r)
}

func drvEventDestroy(ctx, e uintptr) Result {
	return res(C.w_cuEventDestroy(C.uintptr_t(ctx), C.uintptr_t(e)))
}

func drvEventRecord(ctx, e, s uintptr) Result {
	return res(C.w_cuEventRecord(C.uintptr_t(ctx), C.uintptr_t(e), C.uintptr_t(s)))
}

func drvEventSynchronize(ctx, e uintptr) Result {
	return res(C.w_cuEventSynchronize(C.uintptr_t(ctx), C.uintptr_t(e)))
}

func drvEventQuery(ctx, e uintptr) Result {
	return res(C.w_cuEventQuery(C.uintptr_t(ctx), C.uintptr_t(e)))
}

func drvEventElapsedTime(ctx, start, end uintptr) (float32, Result) {
	var ms C.float
	r := C.w_cuEventElapsedTime(C.uintptr_t(ctx), &ms, C.uintptr_t(start), C.uintptr_t(end))
	return float32(ms), res(r)
}

func drvIpcGetMemHandle(ctx uintptr, p DevicePtr) ([64]byte, Result) {
	var h [64]byte
	r := C.w_cuIpcGetMemHandle(C.uintptr_t(ctx), unsafe.Pointer(&h[0]), C.ulonglong(p))
	return h, res(r)
}

func drvIpcOpenMemHandle(ctx uintptr, h [64]byte, flags uint32) (DevicePtr, Result) {
	var p C.ulonglong
	r := C.w_cuIpcOpenMemHandle(C.uintptr_t(ctx), &p, unsafe.Pointer(&h[0]), C.uint(flags))
	return DevicePtr(p), res(r)
}

func drvIpcCloseMemHandle(ctx uintptr, p DevicePtr) Result {
	return res(C.w_cuIpcCloseMemHandle(C.uintptr_t(ctx), C.ulonglong(p)))
}

func drvIpcGetEventHandle(ctx, e uintptr) ([64]byte, Result) {
	var h [64]byte
	r := C.w_cuIpcGetEventHandle(C.uintptr_t(ctx), unsafe.Pointer(&h[0]), C.uintptr_t(e))
	return h, res(r)
}

func drvIpcOpenEventHandle(ctx uintptr, h [64]byte) (uintptr, Result) {
	var e C.uintptr_t
	r := C.w_cuIpcOpenEventHandle(C.uintptr_t(ctx), &e, unsafe.Pointer(&h[0]))
	return uintptr(e), res(r)
}

func drvPointerGetAttribute(ctx uintptr, attr int, p uintptr) (uint64, Result) {
	var v C.ulonglong
	r := C.w_cuPointerGetAttribute(C.uintptr_t(ctx), &v, C.int(attr), C.ulonglong(p))
	return uint64(v), res(r)
}

func drvModuleLoadData(ctx uintptr, image []byte) (uintptr, string, Result) {
	// The driver reads PTX as a C string: copy it out of Go memory with a
	// terminating NUL.
	cimg := C.malloc(C.size_t(len(image) + 1))
	if cimg == nil {
		return 0, "", resultOutOfHostMemory
	}
	defer C.free(cimg)
	dst := unsafe.Slice((*byte)(cimg), len(image)+1)
	copy(dst, image)
	dst[len(image)] = 0
	var log [8192]C.char
	var m C.uintptr_t
	r := C.w_cuModuleLoadData(C.uintptr_t(ctx), &m, cimg, &log[0], C.uint(len(log)))
	return uintptr(m), C.GoString(&log[0]), res(r)
}

func drvModuleUnload(ctx, m uintptr) Result {
	return res(C.w_cuModuleUnload(C.uintptr_t(ctx), C.uintptr_t(m)))
}

func drvModuleGetFunction(ctx, m uintptr, name string) (uintptr, Result) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var f C.uintptr_t
	r := C.w_cuModuleGetFunction(C.uintptr_t(ctx), &f, C.uintptr_t(m), cname)
	return uintptr(f), res(r)
}

func drvOccupancy(ctx, f uintptr, block, shmem int) (int, Result) {
	var n C.int
	r := C.w_cuOccupancy(C.uintptr_t(ctx), &n, C.uintptr_t(f), C.int(block), C.size_t(shmem))
	return int(n), res(r)
}

func drvLaunchKernel(ctx, f uintptr, grid, block [3]uint32, shmem uint32, s uintptr, args *[maxKernelArgs]uint64, nargs int) Result {
	if nargs > maxKernelArgs {
		return ErrorInvalidValue
	}
	return res(C.w_cuLaunchKernel(C.uintptr_t(ctx), C.uintptr_t(f),
		C.uint(grid[0]), C.uint(grid[1]), C.uint(grid[2]),
		C.uint(block[0]), C.uint(block[1]), C.uint(block[2]),
		C.uint(shmem), C.uintptr_t(s), (*C.ulonglong)(unsafe.Pointer(&args[0])), C.int(nargs)))
}
