package result

import (
	"sync"
	"sync/atomic"
)

// ErrCount counts a load generator's errors from many goroutines and keeps
// the first, for Load.Errors and Load.FirstError.
type ErrCount struct {
	n     atomic.Int64
	mu    sync.Mutex
	first error
}

// Add counts err, keeping it if it is the first.
func (e *ErrCount) Add(err error) {
	e.n.Add(1)
	e.mu.Lock()
	if e.first == nil {
		e.first = err
	}
	e.mu.Unlock()
}

// N returns how many errors were counted.
func (e *ErrCount) N() int64 { return e.n.Load() }

// First returns the first error's text, or "".
func (e *ErrCount) First() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.first == nil {
		return ""
	}
	return e.first.Error()
}
