package ofi

import "testing"

func TestRegCache(t *testing.T) {
	var released []uintptr
	c := newRegCache(100, func(e *regEntry[int]) { released = append(released, e.key.addr) })
	if c.get(1, 50) != nil {
		t.Fatal("hit in an empty cache")
	}
	a := c.put(1, 50, 10)
	if e := c.get(1, 50); e != a || a.refs != 2 {
		t.Fatalf("second reference: %v refs %d", e, a.refs)
	}
	if c.get(1, 51) != nil {
		t.Fatal("hit for another length")
	}
	c.unref(a)
	c.unref(a) // unused now: kept, 50 bytes idle
	if len(released) != 0 || c.idle != 50 {
		t.Fatalf("released %v, idle %d", released, c.idle)
	}
	b := c.put(2, 40, 20)
	c.unref(b) // 90 idle: both kept
	if e := c.get(1, 50); e != a {
		t.Fatal("an idle entry is not reused")
	}
	c.unref(a) // a is now the most recent
	d := c.put(3, 30, 30)
	c.unref(d) // 120 idle > 100: the oldest unused (b) goes
	if len(released) != 1 || released[0] != 2 || c.idle != 80 {
		t.Fatalf("released %v, idle %d; want [2], 80", released, c.idle)
	}
	held := c.get(1, 50)
	big := c.put(4, 200, 40)
	c.unref(big) // over the limit alone: released, and so is d; held stays
	if c.get(1, 50) != held || held.refs != 2 {
		t.Fatal("an entry in use was released")
	}
	if len(released) != 3 {
		t.Fatalf("released %v", released)
	}
	c.clear()
	if len(released) != 4 || len(c.entries) != 0 {
		t.Fatalf("clear released %v, left %d", released, len(c.entries))
	}
}
