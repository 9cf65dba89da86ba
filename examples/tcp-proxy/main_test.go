package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/internal/backendtest"
	"github.com/veloq/veloq/internal/selfsigned"
	vnet "github.com/veloq/veloq/net"
)

// The binary starts, forwards to its backend, prints its counters and
// exits 0 on SIGTERM; bad flags are refused with a message.
func TestProxyBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(backendtest.TempDir(t), "tcp-proxy")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, args := range [][]string{{}, {"-backends", "127.0.0.1:1", "-splice", "sometimes"}, {"-backends", "nohost"}, {"-backends", "127.0.0.1:1", "-recv-buffers", "100"}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "tcp-proxy:") {
			t.Errorf("%q: exit %v, output %q; want a failure with a message", args, err, out)
		}
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	for _, splice := range []string{"off", "always"} {
		cmd := exec.Command(bin, "-listen", "127.0.0.1:0", "-backends", ln.Addr().String(), "-loops", "2", "-splice", splice)
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		r := bufio.NewReader(stdout)
		line, err := r.ReadString('\n')
		if err != nil {
			cmd.Process.Kill()
			t.Fatal(err)
		}
		m := regexp.MustCompile(`listening on (127\.0\.0\.1:\d+), backends \S+, backend (uring|epoll), 2 loops, splice ` + splice).FindStringSubmatch(line)
		if m == nil {
			cmd.Process.Kill()
			t.Fatalf("start line %q", line)
		}
		c, err := net.Dial("tcp", m[1])
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write([]byte("veloq"))
		buf := make([]byte, 5)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "veloq" {
			t.Fatalf("echo through the proxy: %q %v", buf, err)
		}
		c.Close()
		go func() { done <- cmd.Wait() }()
		cmd.Process.Signal(syscall.SIGTERM)
		rest, _ := io.ReadAll(r)
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("exit after SIGTERM: %v", err)
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Fatal("no exit after SIGTERM")
		}
		if !regexp.MustCompile(`stopping: 1 accepted, \d+ active, 1 connected, 0 dial failures`).Match(rest) {
			t.Errorf("stop line %q", rest)
		}
	}
}

// writePEM writes cert's certificate and key to PEM files in a temporary
// directory, as -tls-cert and -tls-key read them.
func writePEM(t *testing.T, cert *selfsigned.Cert) (certFile, keyFile string) {
	t.Helper()
	dir := backendtest.TempDir(t)
	key, err := x509.MarshalPKCS8PrivateKey(cert.TLS.PrivateKey)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.TLS.Certificate[0]}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600))
	return certFile, keyFile
}

// echoBackend is a plaintext echo server on 127.0.0.1 that passes the
// client's FIN back, and reports on sawEOF each EOF it read.
func echoBackend(t *testing.T) (addr string, sawEOF <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	eof := make(chan struct{}, 16)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(30 * time.Second))
				if _, err := io.Copy(c, c); err == nil {
					eof <- struct{}{}
					c.(*net.TCPConn).CloseWrite()
				}
			})
		}
	})
	return ln.Addr().String(), eof
}

// startInProcess starts the proxy as the command would with args, and
// stops it when the test ends.
func startInProcess(t *testing.T, args ...string) *instance {
	t.Helper()
	in, err := start(args, io.Discard, io.Discard)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, in.stop(io.Discard)) })
	return in
}

// With -tls-cert and -tls-key clients speak TLS to the proxy and the
// backend gets plaintext: messages come back whole, whatever -splice
// says (such clients are copied, never spliced), and a client's
// CloseWrite reaches the backend as a FIN.
func TestTLSTermination(t *testing.T) {
	cert, err := selfsigned.New(time.Hour)
	require.NoError(t, err)
	certFile, keyFile := writePEM(t, cert)
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		for _, splice := range []string{"off", "large", "always"} {
			t.Run("splice="+splice, func(t *testing.T) {
				echo, sawEOF := echoBackend(t)
				in := startInProcess(t, "-listen", "127.0.0.1:0", "-backends", echo, "-backend", string(b),
					"-loops", "2", "-splice", splice, "-tls-cert", certFile, "-tls-key", keyFile)
				for _, size := range []int{1, 16 << 10, 1 << 20} {
					require.NoError(t, tlsEcho(in.s.Addr().String(), cert, randomBytes(size)), "%d bytes", size)
					select {
					case <-sawEOF:
					case <-time.After(10 * time.Second):
						t.Fatalf("%d bytes: the backend did not see the client's FIN", size)
					}
					require.Eventually(t, func() bool { return in.p.Stats().Active == 0 && in.s.NumConns() == 0 },
						20*time.Second, 5*time.Millisecond, "the pair did not close")
				}
				for _, st := range in.s.Stats() {
					require.Zero(t, st.Spliced, "a TLS client's bytes were spliced")
				}
			})
		}
	})
}

// tlsEcho sends data over TLS to the proxy at addr, closes its writing
// (close_notify), and reads the echo to its end.
func tlsEcho(addr string, cert *selfsigned.Cert, data []byte) error {
	c, err := tls.Dial("tcp", addr, cert.ClientConfig("127.0.0.1"))
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(data)
		if err == nil {
			err = c.CloseWrite()
		}
		werr <- err
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		return fmt.Errorf("read after %d bytes: %w", len(got), err)
	}
	if err := <-werr; err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("echo differs: %d bytes back, %d sent", len(got), len(data))
	}
	return nil
}

func randomBytes(n int) []byte {
	r := rand.New(rand.NewPCG(uint64(n), 42))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// Flag combinations that cannot work are refused with a message; -sni
// routes are listed in the start line.
func TestFlags(t *testing.T) {
	cert, err := selfsigned.New(time.Hour)
	require.NoError(t, err)
	certFile, keyFile := writePEM(t, cert)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "-backends is required"},
		{[]string{"-backends", "127.0.0.1:1", "-tls-cert", certFile}, "go together"},
		{[]string{"-backends", "127.0.0.1:1", "-tls-cert", keyFile, "-tls-key", keyFile}, "-tls-cert, -tls-key"},
		{[]string{"-sni", "a.test=127.0.0.1:1", "-tls-cert", certFile, "-tls-key", keyFile}, "use one of them"},
		{[]string{"-sni", "a.test"}, "want NAME=HOST:PORT"},
		{[]string{"-sni", "a.*.test=127.0.0.1:1"}, "not allowed"},
		{[]string{"-sni", "a.test=127.0.0.1:1", "-sni", "A.test=127.0.0.1:2"}, "given twice"},
		{[]string{"-sni", "a.test=127.0.0.1:1", "-hello-timeout", "0s"}, "hello timeout"},
	} {
		_, err := start(append([]string{"-listen", "127.0.0.1:0"}, tc.args...), io.Discard, io.Discard)
		require.ErrorContains(t, err, tc.want, "%q", tc.args)
	}

	var out bytes.Buffer
	in, err := start([]string{"-listen", "127.0.0.1:0", "-loops", "1", "-sni", "a.test=127.0.0.1:1",
		"-sni", "*.b.test=127.0.0.1:2,127.0.0.1:3"}, &out, io.Discard)
	require.NoError(t, err)
	require.NoError(t, in.stop(&out))
	require.Regexp(t, `backends none, .*, sni passthrough a\.test=127\.0\.0\.1:1 \*\.b\.test=127\.0\.0\.1:2,127\.0\.0\.1:3, pid`, out.String())
}
