package prometheus_test

import (
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	vhttp "github.com/veloq/veloq/http"
	vnet "github.com/veloq/veloq/net"
	vprom "github.com/veloq/veloq/prometheus"
)

// A TCP echo server's per-loop counters, registered in a registry that
// promhttp serves as a scrape target.
func ExampleNewNetCollector() {
	s, err := vnet.NewServer(&vnet.HandlerFuncs{Data: func(c *vnet.Conn) {
		b, _ := c.Peek(0)
		c.Write(b) // echo
		c.Discard(len(b))
	}}, vnet.WithLoops(1))
	if err != nil {
		panic(err)
	}
	if _, err := s.Listen("tcp", "127.0.0.1:0"); err != nil {
		panic(err)
	}
	defer s.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(vprom.NewNetCollector(s, vprom.WithConstLabels(prometheus.Labels{"server": "echo"})))
	metrics := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})) // what Prometheus scrapes
	defer metrics.Close()

	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		panic(err)
	}
	defer c.Close()
	c.Write([]byte("ping"))
	io.ReadFull(c, make([]byte, 4))

	// The counters are read at each scrape; wait for the loop to publish.
	want := `veloq_net_received_bytes_total{loop="0",server="echo"} 4`
	var page string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && !strings.Contains(page, want); time.Sleep(time.Millisecond) {
		resp, err := nethttp.Get(metrics.URL)
		if err != nil {
			panic(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		page = string(b)
	}
	for l := range strings.Lines(page) {
		if strings.HasPrefix(l, "veloq_net_accepted_connections_total") || strings.HasPrefix(l, "veloq_net_received_bytes_total") {
			fmt.Print(l)
		}
	}
	// Output:
	// veloq_net_accepted_connections_total{loop="0",server="echo"} 1
	// veloq_net_received_bytes_total{loop="0",server="echo"} 4
}

// An HTTP server's request counters beside the counters of the loops
// under it, gathered as a scrape would.
func ExampleNewHTTPCollector() {
	s, err := vhttp.NewServer(vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
		w.WriteString("hello")
	}), vhttp.WithNetOptions(vnet.WithLoops(1)))
	if err != nil {
		panic(err)
	}
	if _, err := s.Listen("tcp", "127.0.0.1:0"); err != nil {
		panic(err)
	}
	defer s.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(vprom.NewHTTPCollector(s), vprom.NewNetCollector(s.NetServer()))

	for range 2 {
		resp, err := nethttp.Get("http://" + s.Addr().String() + "/")
		if err != nil {
			panic(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}

	mfs, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "veloq_http_requests_total" {
			fmt.Println(mf.GetName(), mf.GetType(), mf.GetMetric()[0].GetCounter().GetValue())
		}
	}
	// Output: veloq_http_requests_total COUNTER 2
}
