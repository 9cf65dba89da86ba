// Package gnetlog gives the gnet peers a logger that keeps stdout clean:
// gnet's default logger writes to stdout, where benchrun reads a peer's
// readiness line, so the peers hand gnet this one instead.
package gnetlog

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/panjf2000/gnet/v2/pkg/logging"
)

// Logger sends gnet's warnings and errors to a slog.Logger and drops its
// debug and info lines. Fatalf logs at error level and exits with status 1,
// as gnet's own logger does.
type Logger struct{ l *slog.Logger }

var _ logging.Logger = Logger{}

// New returns a Logger writing text records to l, or to stderr when l is nil.
func New(l *slog.Logger) Logger {
	if l == nil {
		l = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return Logger{l: l}
}

// Debugf drops the message.
func (Logger) Debugf(string, ...any) {}

// Infof drops the message.
func (Logger) Infof(string, ...any) {}

// Warnf logs the message at warn level.
func (g Logger) Warnf(format string, args ...any) { g.l.Warn(fmt.Sprintf(format, args...)) }

// Errorf logs the message at error level.
func (g Logger) Errorf(format string, args ...any) { g.l.Error(fmt.Sprintf(format, args...)) }

// Fatalf logs the message at error level and exits with status 1.
func (g Logger) Fatalf(format string, args ...any) {
	g.l.Error(fmt.Sprintf(format, args...))
	os.Exit(1)
}
