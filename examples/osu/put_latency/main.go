// Put_latency is OSU's osu_put_latency method in Go (osu.RMALatency): rank
// 0 puts into rank 1's window, flushing after each Put.
package main

import "github.com/gorun/gorun/examples/osu/internal/osu"

func main() { osu.RMALatency("put_latency", "put") }
