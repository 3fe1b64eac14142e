// Acc_latency is OSU's osu_acc_latency method in Go (osu.RMALatency): rank
// 0 accumulates (Sum, int32) into rank 1's window, flushing after each.
package main

import "github.com/gorun/gorun/examples/osu/internal/osu"

func main() { osu.RMALatency("acc_latency", "acc") }
