// Package profile starts the CPU profile the commands (echo-server,
// veloq-proxy) write with -cpuprofile.
package profile

import (
	"os"
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
