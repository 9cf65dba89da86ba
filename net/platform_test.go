package net

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// Which backend auto picks, and what naming a Linux-only backend does,
// on the platform the test runs on (Linux here; CI compiles it for macOS
// and FreeBSD, where the other branch holds).
func TestPlatformBackends(t *testing.T) {
	l, err := NewLoop(0, Config{})
	require.NoError(t, err)
	defer l.Close()
	if runtime.GOOS != "linux" {
		require.Equal(t, BackendPortable, l.Backend())
		for _, b := range []Backend{BackendUring, BackendEpoll} {
			require.ErrorIs(t, b.Available(), ErrLinuxOnly, b)
			_, err := NewLoop(1, Config{Backend: b})
			require.ErrorIs(t, err, ErrLinuxOnly, b)
		}
		return
	}
	want := BackendUring
	if ProbeUring() != nil {
		want = BackendEpoll
	}
	require.Equal(t, want, l.Backend())
	require.NoError(t, BackendEpoll.Available())
	el, err := NewLoop(1, Config{Backend: BackendEpoll})
	require.NoError(t, err)
	require.NoError(t, el.Close())
}
