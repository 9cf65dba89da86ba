package h1

import (
	"errors"
	"testing"
)

func expect[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// statusOf is the status err is answered with: 0 for nil and ErrNeedMore,
// an *Error's Status, 500 otherwise (package http's ErrorStatus).
func statusOf(err error) int {
	var e *Error
	switch {
	case err == nil || err == ErrNeedMore:
		return 0
	case errors.As(err, &e):
		return e.Status
	}
	return 500
}
