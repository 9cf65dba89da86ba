package executor

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed is returned for work offered to a pool that is shutting down
	// or has shut down.
	ErrClosed = errors.New("executor: pool closed")

	// ErrOverloaded is returned by the blocking pool when every goroutine is
	// busy and its queue is full. The caller should shed the request.
	ErrOverloaded = errors.New("executor: overloaded")

	// ErrPanicked is matched (with errors.Is) by the error of a Future whose
	// function panicked. The concrete error is a *PanicError.
	ErrPanicked = errors.New("executor: task panicked")

	// ErrNilTask is returned when a nil function is offered.
	ErrNilTask = errors.New("executor: nil task")

	// ErrInvalidWorker is returned by SpawnTo for an index outside
	// [0, Workers()).
	ErrInvalidWorker = errors.New("executor: invalid worker index")
)

// PanicError is the error of a Future whose function panicked. It matches
// ErrPanicked, and also the panic value itself when that value is an error.
type PanicError struct {
	// Value is what the function passed to panic.
	Value any
	// Stack is the panicking goroutine's stack, as from runtime/debug.Stack.
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("executor: task panicked: %v", e.Value)
}

// Unwrap returns ErrPanicked and, when the panic value is an error, that
// error, so that errors.Is and errors.As see both.
func (e *PanicError) Unwrap() []error {
	if err, ok := e.Value.(error); ok {
		return []error{ErrPanicked, err}
	}
	return []error{ErrPanicked}
}
