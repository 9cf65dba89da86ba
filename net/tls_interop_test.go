package net

import (
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/internal/backendtest"
)

// sClient runs openssl s_client against addr with args; lines are typed
// into it one at a time, each once the previous one's echo came back.
type sClient struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   backendtest.Buffer
}

func startSClient(t *testing.T, addr string, args ...string) *sClient {
	t.Helper()
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl is not installed (apt-get install openssl)")
	}
	sc := &sClient{t: t}
	sc.cmd = exec.Command(openssl, append([]string{"s_client", "-connect", addr, "-servername", "localhost"}, args...)...)
	sc.stdin, err = sc.cmd.StdinPipe()
	require.NoError(t, err)
	sc.cmd.Stdout, sc.cmd.Stderr = &sc.out, &sc.out
	require.NoError(t, sc.cmd.Start())
	t.Cleanup(func() {
		sc.stdin.Close()
		done := make(chan struct{})
		go func() { sc.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			sc.cmd.Process.Kill()
			<-done
		}
	})
	// The session summary is printed once the handshake is done.
	require.Eventually(t, func() bool { return strings.Contains(sc.out.String(), "Verify return code") },
		10*time.Second, time.Millisecond, "openssl s_client did not connect: %s", &sc.out)
	return sc
}

// send types a line and waits until its echo appears n times in all
// (s_client prints what it receives, not what it is given).
func (sc *sClient) send(line string, n int) {
	sc.t.Helper()
	_, err := io.WriteString(sc.stdin, line+"\n")
	require.NoError(sc.t, err)
	require.Eventually(sc.t, func() bool { return strings.Count(sc.out.String(), line) >= n },
		10*time.Second, time.Millisecond, "no echo of %q: %s", line, &sc.out)
}

// OpenSSL's client against the TLS echo: TLS 1.2 and each TLS 1.3 cipher
// suite, and on TLS 1.3 a KeyUpdate that asks for one back ("K"): the
// layer answers it on the loop and the echo goes on under the new keys.
func TestTLSInteropOpenSSL(t *testing.T) {
	forEachTLSPlacement(t, func(t *testing.T, b Backend, place Option) {
		s := startTLS(t, b, place, echoHandler(), nil)
		for _, tc := range []struct {
			name      string
			args      []string
			keyUpdate bool
		}{
			{"tls1.2", []string{"-tls1_2"}, false},
			{"tls1.2-chacha", []string{"-tls1_2", "-cipher", "ECDHE-ECDSA-CHACHA20-POLY1305"}, false},
			{"tls1.3-aes128", []string{"-tls1_3", "-ciphersuites", "TLS_AES_128_GCM_SHA256"}, true},
			{"tls1.3-aes256", []string{"-tls1_3", "-ciphersuites", "TLS_AES_256_GCM_SHA384"}, true},
			{"tls1.3-chacha", []string{"-tls1_3", "-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256"}, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				sc := startSClient(t, s.Addr().String(), tc.args...)
				sc.send("veloq-first", 1)
				if tc.keyUpdate {
					_, err := io.WriteString(sc.stdin, "K\n")
					require.NoError(t, err)
					require.Eventually(t, func() bool { return strings.Contains(sc.out.String(), "KEYUPDATE") },
						5*time.Second, time.Millisecond, "s_client did not send the key update: %s", &sc.out)
				}
				sc.send("veloq-after", 1)
				require.NotContains(t, sc.out.String(), "alert")
			})
		}
	})
}

// A TLS 1.2 client asking to renegotiate ("R") is refused with an alert
// and closed, counted; the server goes on serving others.
func TestTLSRenegotiationRefused(t *testing.T) {
	forEachTLSPlacement(t, func(t *testing.T, b Backend, place Option) {
		s := startTLS(t, b, place, echoHandler(), nil, WithLoops(1))
		sc := startSClient(t, s.Addr().String(), "-tls1_2")
		sc.send("before", 1)
		_, err := io.WriteString(sc.stdin, "R\n")
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- sc.cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("the renegotiating client was not disconnected: %s", &sc.out)
		}
		require.Eventually(t, func() bool { return tlsTotals(s).TLSHandshakeErrors == 1 }, 5*time.Second, time.Millisecond)
		other := dialTLS(t, s, nil)
		_, err = fmt.Fprint(other, "ok")
		require.NoError(t, err)
		_, err = io.ReadFull(other, make([]byte, 2))
		require.NoError(t, err)
	})
}
