package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	nethttp "net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/internal/backendtest"
	"github.com/veloq/veloq/internal/selfsigned"
)

// Every mode serves TLS with -tls-self-signed or with -tls-cert and
// -tls-key: the TLS echo echoes, HTTPS answers GET /, both on a
// crypto/tls client.
func TestEchoServerTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := backendtest.TempDir(t)
	bin := filepath.Join(dir, "echo-server")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "build: %s", out)
	cert, err := selfsigned.New(time.Hour)
	require.NoError(t, err)
	certFile, keyFile := writePEM(t, dir, cert)

	for _, tc := range []struct {
		mode string
		tls  []string
	}{
		{"tcp", []string{"-tls-self-signed"}},
		{"http", []string{"-tls-self-signed"}},
		{"http-std", []string{"-tls-cert", certFile, "-tls-key", keyFile}},
		{"ws", []string{"-tls-cert", certFile, "-tls-key", keyFile}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			args := append([]string{"-addr", "127.0.0.1:0", "-loops", "1", "-mode", tc.mode}, tc.tls...)
			addr, stop := startBinary(t, bin, args)
			defer stop()
			cfg := &tls.Config{InsecureSkipVerify: true} // -tls-self-signed's certificate is new
			if tc.tls[0] == "-tls-cert" {
				cfg = cert.ClientConfig("localhost")
			}
			if tc.mode == "tcp" {
				c, err := tls.Dial("tcp", addr, cfg)
				require.NoError(t, err)
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				_, err = c.Write([]byte("veloq"))
				require.NoError(t, err)
				buf := make([]byte, 5)
				_, err = io.ReadFull(c, buf)
				require.NoError(t, err)
				require.Equal(t, "veloq", string(buf))
				return
			}
			cl := &nethttp.Client{Timeout: 5 * time.Second, Transport: &nethttp.Transport{TLSClientConfig: cfg}}
			defer cl.CloseIdleConnections()
			resp, err := cl.Get("https://" + addr + "/")
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, 200, resp.StatusCode)
			require.Equal(t, helloBody, string(body))
		})
	}
}

// startBinary runs the echo server and returns its address and a stop
// function that sends SIGTERM and waits for a clean exit.
func startBinary(t *testing.T, bin string, args []string) (string, func()) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		t.Fatal(err)
	}
	m := regexp.MustCompile(`over TLS on (127\.0\.0\.1:\d+)|tls echo on (127\.0\.0\.1:\d+)`).FindStringSubmatch(line)
	if m == nil {
		cmd.Process.Kill()
		t.Fatalf("start line %q does not say TLS", line)
	}
	addr := m[1] + m[2]
	return addr, func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			require.NoError(t, err, "exit after SIGTERM")
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Fatal("no exit after SIGTERM")
		}
	}
}

// writePEM writes the certificate and key as PEM files in dir.
func writePEM(t *testing.T, dir string, c *selfsigned.Cert) (certFile, keyFile string) {
	t.Helper()
	key, err := x509.MarshalPKCS8PrivateKey(c.TLS.PrivateKey)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.TLS.Certificate[0]}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600))
	return certFile, keyFile
}

// Bad TLS flags are refused before the server starts.
func TestBadTLSFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-tls-cert", "x.pem"},
		{"-tls-key", "x.pem"},
		{"-tls-self-signed", "-tls-cert", "a", "-tls-key", "b"},
		{"-tls-cert", "/nonexistent/cert.pem", "-tls-key", "/nonexistent/key.pem"},
	} {
		require.Error(t, run(append([]string{"-addr", "127.0.0.1:0"}, args...)), fmt.Sprint(args))
	}
}
