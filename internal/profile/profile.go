// Package profile starts the CPU profile the commands (echo-server,
// veloq-proxy) write with -cpuprofile, and writes the heap profile they
// write with -memprofile.
package profile

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
)

// StartCPU writes a CPU profile of the process to path until stop is
// called; an empty path profiles nothing.
func StartCPU(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// HeapAtStop returns a context done once ctx is done and a heap profile
// of the live heap, taken after a GC, is written to path: the commands
// shut down when their context is done, so the profile shows what the
// open connections hold, not the garbage of their handshakes. A failure
// to write it is reported to errs, prefixed with cmd; the command stops
// either way.
func HeapAtStop(ctx context.Context, path, cmd string, errs io.Writer) context.Context {
	after, cancel := context.WithCancel(context.Background())
	go func() {
		defer cancel()
		<-ctx.Done()
		runtime.GC()
		f, err := os.Create(path)
		if err == nil {
			err = pprof.WriteHeapProfile(f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Fprintf(errs, "%s: -memprofile: %v\n", cmd, err)
		}
	}()
	return after
}
