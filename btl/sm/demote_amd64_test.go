package sm

import (
	"os"
	"strings"
	"testing"
)

// TestCanDemote: the CPUID bit read for CLDEMOTE agrees with the
// kernel's flags in /proc/cpuinfo.
func TestCanDemote(t *testing.T) {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Skip(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "flags") {
			continue
		}
		has := false
		for _, f := range strings.Fields(l) {
			has = has || f == "cldemote"
		}
		if has != canDemote {
			t.Fatalf("/proc/cpuinfo says cldemote %v, CPUID bit 25 of leaf 7 says %v", has, canDemote)
		}
		return
	}
	t.Skip("no flags line in /proc/cpuinfo")
}
