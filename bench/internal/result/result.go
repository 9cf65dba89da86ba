// Package result holds the JSON shapes that load generators print and
// benchrun reads. A new load generator (an HTTP one, say) plugs into benchrun
// by printing a Load with -json.
package result

// Latency is a latency distribution in microseconds.
type Latency struct {
	P50  float64 `json:"p50_us"`
	P90  float64 `json:"p90_us"`
	P99  float64 `json:"p99_us"`
	P999 float64 `json:"p999_us"`
	Max  float64 `json:"max_us"`
	Mean float64 `json:"mean_us"`
}

// Load is the outcome of one load run, measured over the window after warmup.
type Load struct {
	Tool     string  `json:"tool"`
	Addr     string  `json:"addr"`
	Conns    int     `json:"conns"`           // connections asked for
	ConnsOK  int     `json:"conns_ok"`        // connections established
	Size     int     `json:"size"`            // message size, bytes
	Pipeline int     `json:"pipeline"`        // messages in flight per connection
	Rate     float64 `json:"rate,omitempty"`  // messages per second asked for (tcpload -rate); 0: unpaced
	Churn    bool    `json:"churn,omitempty"` // a new connection per request (Conns = concurrent workers)
	TLS      bool    `json:"tls,omitempty"`   // over TLS (tcpload -tls)
	HTTP     bool    `json:"http,omitempty"`  // each request a GET / instead of an echo (tcpload -http)
	WarmupS  float64 `json:"warmup_s"`        // warmup asked for
	WindowS  float64 `json:"window_s"`        // measured window, as sampled

	Requests   int64   `json:"requests"` // round trips completed in the window
	RPS        float64 `json:"rps"`
	BytesSent  int64   `json:"bytes_sent"`
	BytesRecv  int64   `json:"bytes_recv"`
	Errors     int64   `json:"errors"`     // I/O errors + mismatches + failed dials, whole run
	Mismatches int64   `json:"mismatches"` // echoed bytes that differ from what was sent
	DialErrors int64   `json:"dial_errors"`
	FirstError string  `json:"first_error,omitempty"`
	// wrkload -close: TCP connections accepted on the machine during the
	// window (/proc/net/snmp PassiveOpens, every process's): about one per
	// request when wrk really reconnects.
	PassiveOpens int64 `json:"tcp_passive_opens,omitempty"`

	Latency Latency `json:"latency"`

	// Filled when -server-pid is given: the server's CPU over the window.
	ServerPID        int     `json:"server_pid,omitempty"`
	ServerCPUS       float64 `json:"server_cpu_s"`
	ServerSysS       float64 `json:"server_sys_s"`         // of ServerCPUS, the kernel's (stime)
	ServerCPUUtil    float64 `json:"server_cpu_util"`      // server CPU-s / window-s (1.0 = one core)
	ReqPerServerCPUS float64 `json:"req_per_server_cpu_s"` // Requests / ServerCPUS
	ServerRSSKiB     int64   `json:"server_rss_kib"`       // VmRSS at the end of the window

	// The load generator's own CPU over the window: near 1.0 means the client,
	// not the server, may be the bottleneck.
	ClientCPUS    float64 `json:"client_cpu_s"`
	ClientCPUUtil float64 `json:"client_cpu_util"`
}

// Idle is the outcome of an idle-connection run (tcpload -idle).
type Idle struct {
	Tool       string  `json:"tool"`
	Addr       string  `json:"addr"`
	Conns      int     `json:"conns"`
	ConnsOK    int     `json:"conns_ok"`
	Errors     int64   `json:"errors"`
	FirstError string  `json:"first_error,omitempty"`
	OpenS      float64 `json:"open_s"` // time to open (and ping) all connections
}
