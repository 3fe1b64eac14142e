//go:build cgo && ofi

package ofi

/*
#cgo CFLAGS: -O2
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_eq.h>

// libfabric is loaded at run time (doc.go, "Building"): these are the only
// exported functions used; everything else (fi_send, fi_cq_read, ...) is a
// static inline of the headers that calls through the objects' ops tables.
static void *gofi_lib;
static int (*p_getinfo)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *, struct fi_info **);
static void (*p_freeinfo)(struct fi_info *);
static struct fi_info *(*p_dupinfo)(const struct fi_info *);
static int (*p_fabric)(struct fi_fabric_attr *, struct fid_fabric **, void *);
static const char *(*p_strerror)(int);
static uint32_t (*p_version)(void);

static const char *gofi_load(const char *path) {
	if (gofi_lib) return NULL;
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) return dlerror();
	p_getinfo = dlsym(h, "fi_getinfo");
	p_freeinfo = dlsym(h, "fi_freeinfo");
	p_dupinfo = dlsym(h, "fi_dupinfo");
	p_fabric = dlsym(h, "fi_fabric");
	p_strerror = dlsym(h, "fi_strerror");
	p_version = dlsym(h, "fi_version");
	if (!p_getinfo || !p_freeinfo || !p_dupinfo || !p_fabric || !p_strerror || !p_version) {
		dlclose(h);
		return "a symbol of libfabric's API is missing";
	}
	gofi_lib = h;
	return NULL;
}

static uint32_t gofi_libversion(void) { return p_version(); }
static const char *gofi_strerror(int e) { return p_strerror(e < 0 ? -e : e); }
static void gofi_freeinfo(struct fi_info *i) { p_freeinfo(i); }
static struct fi_info *gofi_dupinfo(struct fi_info *i) { return p_dupinfo(i); }

// gofi_getinfo asks for reliable datagram endpoints with messages and RMA,
// ordered sends, from provider prov (NULL: any), bound to node (NULL: any).
static int gofi_getinfo(const char *prov, const char *node, struct fi_info **out) {
	struct fi_info *h = p_dupinfo(NULL);
	if (!h) return -FI_ENOMEM;
	h->caps = FI_MSG | FI_RMA | FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	h->ep_attr->type = FI_EP_RDM;
	h->tx_attr->msg_order = FI_ORDER_SAS;
	h->rx_attr->msg_order = FI_ORDER_SAS;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
	if (prov && *prov) h->fabric_attr->prov_name = strdup(prov);
	int r = p_getinfo(FI_VERSION(1, 9), node, NULL, node ? FI_SOURCE : 0, h, out);
	p_freeinfo(h);
	return r;
}

typedef struct {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_ep *ep;
	struct fid_av *av;
	struct fid_cq *cq;
	int waitfd;
	struct fi_context2 *ctx;
	int nctx;
	char *buf;     // nrx receive buffers, then ntx send buffers, of bufsize bytes each
	size_t bufsize;
	int nrx, ntx;
	struct fid_mr *bufmr;
	void *bufdesc;
	char errbuf[256];
} gofi;

typedef struct {
	int32_t idx;
	int32_t err;
	uint64_t len;
} gofi_ev;

static int gofi_close(gofi *g) {
	if (g->ep) fi_close(&g->ep->fid);
	if (g->bufmr) fi_close(&g->bufmr->fid);
	if (g->av) fi_close(&g->av->fid);
	if (g->cq) fi_close(&g->cq->fid);
	if (g->domain) fi_close(&g->domain->fid);
	if (g->fabric) fi_close(&g->fabric->fid);
	if (g->info) p_freeinfo(g->info);
	free(g->buf);
	free(g->ctx);
	memset(g, 0, sizeof *g);
	return 0;
}

// gofi_close_ep closes the endpoint alone: traffic stops, and no
// operation touches memory any more.
static void gofi_close_ep(gofi *g) {
	if (g->ep) fi_close(&g->ep->fid);
	g->ep = NULL;
}

static int gofi_needs_local(gofi *g) {
	return (g->info->domain_attr->mr_mode & FI_MR_LOCAL) != 0;
}

static int gofi_bind_mr(gofi *g, struct fid_mr *mr) {
	if (!(g->info->domain_attr->mr_mode & FI_MR_ENDPOINT)) return 0;
	int r = fi_mr_bind(mr, &g->ep->fid, 0);
	if (r) return r;
	return fi_mr_enable(mr);
}

// gofi_setup opens everything on info (which g takes over). step names
// the call that failed.
static int gofi_setup(gofi *g, struct fi_info *info, int nrx, int ntx, size_t bufsize, int nctx, int wantfd, const char **step) {
	int r;
	g->info = info;
	g->waitfd = -1;
	*step = "fi_fabric";
	if ((r = p_fabric(info->fabric_attr, &g->fabric, NULL))) return r;
	*step = "fi_domain";
	if ((r = fi_domain(g->fabric, info, &g->domain, NULL))) return r;
	struct fi_cq_attr cqa = {0};
	cqa.format = FI_CQ_FORMAT_DATA;
	cqa.size = nctx;
	cqa.wait_obj = wantfd ? FI_WAIT_FD : FI_WAIT_NONE;
	*step = "fi_cq_open";
	r = fi_cq_open(g->domain, &cqa, &g->cq, NULL);
	if (r && wantfd) {
		cqa.wait_obj = FI_WAIT_NONE;
		r = fi_cq_open(g->domain, &cqa, &g->cq, NULL);
	} else if (!r && wantfd) {
		if (fi_control(&g->cq->fid, FI_GETWAIT, &g->waitfd)) g->waitfd = -1;
	}
	if (r) return r;
	struct fi_av_attr ava = {0};
	ava.type = info->domain_attr->av_type;
	*step = "fi_av_open";
	if ((r = fi_av_open(g->domain, &ava, &g->av, NULL))) return r;
	*step = "fi_endpoint";
	if ((r = fi_endpoint(g->domain, info, &g->ep, NULL))) return r;
	*step = "fi_ep_bind(cq)";
	if ((r = fi_ep_bind(g->ep, &g->cq->fid, FI_TRANSMIT | FI_RECV))) return r;
	*step = "fi_ep_bind(av)";
	if ((r = fi_ep_bind(g->ep, &g->av->fid, 0))) return r;
	*step = "fi_enable";
	if ((r = fi_enable(g->ep))) return r;

	g->nctx = nctx;
	g->ctx = calloc(nctx, sizeof *g->ctx);
	g->bufsize = bufsize;
	g->nrx = nrx;
	g->ntx = ntx;
	*step = "buffers";
	if (posix_memalign((void **)&g->buf, 4096, (size_t)(nrx + ntx) * bufsize) || !g->ctx) return -FI_ENOMEM;
	memset(g->buf, 0, (size_t)(nrx + ntx) * bufsize);
	if (gofi_needs_local(g)) {
		*step = "fi_mr_reg(buffers)";
		r = fi_mr_reg(g->domain, g->buf, (size_t)(nrx + ntx) * bufsize, FI_SEND | FI_RECV, 0, 0, 0, &g->bufmr, NULL);
		if (r) return r;
		if ((r = gofi_bind_mr(g, g->bufmr))) return r;
		g->bufdesc = fi_mr_desc(g->bufmr);
	}
	return 0;
}

static int gofi_getname(gofi *g, void *buf, size_t *len) {
	return fi_getname(&g->ep->fid, buf, len);
}

static int gofi_av_insert(gofi *g, void *addr, fi_addr_t *out) {
	int r = fi_av_insert(g->av, addr, 1, out, 0, NULL);
	if (r == 1) return 0;
	return r < 0 ? r : -FI_EINVAL;
}

// gofi_post_recv posts receive buffer i (context i).
static ssize_t gofi_post_recv(gofi *g, int i) {
	return fi_recv(g->ep, g->buf + (size_t)i * g->bufsize, g->bufsize, g->bufdesc, FI_ADDR_UNSPEC, &g->ctx[i]);
}

// gofi_send sends n bytes of send buffer i (context nrx+i) to dest.
static ssize_t gofi_send(gofi *g, int i, size_t n, fi_addr_t dest) {
	return fi_send(g->ep, g->buf + (size_t)(g->nrx + i) * g->bufsize, n, g->bufdesc, dest, &g->ctx[g->nrx + i]);
}

// gofi_inject sends n bytes of send buffer i at once: the buffer is free
// again on return and no completion follows.
static ssize_t gofi_inject(gofi *g, int i, size_t n, fi_addr_t dest) {
	return fi_inject(g->ep, g->buf + (size_t)(g->nrx + i) * g->bufsize, n, dest);
}

static ssize_t gofi_rma(gofi *g, int write, int ctx, void *buf, size_t n, void *desc, fi_addr_t dest, uint64_t addr, uint64_t key) {
	if (write) {
		// Completion once the bytes are in the target's memory, not just
		// sent: RMADone promises that (btl/rma.go), and p2p's FIN that
		// follows a Put is not ordered after it.
		struct iovec iov = {.iov_base = buf, .iov_len = n};
		struct fi_rma_iov riov = {.addr = addr, .len = n, .key = key};
		struct fi_msg_rma msg = {
			.msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = dest,
			.rma_iov = &riov, .rma_iov_count = 1, .context = &g->ctx[ctx],
		};
		return fi_writemsg(g->ep, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
	}
	return fi_read(g->ep, buf, n, desc, dest, addr, key, &g->ctx[ctx]);
}

static int gofi_mr_reg(gofi *g, void *buf, size_t n, uint64_t key, struct fid_mr **mr, uint64_t *outkey, void **desc) {
	int r = fi_mr_reg(g->domain, buf, n, FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, 0, key, 0, mr, NULL);
	if (r) return r;
	if ((r = gofi_bind_mr(g, *mr))) {
		fi_close(&(*mr)->fid);
		*mr = NULL;
		return r;
	}
	*outkey = fi_mr_key(*mr);
	*desc = fi_mr_desc(*mr);
	return 0;
}

static void gofi_mr_close(struct fid_mr *mr) { fi_close(&mr->fid); }

// gofi_poll reads up to max completions into ev. An error completion is
// returned alone, with err set and its text in g->errbuf.
static ssize_t gofi_poll(gofi *g, gofi_ev *ev, int max) {
	struct fi_cq_data_entry e[32];
	if (max > 32) max = 32;
	ssize_t n = fi_cq_read(g->cq, e, max);
	if (n > 0) {
		for (ssize_t i = 0; i < n; i++) {
			ev[i].idx = e[i].op_context ? (int32_t)((struct fi_context2 *)e[i].op_context - g->ctx) : -1;
			ev[i].err = 0;
			ev[i].len = e[i].len;
		}
		return n;
	}
	if (n == -FI_EAGAIN) return 0;
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry ee;
		memset(&ee, 0, sizeof ee);
		ssize_t r = fi_cq_readerr(g->cq, &ee, 0);
		if (r < 0) return r == -FI_EAGAIN ? 0 : r;
		ev[0].idx = ee.op_context ? (int32_t)((struct fi_context2 *)ee.op_context - g->ctx) : -1;
		ev[0].err = ee.err ? ee.err : FI_EIO;
		ev[0].len = ee.len;
		const char *s = fi_cq_strerror(g->cq, ee.prov_errno, ee.err_data, NULL, 0);
		snprintf(g->errbuf, sizeof g->errbuf, "%s (provider: %s)", p_strerror(ev[0].err), s ? s : "?");
		return 1;
	}
	return n;
}

// gofi_wait sleeps until the completion queue's wait fd is readable or ns
// nanoseconds have passed, unless fi_trywait says there is work to do.
// It returns 1 when it may have slept, 0 when the caller must poll first.
static int gofi_wait(gofi *g, long ns) {
	if (g->waitfd < 0) return -1;
	struct fid *f = &g->cq->fid;
	if (fi_trywait(g->fabric, &f, 1) != FI_SUCCESS) return 0;
	struct pollfd p = {.fd = g->waitfd, .events = POLLIN};
	struct timespec ts = {.tv_sec = ns / 1000000000L, .tv_nsec = ns % 1000000000L};
	ppoll(&p, 1, &ts, NULL);
	return 1;
}

static const char *gofi_info_prov(struct fi_info *i) { return i->fabric_attr->prov_name; }
static const char *gofi_info_fabric(struct fi_info *i) { return i->fabric_attr->name; }
static const char *gofi_info_domain(struct fi_info *i) { return i->domain_attr->name; }
static struct fi_info *gofi_info_next(struct fi_info *i) { return i->next; }
static uint64_t gofi_info_caps(struct fi_info *i) { return i->caps; }
static size_t gofi_info_inject(struct fi_info *i) { return i->tx_attr->inject_size; }
static size_t gofi_info_maxmsg(struct fi_info *i) { return i->ep_attr->max_msg_size; }
static uint64_t gofi_info_mrmode(struct fi_info *i) { return i->domain_attr->mr_mode; }
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// Flags of libfabric used from Go.
const (
	fiHMEM       = uint64(C.FI_HMEM)
	fiMRVirtAddr = uint64(C.FI_MR_VIRT_ADDR)
	errAgain     = -int(C.FI_EAGAIN)
)

var (
	loadOnce sync.Once
	loadErr  error
)

// load opens libfabric once per process (GORUN_OFI_LIB).
func load() error {
	loadOnce.Do(func() {
		path := C.CString(pLib())
		defer C.free(unsafe.Pointer(path))
		if msg := C.gofi_load(path); msg != nil {
			loadErr = fmt.Errorf("%w: %s", ErrNoLibfabric, C.GoString(msg))
		}
	})
	return loadErr
}

// libVersion is the loaded libfabric's version, "1.17".
func libVersion() string {
	v := uint32(C.gofi_libversion())
	return fmt.Sprintf("%d.%d", v>>16, v&0xffff)
}

// fiError is a libfabric return code with the call that returned it.
type fiError struct {
	call string
	code int
}

func (e *fiError) Error() string {
	return fmt.Sprintf("%s: %s (%d)", e.call, C.GoString(C.gofi_strerror(C.int(e.code))), e.code)
}

func fiErr(call string, code C.int) error {
	if code == 0 {
		return nil
	}
	return &fiError{call, int(code)}
}

// candidate is one provider offered by fi_getinfo.
type candidate struct {
	prov, fabric, domain string
	caps                 uint64
	info                 *C.struct_fi_info
}

// getinfo lists the providers that offer what the module needs
// (gofi_getinfo's hints), restricted to prov when not empty and bound to
// node when not empty. free releases the list.
func getinfo(prov, node string) (cands []candidate, free func(), err error) {
	var cp, cn *C.char
	if prov != "" {
		cp = C.CString(prov)
		defer C.free(unsafe.Pointer(cp))
	}
	if node != "" {
		cn = C.CString(node)
		defer C.free(unsafe.Pointer(cn))
	}
	var list *C.struct_fi_info
	if r := C.gofi_getinfo(cp, cn, &list); r != 0 {
		return nil, func() {}, fiErr("fi_getinfo", r)
	}
	for i := list; i != nil; i = C.gofi_info_next(i) {
		cands = append(cands, candidate{
			prov:   C.GoString(C.gofi_info_prov(i)),
			fabric: C.GoString(C.gofi_info_fabric(i)),
			domain: C.GoString(C.gofi_info_domain(i)),
			caps:   uint64(C.gofi_info_caps(i)),
			info:   i,
		})
	}
	return cands, func() { C.gofi_freeinfo(list) }, nil
}

// fabric is the C side of one module: fabric, domain, endpoint, address
// vector, completion queue, and the receive and send buffers.
type fabric struct {
	g      *C.gofi
	bufsz  int
	inject int
	maxMsg int
	mrMode uint64
	evs    [32]C.gofi_ev
}

// openFabric opens everything on a copy of c.info.
func openFabric(c candidate, nrx, ntx, bufsz, nctx int) (*fabric, error) {
	g := (*C.gofi)(C.calloc(1, C.sizeof_gofi))
	info := C.gofi_dupinfo(c.info)
	var step *C.char
	if r := C.gofi_setup(g, info, C.int(nrx), C.int(ntx), C.size_t(bufsz), C.int(nctx), 1, &step); r != 0 {
		err := fiErr(C.GoString(step), r)
		C.gofi_close(g)
		C.free(unsafe.Pointer(g))
		return nil, err
	}
	f := &fabric{
		g: g, bufsz: bufsz,
		inject: int(C.gofi_info_inject(info)),
		maxMsg: int(C.gofi_info_maxmsg(info)),
		mrMode: uint64(C.gofi_info_mrmode(info)),
	}
	// size_t values: SIZE_MAX (unbounded) must not turn negative.
	if f.maxMsg <= 0 || f.maxMsg > 1<<30 {
		f.maxMsg = 1 << 30
	}
	if f.inject < 0 || f.inject > bufsz {
		f.inject = bufsz
	}
	return f, nil
}

func (f *fabric) close() {
	if f.g != nil {
		C.gofi_close(f.g)
		C.free(unsafe.Pointer(f.g))
		f.g = nil
	}
}

// closeEndpoint stops all traffic; close releases the rest.
func (f *fabric) closeEndpoint() {
	if f.g != nil {
		C.gofi_close_ep(f.g)
	}
}

func (f *fabric) name() ([]byte, error) {
	var buf [256]byte
	n := C.size_t(len(buf))
	if r := C.gofi_getname(f.g, unsafe.Pointer(&buf[0]), &n); r != 0 {
		return nil, fiErr("fi_getname", r)
	}
	return append([]byte(nil), buf[:n]...), nil
}

func (f *fabric) avInsert(addr []byte) (uint64, error) {
	var out C.fi_addr_t
	cb := C.CBytes(addr)
	defer C.free(cb)
	if r := C.gofi_av_insert(f.g, cb, &out); r != 0 {
		return 0, fiErr("fi_av_insert", r)
	}
	return uint64(out), nil
}

// buf is buffer i: receive buffers are 0..nrx-1, send buffers nrx.. .
func (f *fabric) buf(i int) []byte {
	p := unsafe.Add(unsafe.Pointer(f.g.buf), uintptr(i)*uintptr(f.bufsz))
	return unsafe.Slice((*byte)(p), f.bufsz)
}

func (f *fabric) postRecv(i int) int { return int(C.gofi_post_recv(f.g, C.int(i))) }

func (f *fabric) send(i, n int, dest uint64) int {
	return int(C.gofi_send(f.g, C.int(i), C.size_t(n), C.fi_addr_t(dest)))
}

func (f *fabric) injectMsg(i, n int, dest uint64) int {
	return int(C.gofi_inject(f.g, C.int(i), C.size_t(n), C.fi_addr_t(dest)))
}

// rma starts an RDMA read (or write) of n bytes at local p (registered
// with desc) from (to) addr under key at dest, with context ctx.
func (f *fabric) rma(write bool, ctx int, p unsafe.Pointer, n int, desc unsafe.Pointer, dest, addr, key uint64) int {
	w := C.int(0)
	if write {
		w = 1
	}
	return int(C.gofi_rma(f.g, w, C.int(ctx), p, C.size_t(n), desc, C.fi_addr_t(dest), C.uint64_t(addr), C.uint64_t(key)))
}

// mr is one memory registration.
type mr struct {
	h    *C.struct_fid_mr
	key  uint64
	desc unsafe.Pointer
}

func (f *fabric) register(p unsafe.Pointer, n int, reqKey uint64) (mr, error) {
	var m mr
	var key C.uint64_t
	var desc unsafe.Pointer
	if r := C.gofi_mr_reg(f.g, p, C.size_t(n), C.uint64_t(reqKey), &m.h, &key, &desc); r != 0 {
		return mr{}, fiErr("fi_mr_reg", r)
	}
	m.key, m.desc = uint64(key), desc
	return m, nil
}

func (f *fabric) deregister(m mr) {
	if m.h != nil {
		C.gofi_mr_close(m.h)
	}
}

// event is one completion.
type event struct {
	idx int
	err int
	len int
}

// poll reads completions into evs; an error completion comes alone with
// its text.
func (f *fabric) poll(evs []event) (int, string, error) {
	n := int(C.gofi_poll(f.g, &f.evs[0], C.int(min(len(evs), len(f.evs)))))
	if n < 0 {
		return 0, "", fiErr("fi_cq_read", C.int(n))
	}
	for i := 0; i < n; i++ {
		e := &f.evs[i]
		evs[i] = event{idx: int(e.idx), err: int(e.err), len: int(e.len)}
	}
	if n == 1 && evs[0].err != 0 {
		return 1, C.GoString(&f.g.errbuf[0]), nil
	}
	return n, "", nil
}

// wait sleeps on the completion queue's fd for at most ns: 1 when it may
// have slept, 0 when there is work to poll first, -1 without a wait fd.
func (f *fabric) wait(ns int64) int { return int(C.gofi_wait(f.g, C.long(ns))) }

func (f *fabric) hasWaitFD() bool { return f.g.waitfd >= 0 }

// errText is the text of a libfabric error code.
func errText(code int) string { return C.GoString(C.gofi_strerror(C.int(code))) }

// isEAGAIN reports a "try again" return of a data call.
func isEAGAIN(r int) bool { return r == errAgain }
