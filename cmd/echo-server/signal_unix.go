//go:build unix

package main

import (
	"os"
	"syscall"
)

// upgradeSignals start a zero-downtime upgrade.
var upgradeSignals = []os.Signal{syscall.SIGUSR2}
