package btltest_test

import (
	"testing"

	"github.com/gorun/gorun/btl/btltest"
	_ "github.com/gorun/gorun/btl/tcp"
)

func TestTCP(t *testing.T) { btltest.Run(t, btltest.Transport{Name: "tcp"}) }

func BenchmarkTCP(b *testing.B) { btltest.Bench(b, btltest.Transport{Name: "tcp"}) }
