package gpu

import (
	"fmt"
	"strconv"
	"strings"
)

// formatCPUList writes ascending CPU numbers as Linux and nvidia-smi do:
// "0-31,64-95".
func formatCPUList(cpus []int) string {
	if len(cpus) == 0 {
		return "N/A"
	}
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j == i {
			fmt.Fprintf(&b, "%d", cpus[i])
		} else {
			fmt.Fprintf(&b, "%d-%d", cpus[i], cpus[j])
		}
		i = j + 1
	}
	return b.String()
}

// parseCPUList reads the Linux list format ("0-3,8,10-11").
func parseCPUList(s string) ([]int, error) {
	var cpus []int
	if s == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("cpu list %q: %w", s, err)
			}
		}
		if b < a {
			return nil, fmt.Errorf("cpu list %q: range %d-%d", s, a, b)
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// cpusOfMask lists the CPUs set in a mask of 64-bit words (NVML's form).
func cpusOfMask(words []uint) []int {
	var cpus []int
	for w, bits := range words {
		for i := 0; i < 64; i++ {
			if uint64(bits)>>i&1 != 0 {
				cpus = append(cpus, w*64+i)
			}
		}
	}
	return cpus
}
