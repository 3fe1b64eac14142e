// Get_latency is OSU's osu_get_latency method in Go (osu.RMALatency): rank
// 0 gets from rank 1's window, flushing after each Get.
package main

import "github.com/gorun/gorun/examples/osu/internal/osu"

func main() { osu.RMALatency("get_latency", "get") }
