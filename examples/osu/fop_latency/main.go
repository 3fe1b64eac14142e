// Fop_latency is OSU's osu_fop_latency method in Go (osu.RMALatency): rank
// 0 fetches and adds one int64 of rank 1's window, flushing after each.
package main

import "github.com/gorun/gorun/examples/osu/internal/osu"

func main() { osu.RMALatency("fop_latency", "fop") }
