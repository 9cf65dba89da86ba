// Package proc reads per-process CPU time and memory from Linux /proc.
//
// CPU time is utime+stime from /proc/PID/stat: the sum over all the
// process's threads (live and exited), in clock ticks. Ticks are converted
// to seconds with CLK_TCK (sysconf(_SC_CLK_TCK)), read once through
// `getconf CLK_TCK` and assumed to be 100 — the value on every Linux
// architecture veloq targets — if getconf is missing. The resolution is
// one tick (10 ms), so over a 4 s window at one busy core the error is
// about 0.25 %.
package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

var (
	tckOnce sync.Once
	tck     int64 = 100
)

// ClockTicks returns CLK_TCK, the unit of utime and stime in /proc/PID/stat.
func ClockTicks() int64 {
	tckOnce.Do(func() {
		out, err := exec.Command("getconf", "CLK_TCK").Output()
		if err != nil {
			return
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
		if err == nil && v > 0 {
			tck = v
		}
	})
	return tck
}

// CPUTicks returns utime+stime of pid, in clock ticks.
func CPUTicks(pid int) (int64, error) {
	user, sys, err := statTicks(pid)
	return user + sys, err
}

func statTicks(pid int) (user, sys int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	return parseStatTicks(b)
}

// parseStatTicks extracts utime (field 14) and stime (field 15) from the
// contents of /proc/PID/stat. Field 2, comm, is in parentheses and may hold
// spaces and ')' itself, so the fields are counted after the last ')'.
func parseStatTicks(b []byte) (user, sys int64, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("proc: malformed stat: no ')'")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field N is f[N-3].
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("proc: malformed stat: %d fields after comm", len(f))
	}
	if user, err = strconv.ParseInt(f[14-3], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("proc: utime: %w", err)
	}
	if sys, err = strconv.ParseInt(f[15-3], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("proc: stime: %w", err)
	}
	return user, sys, nil
}

// CPUSeconds returns utime+stime of pid in seconds.
func CPUSeconds(pid int) (float64, error) {
	t, err := CPUTicks(pid)
	if err != nil {
		return 0, err
	}
	return float64(t) / float64(ClockTicks()), nil
}

// Sample is one reading of a process's CPU time, with the wall-clock instant
// it was taken.
type Sample struct {
	At       time.Time
	Ticks    int64 // utime+stime
	SysTicks int64 // stime alone: the part spent in the kernel
}

// Take reads pid's CPU time now.
func Take(pid int) (Sample, error) {
	user, sys, err := statTicks(pid)
	return Sample{At: time.Now(), Ticks: user + sys, SysTicks: sys}, err
}

// CPUBetween returns the CPU seconds pid used between two samples.
func CPUBetween(a, b Sample) float64 {
	return float64(b.Ticks-a.Ticks) / float64(ClockTicks())
}

// SysBetween returns the part of [CPUBetween] spent in the kernel (stime):
// a server that spends most of a request there can gain little in user
// space, whatever its code.
func SysBetween(a, b Sample) float64 {
	return float64(b.SysTicks-a.SysTicks) / float64(ClockTicks())
}

// RSSKiB returns VmRSS of pid in KiB, from /proc/PID/status.
func RSSKiB(pid int) (int64, error) {
	return statusKiB(pid, "VmRSS:")
}

// HWMKiB returns VmHWM (peak resident set) of pid in KiB.
func HWMKiB(pid int) (int64, error) {
	return statusKiB(pid, "VmHWM:")
}

func statusKiB(pid int, key string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseStatusKiB(b, key)
}

func parseStatusKiB(b []byte, key string) (int64, error) {
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, key)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("proc: malformed %s line %q", key, strings.TrimSpace(line))
		}
		return strconv.ParseInt(f[0], 10, 64)
	}
	return 0, fmt.Errorf("proc: no %s in status", key)
}

// FDCount returns how many file descriptors pid has open.
func FDCount(pid int) (int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents), err
}

// PassiveOpens returns the TCP connections accepted so far in this network
// namespace (PassiveOpens in /proc/net/snmp), by every process: over a
// window in which one server alone is loaded, its change tells how many
// connections that load opened.
func PassiveOpens() (int64, error) {
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		return 0, err
	}
	return parseSNMP(b, "Tcp:", "PassiveOpens")
}

// parseSNMP finds field in /proc/net/snmp's contents: each protocol has a
// line of names, then a line of values, both starting with proto.
func parseSNMP(b []byte, proto, field string) (int64, error) {
	var names []string
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != proto {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, name := range names {
			if name == field && i < len(f) {
				return strconv.ParseInt(f[i], 10, 64)
			}
		}
		break
	}
	return 0, fmt.Errorf("proc: no %s %s in snmp", proto, field)
}
