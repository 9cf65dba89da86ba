//go:build race

package bufpool

// raceEnabled reports whether the tests run under the race detector, in which
// sync.Pool deliberately drops a random share of Puts.
const raceEnabled = true
