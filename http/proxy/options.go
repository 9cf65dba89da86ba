package proxy

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/veloq/veloq/http/client"
)

// An Option configures a [Proxy].
type Option func(*config) error

type config struct {
	upstreams []string
	policy    Policy
	hashKey   HashKey
	client    *client.Client

	host       string // Host sent upstream; "" passes the client's
	forwarded  bool   // add an RFC 7239 Forwarded element
	via        string // pseudonym for Via; "" adds none
	timeout    time.Duration
	maxBuffer  int
	ewmaTau    float64 // nanoseconds
	penalty    float64 // nanoseconds: least latency a failure counts as
	ejectAfter int32
	ejectBase  time.Duration
	ejectMax   time.Duration

	retries     int     // extra attempts per request
	budgetRatio float64 // retries in flight / requests in flight
	budgetMin   int64   // retries in flight always allowed

	health HealthCheck
	log    *slog.Logger
}

func defaultConfig() config {
	return config{
		timeout:     60 * time.Second,
		maxBuffer:   256 << 10,
		ewmaTau:     float64(10 * time.Second),
		penalty:     float64(time.Second),
		ejectAfter:  5,
		ejectBase:   5 * time.Second,
		ejectMax:    5 * time.Minute,
		retries:     1,
		budgetRatio: 0.2,
		budgetMin:   3,
		log:         slog.Default(),
	}
}

// WithUpstreams adds upstreams: "host:port" or "http://host:port" for
// plaintext HTTP/1.1, "https://host:port" for TLS (verified against the
// host name by the client's TLS configuration), "h2c://host:port" for
// HTTP/2 with prior knowledge (gRPC servers), "h2://host:port" for HTTP/2
// over TLS ("h2" offered by ALPN; HTTP/1.1 if the server declines it).
func WithUpstreams(addrs ...string) Option {
	return func(c *config) error { c.upstreams = append(c.upstreams, addrs...); return nil }
}

// WithPolicy sets how an upstream is chosen (default RoundRobin).
func WithPolicy(p Policy) Option {
	return func(c *config) error {
		if p < RoundRobin || p > Hash {
			return fmt.Errorf("proxy: unknown policy %d", p)
		}
		c.policy = p
		return nil
	}
}

// WithHashKey sets the policy to Hash on key k.
func WithHashKey(k HashKey) Option {
	return func(c *config) error {
		if k.kind == keyNone {
			return errors.New("proxy: empty hash key")
		}
		c.policy, c.hashKey = Hash, k
		return nil
	}
}

// WithClient sets the HTTP client the proxy forwards with, whose
// per-loop pools, limits and TLS settings then apply; by default the
// proxy makes one with client.New().
func WithClient(cl *client.Client) Option {
	return func(c *config) error { c.client = cl; return nil }
}

// WithHost sends host as the Host of every forwarded request instead of
// the client's (X-Forwarded-Host keeps the client's).
func WithHost(host string) Option { return func(c *config) error { c.host = host; return nil } }

// WithForwarded adds an RFC 7239 Forwarded element (for, host, proto) to
// every forwarded request, after those the request carries.
func WithForwarded(on bool) Option { return func(c *config) error { c.forwarded = on; return nil } }

// WithVia adds "Via: 1.1 pseudonym" (HTTP/2 clients: "2 pseudonym") to
// forwarded requests and responses, after any Via they carry.
func WithVia(pseudonym string) Option { return func(c *config) error { c.via = pseudonym; return nil } }

// WithTimeout bounds how long the upstream may stay silent (default
// 60 s, like nginx's proxy_read_timeout): from sending the request to
// the response head, and between two parts of the body, time spent
// waiting for a slow client not counted. Past it the client gets 504
// Gateway Timeout, or its answer is cut if it had started. A long
// download that keeps arriving is never cut.
func WithTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return errors.New("proxy: timeout must be positive")
		}
		c.timeout = d
		return nil
	}
}

// WithMaxBuffered sets how many response bytes may wait for a slow
// client before the proxy stops reading the upstream (default 256 KiB);
// it bounds memory per client whatever the body size.
func WithMaxBuffered(n int) Option {
	return func(c *config) error {
		if n <= 0 {
			return errors.New("proxy: max buffered must be positive")
		}
		c.maxBuffer = n
		return nil
	}
}

// WithEjection sets passive ejection: after n consecutive failures
// (connect failures, resets, timeouts, malformed answers, 5xx) an
// upstream gets no requests for base, doubled with each ejection in a
// row up to max. n = 0 turns ejection off. Default 5, 5 s, 5 min.
func WithEjection(n int, base, max time.Duration) Option {
	return func(c *config) error {
		if n < 0 || (n > 0 && (base <= 0 || max < base)) {
			return errors.New("proxy: bad ejection settings")
		}
		c.ejectAfter, c.ejectBase, c.ejectMax = int32(n), base, max
		return nil
	}
}

// WithRetries sets how many more upstreams a request may try after a
// connect failure, refusal or reset before any response byte (default
// 1), for idempotent methods only, and the retry budget: retries in
// flight stay below ratio × requests in flight, or min (default 0.2, 3).
func WithRetries(n int, ratio float64, min int) Option {
	return func(c *config) error {
		if n < 0 || ratio < 0 || min < 0 {
			return errors.New("proxy: bad retry settings")
		}
		c.retries, c.budgetRatio, c.budgetMin = n, ratio, int64(min)
		return nil
	}
}

// WithPeakEWMA sets the peak-EWMA policy's decay time (default 10 s) and
// failure penalty (default 1 s).
func WithPeakEWMA(decay, penalty time.Duration) Option {
	return func(c *config) error {
		if decay <= 0 || penalty < 0 {
			return errors.New("proxy: bad peak-EWMA settings")
		}
		c.ewmaTau, c.penalty = float64(decay), float64(penalty)
		return nil
	}
}

// WithHealthCheck turns on active health checks (see [HealthCheck]).
func WithHealthCheck(h HealthCheck) Option {
	return func(c *config) error {
		if h.Path == "" || h.Path[0] != '/' {
			return errors.New("proxy: health check path must start with /")
		}
		if h.Interval <= 0 {
			h.Interval = 5 * time.Second
		}
		if h.Timeout <= 0 || h.Timeout > h.Interval {
			h.Timeout = min(2*time.Second, h.Interval)
		}
		if h.Healthy <= 0 {
			h.Healthy = 2
		}
		if h.Unhealthy <= 0 {
			h.Unhealthy = 3
		}
		c.health = h
		return nil
	}
}

// WithLogger sets where the proxy logs upstream state changes.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l != nil {
			c.log = l
		}
		return nil
	}
}
