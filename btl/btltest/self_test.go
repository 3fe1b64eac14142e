package btltest_test

import (
	"testing"

	"github.com/gorun/gorun/btl/btltest"
	_ "github.com/gorun/gorun/btl/self"
)

// TestSelf runs the cases that apply to a transport that reaches only its
// own rank.
func TestSelf(t *testing.T) { btltest.Run(t, btltest.Transport{Name: "self", Loopback: true}) }
