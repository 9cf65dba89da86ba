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

// An HTTP server's counters, its loops' and its requests by route,
// registered before the server listens (as before a ListenAndServe), and
// gathered as a scrape would.
func ExampleNewHTTPCollector() {
	r := vhttp.NewRouter()
	r.HandleFunc("GET /hello/{name}", func(w *vhttp.ResponseWriter, r *vhttp.Request) {
		w.WriteString("hello")
	})
	reqs := vprom.NewRequestCollector()
	s, err := vhttp.NewServer(r, vhttp.WithNetOptions(vnet.WithLoops(1)), vhttp.WithCompletion(reqs.Observe))
	if err != nil {
		panic(err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(vprom.NewHTTPCollector(s), reqs) // before Listen: zeros until then

	if _, err := s.Listen("tcp", "127.0.0.1:0"); err != nil {
		panic(err)
	}
	defer s.Close()
	for _, name := range []string{"ann", "bob"} {
		resp, err := nethttp.Get("http://" + s.Addr().String() + "/hello/" + name)
		if err != nil {
			panic(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}

	// The counters are published as each answer ends, just after the
	// client has it: wait for both requests.
	lines := map[string]string{}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && len(lines) < 3; time.Sleep(time.Millisecond) {
		mfs, err := reg.Gather()
		if err != nil {
			panic(err)
		}
		for _, mf := range mfs {
			m := mf.GetMetric()[0]
			switch mf.GetName() {
			case "veloq_http_request_duration_seconds":
				if h := m.GetHistogram(); h.GetSampleCount() == 2 {
					var labels []string
					for _, l := range m.GetLabel() {
						labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
					}
					lines[mf.GetName()] = fmt.Sprint(mf.GetName(), " ", strings.Join(labels, " "), " count ", h.GetSampleCount())
				}
			case "veloq_http_requests_total", "veloq_net_accepted_connections_total":
				if v := m.GetCounter().GetValue(); v > 0 && (v == 2 || mf.GetName() != "veloq_http_requests_total") {
					lines[mf.GetName()] = fmt.Sprint(mf.GetName(), " ", v)
				}
			}
		}
	}
	for _, name := range []string{"veloq_http_request_duration_seconds", "veloq_http_requests_total", "veloq_net_accepted_connections_total"} {
		fmt.Println(lines[name])
	}
	// Output:
	// veloq_http_request_duration_seconds class="2xx" method="GET" route="GET /hello/{name}" count 2
	// veloq_http_requests_total 2
	// veloq_net_accepted_connections_total 1
}
