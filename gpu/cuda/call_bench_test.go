package cuda

import "testing"

// BenchmarkDriverCalls times single driver calls through this package's
// cgo wrappers on device 0: cuCtxSetCurrent and cuCtxGetCurrent alone
// (every wrapper makes the first before its own call), and cuStreamQuery
// of an idle stream through its wrapper, which includes cuCtxSetCurrent
// (coll/MEASUREMENTS.md, GPU collectives, where a push call's time goes).
func BenchmarkDriverCalls(b *testing.B) {
	if ok, why := Available(); !ok {
		b.Skip("no GPU: " + why)
	}
	c, err := PrimaryContext(0)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Release()
	s, err := c.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Destroy()
	must := func(r Result) {
		if r != Success {
			b.Fatal(check("driver call", r))
		}
	}
	b.Run("ctx-set-current", func(b *testing.B) {
		for range b.N {
			must(drvCtxSetCurrent(c.h))
		}
	})
	b.Run("ctx-get-current", func(b *testing.B) {
		for range b.N {
			_, r := drvCtxGetCurrent()
			must(r)
		}
	})
	b.Run("query-idle", func(b *testing.B) {
		for range b.N {
			must(drvStreamQuery(c.h, s.h))
		}
	})
}
