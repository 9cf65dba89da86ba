// Package panicstack captures the stack of a recovered panic as a
// slog.LogValuer, so that a log line shows it as a stack rather than as
// one escaped string.
//
// The stack is logged as a group with one attribute per frame, keyed by
// its depth ("0" is the function that panicked), each value one line:
// "function file:line". That form was chosen over a multi-line string
// because both standard handlers render it well: slog.TextHandler quotes
// a value that holds a newline and prints it as \n escapes, which turns
// debug.Stack's text into one unreadable line, whereas with one frame per
// attribute it prints stack.0="main.handler /src/main.go:12"
// stack.1=..., one frame after the other, with nothing escaped and the
// record still on one line (grep and log shippers keep working); and
// slog.JSONHandler prints a "stack" object of the same frames, valid JSON
// on one line. A separate multi-line record would break both of those.
package panicstack

import (
	"log/slog"
	"runtime"
	"strconv"
	"strings"
)

// maxFrames bounds the frames kept: the innermost ones say where and why;
// a deep recursion must not turn one log line into megabytes.
const maxFrames = 64

// Stack is the call stack of a panic, captured by Capture.
type Stack []uintptr

// Capture returns the current goroutine's stack. Called from a deferred
// function that recovered a panic, the stack still holds the panicking
// frames; Capture drops everything up to the runtime's panic machinery,
// so the first frame is the function that panicked (or, for a runtime
// error such as a nil dereference, the runtime's signal handler just
// above it). Called elsewhere it starts at its caller.
func Capture() Stack {
	pcs := make([]uintptr, maxFrames+16)
	pcs = pcs[:runtime.Callers(2, pcs)]
	for i, pc := range pcs {
		// gopanic is never inlined, so the function of its PC is itself
		// (pc-1: a return address may be the next function's first byte).
		if f := runtime.FuncForPC(pc - 1); f != nil && f.Name() == "runtime.gopanic" {
			pcs = pcs[i+1:]
			break
		}
	}
	if len(pcs) > maxFrames {
		pcs = pcs[:maxFrames]
	}
	return Stack(pcs)
}

// Frames returns the stack's frames, innermost first, one line each:
// "function file:line".
func (s Stack) Frames() []string {
	var out []string
	fs := runtime.CallersFrames(s)
	for {
		f, more := fs.Next()
		if f.Function != "" || f.File != "" {
			out = append(out, f.Function+" "+f.File+":"+strconv.Itoa(f.Line))
		}
		if !more || len(out) == maxFrames {
			return out
		}
	}
}

// LogValue makes the stack a group of one attribute per frame (see the
// package comment for why).
func (s Stack) LogValue() slog.Value {
	frames := s.Frames()
	attrs := make([]slog.Attr, len(frames))
	for i, f := range frames {
		attrs[i] = slog.String(strconv.Itoa(i), f)
	}
	return slog.GroupValue(attrs...)
}

// String is the stack as text, one frame a line, for fmt and errors.
func (s Stack) String() string { return strings.Join(s.Frames(), "\n") }
