// Command masstimeout measures how long a mass expiry of idle connections
// stalls a veloq HTTP server's loop: it serves on one loop in this
// process, opens -n idle connections at once (they say nothing, so each
// reaches the head timeout), and while they expire together a prober
// connection makes GET round trips; the longest round trip during the
// expiry is the stall other clients see.
//
//	masstimeout -backend uring -n 10000 -timeout 3s [-cpuprofile f]
//
// It prints one JSON line: the backend, n, how long the expiry took (first
// close to last), the prober's longest and median round trip and its
// count (one every 0.5 ms), the longest and median wait of a request in
// the server (from the prober's write to the handler's run: the round
// trip without the prober's own wake-up for the answer, which a loaded
// machine delays by milliseconds), and the CPU time the process used in
// the expiry window. Loopback only; it stops by itself.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"log"
	"net"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	vhttp "github.com/veloq/veloq/http"
	vnet "github.com/veloq/veloq/net"
)

func main() {
	backend := flag.String("backend", "uring", "uring or epoll")
	n := flag.Int("n", 10000, "idle connections")
	timeout := flag.Duration("timeout", 3*time.Second, "the server's head timeout")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the expiry window")
	childOf := flag.String("child", "", "internal: open -n idle connections to this address and hold them")
	flag.Parse()
	if *childOf != "" {
		child(*childOf, *n)
		return
	}

	raiseFDLimit(uint64(*n + 100))
	be := vnet.BackendUring
	if *backend == "epoll" {
		be = vnet.BackendEpoll
	}
	// handledAt is when the handler last ran (since base): with the time
	// the prober's write returned, it splits a round trip into the
	// server's part and the prober's own (its wake-up for the answer,
	// which a loaded machine delays by milliseconds).
	base := time.Now()
	var handledAt atomic.Int64
	s, err := vhttp.NewServer(vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, _ *vhttp.Request) {
		handledAt.Store(int64(time.Since(base)))
		_, _ = w.Write([]byte("ok"))
	}), vhttp.WithNetOptions(vnet.WithLoops(1)), vhttp.WithNetOptions(vnet.WithBackend(be)), vhttp.WithReadHeaderTimeout(*timeout))
	if err != nil {
		log.Fatal(err)
	}
	addr, err := s.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer s.Shutdown(context.Background())

	// The prober connects first and keeps its connection alive with requests.
	probe, err := net.Dial("tcp", addr.String())
	if err != nil {
		log.Fatal(err)
	}
	pr := bufio.NewReader(probe)
	// roundTrip returns the round trip and the server's part of it: from
	// the write's return (the request is in the server's socket then, on
	// loopback) to the handler's run, 0 if that came first.
	roundTrip := func() (rtt, server time.Duration) {
		t0 := time.Now()
		if _, err := probe.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			log.Fatal(err)
		}
		written := time.Since(base)
		// "HTTP/1.1 200 OK" ... headers ... "\r\n\r\nok": read to the body.
		for {
			line, err := pr.ReadString('\n')
			if err != nil {
				log.Fatal(err)
			}
			if line == "\r\n" {
				break
			}
		}
		if _, err := pr.Discard(2); err != nil {
			log.Fatal(err)
		}
		return time.Since(t0), max(time.Duration(handledAt.Load())-written, 0)
	}
	roundTrip()

	// Open the idle connections at once, from child processes (a process
	// may hold fewer than 20,000 descriptors here), several dialers each.
	start := time.Now()
	children := openIdle(addr.String(), *n)
	dialSpan := time.Since(start)
	for s.Stats().Accepted < uint64(*n+1) {
		time.Sleep(time.Millisecond)
	}
	acceptSpan := time.Since(start)

	// Probe until the first timeout, then through the expiry.
	for s.Stats().Timeouts == 0 {
		roundTrip()
	}
	var ru0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
	}
	t0 := time.Now()
	var rtts, waits []time.Duration
	for s.Stats().Conns > 1 {
		rt, wait := roundTrip()
		rtts = append(rtts, rt)
		waits = append(waits, wait)
		time.Sleep(probeGap)
		if time.Since(t0) > *timeout+30*time.Second {
			log.Fatalf("still %d connections after %v", s.Stats().Conns, time.Since(t0))
		}
	}
	expiry := time.Since(t0)
	if *cpuprofile != "" {
		pprof.StopCPUProfile()
	}
	var ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	sys := time.Duration(ru1.Stime.Nano() - ru0.Stime.Nano())
	slices.Sort(rtts)
	slices.Sort(waits)
	out := map[string]any{
		"backend": *backend, "n": *n,
		"dial_ms": ms(dialSpan), "accept_ms": ms(acceptSpan),
		"expiry_ms":   ms(expiry),
		"probes":      len(rtts),
		"rtt_max_ms":  ms(rtts[len(rtts)-1]),
		"rtt_p50_ms":  ms(rtts[len(rtts)/2]),
		"wait_max_ms": ms(waits[len(waits)-1]),
		"wait_p50_ms": ms(waits[len(waits)/2]),
		"cpu_ms":      ms(cpu), "sys_ms": ms(sys),
		"timeouts": s.Stats().Timeouts,
	}
	_ = json.NewEncoder(os.Stdout).Encode(out)
	for _, c := range children {
		_ = c.Process.Kill()
		_ = c.Wait()
	}
}

// probeGap spaces the prober's round trips, so the CPU the process uses
// in the expiry window is mostly the server's, not the prober's.
const probeGap = 500 * time.Microsecond

// perChild is how many idle connections one child process holds.
const perChild = 5000

// openIdle starts children that open n connections to addr between them,
// and returns once all have connected.
func openIdle(addr string, n int) []*exec.Cmd {
	var cmds []*exec.Cmd
	var outs []*bufio.Reader
	for left := n; left > 0; left -= perChild {
		cmd := exec.Command(os.Args[0], "-child", addr, "-n", strconv.Itoa(min(left, perChild)))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			log.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			log.Fatal(err)
		}
		cmds = append(cmds, cmd)
		outs = append(outs, bufio.NewReader(out))
	}
	for _, r := range outs {
		if _, err := r.ReadString('\n'); err != nil {
			log.Fatalf("child: %v", err)
		}
	}
	return cmds
}

// child opens n idle connections to addr, says so on stdout, and holds
// them until killed (or a minute passes).
func child(addr string, n int) {
	raiseFDLimit(uint64(n + 100))
	conns := make([]net.Conn, n)
	var wg sync.WaitGroup
	const dialers = 4
	for d := 0; d < dialers; d++ {
		wg.Add(1)
		go func(d int) {
			defer wg.Done()
			for i := d; i < n; i += dialers {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					log.Fatalf("connection %d: %v", i, err)
				}
				conns[i] = c
			}
		}(d)
	}
	wg.Wait()
	os.Stdout.WriteString("ready\n")
	time.Sleep(time.Minute)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// raiseFDLimit lifts RLIMIT_NOFILE to at least want: each idle connection
// takes two descriptors here, the client's and the server's.
func raiseFDLimit(want uint64) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		log.Fatal(err)
	}
	if rl.Cur >= want {
		return
	}
	rl.Cur = want
	if rl.Max < want {
		rl.Max = want // root may raise the hard limit (up to fs.nr_open)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		log.Fatalf("RLIMIT_NOFILE to %d: %v", want, err)
	}
}
