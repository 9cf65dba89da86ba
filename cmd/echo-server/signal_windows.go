//go:build windows

package main

import "os"

// upgradeSignals: Windows has neither SIGUSR2 nor the descriptor passing
// an upgrade needs, so nothing starts one.
var upgradeSignals []os.Signal
