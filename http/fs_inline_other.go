//go:build !linux

package http

import (
	"errors"
	"os"
)

// openCached: only Linux's openat2 can open a file with a promise not to
// touch the disk (RESOLVE_CACHED), so elsewhere every file is served from
// the blocking pool.
func (j fileJob) openCached() (*os.File, os.FileInfo, error) {
	return nil, nil, errors.ErrUnsupported
}
