package panicstack

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

//go:noinline
func explicitPanic() { panic("boom") }

//go:noinline
func nilDeref() {
	var p *int
	_ = *p
}

// recovered runs f and returns the stack captured where its panic was
// recovered, as a server's deferred recover does.
func recovered(f func()) (s Stack) {
	defer func() {
		recover()
		s = Capture()
	}()
	f()
	return nil
}

func TestCaptureStartsAtThePanic(t *testing.T) {
	frames := recovered(explicitPanic).Frames()
	require.NotEmpty(t, frames)
	require.Contains(t, frames[0], "panicstack.explicitPanic ")

	// A runtime error passes through the runtime's signal handling first;
	// the faulting function is right below it.
	frames = recovered(nilDeref).Frames()
	i := 0
	for i < len(frames) && strings.HasPrefix(frames[i], "runtime.") {
		i++
	}
	require.Less(t, i, len(frames))
	require.Contains(t, frames[i], "panicstack.nilDeref ")
}

func TestCaptureWithoutPanic(t *testing.T) {
	frames := Capture().Frames()
	require.Contains(t, frames[0], "panicstack.TestCaptureWithoutPanic ")
}

func TestLogValue(t *testing.T) {
	s := recovered(explicitPanic)
	var text, js bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Error("panicked", "stack", s)
	slog.New(slog.NewJSONHandler(&js, nil)).Error("panicked", "stack", s)

	require.Equal(t, 1, strings.Count(text.String(), "\n"), "one record, one line")
	require.Contains(t, text.String(), `stack.0="github.com/veloq/veloq/internal/panicstack.explicitPanic `)
	require.NotContains(t, text.String(), `\n`)

	require.Equal(t, 1, strings.Count(js.String(), "\n"), "one record, one line")
	var rec struct{ Stack map[string]string }
	require.NoError(t, json.Unmarshal(js.Bytes(), &rec))
	require.Contains(t, rec.Stack["0"], "panicstack.explicitPanic ")
	require.Len(t, rec.Stack, len(s.Frames()))
}
