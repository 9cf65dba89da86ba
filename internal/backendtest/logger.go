package backendtest

import (
	"log/slog"
	"strings"
	"testing"
)

// Logger returns a logger for a server under test: warnings and errors go
// to t's log (shown with -v or when the test fails), the rest is dropped.
// The tests of every package use it, so that a server's log reads the
// same in all of them.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tlog{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tlog struct{ t testing.TB }

func (w tlog) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
