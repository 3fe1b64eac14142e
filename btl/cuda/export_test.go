package cuda

import (
	"testing"

	drv "github.com/gorun/gorun/gpu/cuda"
)

// TestExportCache checks the cache's rules without a GPU: a hit needs the
// same device, base, buffer id and size; the least recently used entry
// goes beyond the limit; a limit of 0 caches nothing.
func TestExportCache(t *testing.T) {
	h := func(b byte) drv.IPCMemHandle { return drv.IPCMemHandle{0: b} }
	c := exportCache{limit: 2}
	a := exportKey{dev: 0, base: 0x1000, id: 7}
	c.put(a, 4096, h(1))
	if got, ok := c.get(a, 4096); !ok || got != h(1) {
		t.Fatalf("get after put: %v %v", got[0], ok)
	}
	for _, miss := range []struct {
		what string
		k    exportKey
		size uint64
	}{
		{"reused address, new buffer id", exportKey{0, 0x1000, 8}, 4096},
		{"other device", exportKey{1, 0x1000, 7}, 4096},
		{"other size", a, 8192},
	} {
		if _, ok := c.get(miss.k, miss.size); ok {
			t.Errorf("%s: a hit", miss.what)
		}
	}
	b, d := exportKey{0, 0x2000, 9}, exportKey{0, 0x3000, 10}
	c.put(b, 4096, h(2))
	c.get(a, 4096) // a is now more recent than b
	c.put(d, 4096, h(3))
	if _, ok := c.get(b, 4096); ok {
		t.Error("the least recently used entry stayed beyond the limit")
	}
	if _, ok := c.get(a, 4096); !ok {
		t.Error("a recently used entry was dropped")
	}
	if len(c.m) != 2 {
		t.Errorf("%d entries, limit 2", len(c.m))
	}
	off := exportCache{}
	off.put(a, 4096, h(1))
	if _, ok := off.get(a, 4096); ok {
		t.Error("limit 0 cached")
	}
}
