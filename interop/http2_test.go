package interop

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	nethttp "net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/internal/backendtest"
	"github.com/veloq/veloq/internal/selfsigned"
	vnet "github.com/veloq/veloq/net"
)

// startHTTP serves h on 127.0.0.1 with one loop, over TLS when secure.
func startHTTP(t *testing.T, b vnet.Backend, h vhttp.Handler, secure bool) string {
	t.Helper()
	opts := []vhttp.Option{vhttp.WithNetOptions(vnet.WithBackend(b)), vhttp.WithNetOptions(vnet.WithLoops(1))}
	if secure {
		opts = append(opts, vhttp.WithTLS(selfsigned.Shared().ServerConfig()))
	}
	s, err := vhttp.NewServer(h, opts...)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := s.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	// Close, not Shutdown: h2spec leaves streams waiting for bodies it
	// never sends, which Shutdown would wait for as for any request.
	t.Cleanup(func() { _ = s.Close() })
	return addr.String()
}

// echoService answers UnaryCall with the request's payload and each
// FullDuplexCall message with its own.
type echoService struct {
	testgrpc.UnimplementedTestServiceServer
}

func (echoService) UnaryCall(_ context.Context, in *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{Payload: in.GetPayload()}, nil
}

func (echoService) FullDuplexCall(stream testgrpc.TestService_FullDuplexCallServer) error {
	for {
		in, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(&testgrpc.StreamingOutputCallResponse{Payload: in.GetPayload()}); err != nil {
			return err
		}
	}
}

// A grpc-go server mounted through FromStd serves grpc-go's client over
// h2c and h2: unary calls (one of 1 MiB, past every flow-control window)
// and a bidirectional stream whose messages are answered one by one.
func TestGRPCThroughFromStd(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		for _, secure := range []bool{false, true} {
			t.Run(fmt.Sprintf("tls=%v", secure), func(t *testing.T) {
				gs := grpc.NewServer()
				testgrpc.RegisterTestServiceServer(gs, echoService{})
				addr := startHTTP(t, b, vhttp.FromStd(gs), secure)
				creds := insecure.NewCredentials()
				if secure {
					creds = credentials.NewTLS(selfsigned.Shared().ClientConfig("localhost"))
					addr = "localhost" + addr[strings.LastIndex(addr, ":"):]
				}
				cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
				require.NoError(t, err)
				defer cc.Close()
				client := testgrpc.NewTestServiceClient(cc)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()

				for _, size := range []int{0, 10, 1 << 20} {
					body := bytes.Repeat([]byte{'g'}, size)
					resp, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: body}})
					require.NoError(t, err)
					require.Equal(t, size, len(resp.GetPayload().GetBody()))
				}

				stream, err := client.FullDuplexCall(ctx)
				require.NoError(t, err)
				for i := range 100 {
					msg := []byte(fmt.Sprintf("message %d", i))
					require.NoError(t, stream.Send(&testgrpc.StreamingOutputCallRequest{Payload: &testgrpc.Payload{Body: msg}}))
					got, err := stream.Recv()
					require.NoError(t, err)
					require.Equal(t, msg, got.GetPayload().GetBody())
				}
				require.NoError(t, stream.CloseSend())
				_, err = stream.Recv()
				require.ErrorIs(t, err, io.EOF)
			})
		}
	})
}

// fastHello is a fast veloq handler: GET answers Hello, POST echoes.
var fastHello = vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
	if string(r.Method) == "POST" {
		_, _ = w.Write(r.Body)
		return
	}
	_, _ = w.WriteString("Hello, World!")
})

// curl's three ways to HTTP/2: prior knowledge, Upgrade: h2c, and ALPN.
func TestCurlHTTP2(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not installed")
	}
	if out, _ := exec.Command(curl, "-V").Output(); !bytes.Contains(out, []byte("HTTP2")) {
		t.Skip("curl without HTTP/2")
	}
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		plain := startHTTP(t, b, fastHello, false)
		secure := startHTTP(t, b, fastHello, true)
		for _, tc := range []struct {
			name string
			args []string
		}{
			{"prior knowledge", []string{"--http2-prior-knowledge", "http://" + plain + "/"}},
			{"upgrade", []string{"--http2", "http://" + plain + "/"}},
			{"alpn", []string{"--http2", "-k", "https://" + secure + "/"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				args := append([]string{"-sS", "--max-time", "10", "-w", " %{http_version}"}, tc.args...)
				out, err := exec.Command(curl, args...).CombinedOutput()
				require.NoError(t, err, "%s", out)
				require.Equal(t, "Hello, World! 2", string(out))
			})
		}
		body := bytes.Repeat([]byte("0123456789"), 30000)
		cmd := exec.Command(curl, "-sS", "--max-time", "10", "--http2-prior-knowledge", "--data-binary", "@-", "http://"+plain+"/")
		cmd.Stdin = bytes.NewReader(body)
		out, err := cmd.Output()
		require.NoError(t, err)
		require.Equal(t, body, out)
	})
}

// nghttp (apt nghttp2-client) over h2c and h2.
func TestNghttp(t *testing.T) {
	nghttp, err := exec.LookPath("nghttp")
	if err != nil {
		t.Skip("nghttp not installed (apt-get install nghttp2-client)")
	}
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		for _, secure := range []bool{false, true} {
			addr := startHTTP(t, b, fastHello, secure)
			url := "http://" + addr + "/"
			if secure {
				url = "https://" + addr + "/"
			}
			out, err := exec.Command(nghttp, "-n", "-s", "-m", "10", url).CombinedOutput() // 10 streams at once
			require.NoError(t, err, "%s", out)
			require.Len(t, regexp.MustCompile(`(?m) 200 +13 /$`).FindAllString(string(out), -1), 10,
				"ten requests, each 200 with 13 bytes:\n%s", out)
			out, err = exec.Command(nghttp, url).Output() // stderr warns of the self-signed name
			require.NoError(t, err, "%s", out)
			require.Equal(t, "Hello, World!", string(out))
		}
	})
}

// h2specPath finds h2spec on PATH or where go install puts it.
func h2specPath() string {
	if p, err := exec.LookPath("h2spec"); err == nil {
		return p
	}
	gobin := os.Getenv("GOBIN")
	if gobin == "" {
		out, _ := exec.Command("go", "env", "GOPATH").Output()
		gobin = filepath.Join(strings.TrimSpace(string(out)), "bin")
	}
	p := filepath.Join(gobin, "h2spec")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return ""
}

// junit is the part of h2spec's JUnit report the test reads.
type junit struct {
	Suites []struct {
		Cases []struct {
			Package string    `xml:"package,attr"`
			Name    string    `xml:"classname,attr"`
			Time    float64   `xml:"time,attr"`
			Failure *struct{} `xml:"failure"`
			Error   *struct{} `xml:"error"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// h2spec (github.com/summerwind/h2spec, 145 cases) against fast and
// FromStd handlers on both backends, over TLS and h2c: all pass.
func TestH2Spec(t *testing.T) {
	bin := h2specPath()
	if bin == "" {
		t.Skip("h2spec not installed (go install github.com/summerwind/h2spec/cmd/h2spec@latest)")
	}
	handlers := map[string]vhttp.Handler{
		"fast": fastHello,
		"std": vhttp.FromStd(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			_, _ = io.WriteString(w, "Hello, World!")
		})),
	}
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		for name, h := range handlers {
			for _, secure := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/tls=%v", name, secure), func(t *testing.T) {
					addr := startHTTP(t, b, h, secure)
					port := addr[strings.LastIndex(addr, ":")+1:]
					report := filepath.Join(t.TempDir(), "h2spec.xml")
					args := []string{"-h", "127.0.0.1", "-p", port, "-o", "5", "-j", report}
					if secure {
						args = append(args, "-t", "-k")
					}
					out, _ := exec.Command(bin, args...).CombinedOutput()
					raw, err := os.ReadFile(report)
					require.NoError(t, err, "h2spec wrote no report:\n%s", out)
					var rep junit
					require.NoError(t, xml.Unmarshal(raw, &rep))
					var total int
					var failed []string
					for _, s := range rep.Suites {
						for _, c := range s.Cases {
							total++
							if c.Failure != nil || c.Error != nil {
								failed = append(failed, c.Package+" "+c.Name)
							}
						}
					}
					require.Equal(t, 145, total)
					// Every case passes, h2c's 3.5 "Sends invalid connection
					// preface" too: the shared port closes a first line
					// that is no HTTP/1 request line at all (no standard
					// method, no "HTTP/" word) instead of answering 400.
					require.Empty(t, failed, "%s", out)
					if slow := slowCases(rep); len(slow) > 0 {
						t.Logf("slow: %v", slow)
					}
				})
			}
		}
	})
}

func slowCases(rep junit) []string {
	var slow []string
	for _, s := range rep.Suites {
		for _, c := range s.Cases {
			if c.Time > 1 {
				slow = append(slow, fmt.Sprintf("%s %s %.1fs", c.Package, c.Name, c.Time))
			}
		}
	}
	return slow
}
