package params

import (
	"fmt"
	"testing"
	"time"
)

// TestPositiveDuration: zero and negative values fall back to the default
// (a ticker given them panicked: GORUN_AGENT_HEARTBEAT=0 crashed gorun);
// a positive one is taken.
func TestPositiveDuration(t *testing.T) {
	get := PositiveDuration("GORUN_TEST_POSITIVE", time.Second, "test")
	for v, want := range map[string]time.Duration{"0": time.Second, "-5ms": time.Second, "": time.Second, "nonsense": time.Second, "20ms": 20 * time.Millisecond} {
		t.Setenv("GORUN_TEST_POSITIVE", v)
		if got := get(); got != want {
			t.Errorf("GORUN_TEST_POSITIVE=%q: %v, want %v", v, got, want)
		}
	}
}

// TestIntCheck: a value that parses but fails the check falls back to the
// default, as a malformed one does; a value that passes is taken.
func TestIntCheck(t *testing.T) {
	even := func(n int) error {
		if n%2 != 0 {
			return fmt.Errorf("want an even number")
		}
		return nil
	}
	get := IntCheck("GORUN_TEST_INTCHECK", 4, "test", even)
	for v, want := range map[string]int{"": 4, "3": 4, "x": 4, "8": 8, "-2": -2} {
		t.Setenv("GORUN_TEST_INTCHECK", v)
		got, taken := get()
		if got != want {
			t.Errorf("GORUN_TEST_INTCHECK=%q: %d, want %d", v, got, want)
		}
		if wantTaken := v == "8" || v == "-2"; taken != wantTaken {
			t.Errorf("GORUN_TEST_INTCHECK=%q: taken %v, want %v", v, taken, wantTaken)
		}
	}
}
