package proc

import (
	"os"
	"testing"
	"time"
)

func TestParseStatTicks(t *testing.T) {
	// comm with a space and a ')' inside, as a process may name itself.
	line := "1234 (a b) c) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 1 0 100 1000 10 18446744073709551615\n"
	user, sys, err := parseStatTicks([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if user != 250 || sys != 75 {
		t.Fatalf("ticks = %d user, %d sys, want 250, 75", user, sys)
	}
	if _, _, err := parseStatTicks([]byte("garbage")); err == nil {
		t.Fatal("want error for garbage")
	}
}

func TestParseStatusKiB(t *testing.T) {
	s := "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n"
	if v, err := parseStatusKiB([]byte(s), "VmRSS:"); err != nil || v != 1024 {
		t.Fatalf("VmRSS = %d, %v", v, err)
	}
	if v, err := parseStatusKiB([]byte(s), "VmHWM:"); err != nil || v != 2048 {
		t.Fatalf("VmHWM = %d, %v", v, err)
	}
	if _, err := parseStatusKiB([]byte(s), "VmSwap:"); err == nil {
		t.Fatal("want error for a missing key")
	}
}

func TestSelf(t *testing.T) {
	pid := os.Getpid()
	a, err := Take(pid)
	if err != nil {
		t.Fatal(err)
	}
	// Burn ~150 ms of CPU so the tick counter must move.
	end := time.Now().Add(150 * time.Millisecond)
	x := 0
	for time.Now().Before(end) {
		x++
	}
	b, err := Take(pid)
	if err != nil {
		t.Fatal(err)
	}
	if cpu := CPUBetween(a, b); cpu <= 0 || cpu > 5 {
		t.Fatalf("CPU over a 150 ms busy loop = %.3fs (x=%d)", cpu, x)
	}
	if sys := SysBetween(a, b); sys < 0 || sys > CPUBetween(a, b) {
		t.Fatalf("kernel CPU %.3fs of %.3fs", sys, CPUBetween(a, b))
	}
	if rss, err := RSSKiB(pid); err != nil || rss <= 0 {
		t.Fatalf("RSS = %d, %v", rss, err)
	}
	if n, err := FDCount(pid); err != nil || n < 3 {
		t.Fatalf("fds = %d, %v", n, err)
	}
	if ClockTicks() <= 0 {
		t.Fatal("CLK_TCK <= 0")
	}
}

func TestParseSNMP(t *testing.T) {
	b := []byte("Ip: Forwarding DefaultTTL\nIp: 1 64\n" +
		"Tcp: RtoAlgorithm RtoMin ActiveOpens PassiveOpens AttemptFails\nTcp: 1 200 305842 305582 230\n")
	if n, err := parseSNMP(b, "Tcp:", "PassiveOpens"); err != nil || n != 305582 {
		t.Fatalf("PassiveOpens = %d, %v", n, err)
	}
	if _, err := parseSNMP(b, "Tcp:", "Nope"); err == nil {
		t.Fatal("a missing field must fail")
	}
	if _, err := PassiveOpens(); err != nil {
		t.Fatalf("this machine's /proc/net/snmp: %v", err)
	}
}
