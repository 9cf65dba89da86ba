// uringprobe exits 0 when veloq's io_uring backend can run on this machine
// and 1, with the reason, when it cannot. .ci/run uses it to decide whether
// the io_uring half of the test table must run (VELOQ_REQUIRE_URING=1).
// It asks net.ProbeUring, the check the backend itself makes. (A
// directory named .ci is outside ./..., so no build or vet sees it.)
package main

import (
	"fmt"
	"os"

	"github.com/veloq/veloq/net"
)

func main() {
	if err := net.ProbeUring(); err != nil {
		fmt.Println("io_uring unavailable:", err)
		os.Exit(1)
	}
	fmt.Println("io_uring available")
}
