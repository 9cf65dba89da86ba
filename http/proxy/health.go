package proxy

import (
	"sync/atomic"
	"time"

	"github.com/veloq/veloq/http/client"
	vnet "github.com/veloq/veloq/net"
)

// HealthCheck configures active health checks: every Interval the proxy
// sends "GET Path" to each upstream with its client; an answer below 400
// within Timeout passes. An upstream is taken out after Unhealthy
// failed checks in a row and put back after Healthy passed ones.
// Defaults: 5 s, 2 s, 2 passes, 3 failures. The checks run from a timer
// on the loop that serves the proxy's first request.
type HealthCheck struct {
	Path               string
	Interval, Timeout  time.Duration
	Healthy, Unhealthy int
}

type healthState struct {
	started atomic.Bool
	closed  atomic.Bool
	loop    *vnet.Loop
}

// startHealth starts the checks on l, once.
func (p *Proxy) startHealth(l *vnet.Loop) {
	if p.cfg.health.Path == "" || p.health.started.Load() || !p.health.started.CompareAndSwap(false, true) {
		return
	}
	p.health.loop = l
	p.healthRound()
}

// Close stops the health checks and closes the proxy's client unless it
// was given with WithClient (then it is the caller's to close). Call it
// once the server is shut down.
func (p *Proxy) Close() error {
	p.health.closed.Store(true)
	if p.ownClient {
		return p.client.Close()
	}
	return nil
}

// healthRound checks every upstream once, then schedules the verdict at
// the timeout and the next round at the interval.
func (p *Proxy) healthRound() {
	if p.health.closed.Load() {
		return
	}
	l, hc := p.health.loop, p.cfg.health
	list := p.ups.load().list
	checks := make([]*check, 0, len(list))
	for _, u := range list {
		chk := &check{p: p, u: u}
		chk.req = client.Request{Method: "GET", Addr: u.addr, TLS: u.tls, Proto: u.proto, Target: hc.Path}
		checks = append(checks, chk)
		chk.live = true
		call := p.client.Send(l, &chk.req, chk)
		if chk.live {
			chk.call = call
		}
	}
	l.AfterFunc(hc.Timeout, func() { healthTimeout(checks) })
	l.AfterFunc(hc.Interval, p.healthRound)
}

// healthTimeout fails the checks of a round still waiting.
func healthTimeout(checks []*check) {
	for _, chk := range checks {
		if chk.live && chk.call != nil {
			chk.timedOut = true
			chk.call.Cancel()
		}
	}
}

// check is one health check of one upstream.
type check struct {
	p        *Proxy
	u        *upstream
	req      client.Request
	call     *client.Call
	live     bool
	ok       bool
	timedOut bool
}

func (c *check) OnResponseHead(call *client.Call, resp *client.ResponseHead) {
	c.ok = resp.Status < 400
}

func (c *check) OnResponseBody(call *client.Call, b []byte) {}

func (c *check) OnResponseEnd(call *client.Call, trailer []client.Field, err error) {
	c.live = false
	c.p.checked(c.u, c.ok && err == nil && !c.timedOut)
}

// checked applies one check's result to u (on the health loop).
func (p *Proxy) checked(u *upstream, ok bool) {
	hc := p.cfg.health
	if ok {
		u.checkFail = 0
		u.checkOK++
		if u.down.Load() && u.checkOK >= hc.Healthy {
			u.down.Store(false)
			p.cfg.log.Info("proxy: upstream healthy again", "upstream", u.name)
		}
		return
	}
	u.checkOK = 0
	u.checkFail++
	if !u.down.Load() && u.checkFail >= hc.Unhealthy {
		u.down.Store(true)
		p.cfg.log.Warn("proxy: upstream failed its health checks", "upstream", u.name, "failures", u.checkFail)
	}
}
