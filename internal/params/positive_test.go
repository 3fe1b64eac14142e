package params

import (
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
