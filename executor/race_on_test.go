//go:build race

package executor

// raceEnabled scales the stress tests down under the race detector, which
// slows every atomic operation by an order of magnitude.
const raceEnabled = true
