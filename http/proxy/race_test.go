//go:build race

package proxy

// raceEnabled: the race detector makes sync.Pool drop items at random, so
// pooled state is allocated again now and then.
const raceEnabled = true
