package http

import (
	"os"

	"golang.org/x/sys/unix"
)

// resolveCached is openat2's RESOLVE_CACHED (Linux 5.12, include/uapi/
// linux/openat2.h), which x/sys does not name.
const resolveCached = 0x20

// openCached opens and stats the file j names if that needs no disk
// access, as fileJob.open would: under root with no way out of it
// (RESOLVE_BENEATH refuses "..", absolute names and symbolic links that
// leave it), or by name.
func (j fileJob) openCached() (*os.File, os.FileInfo, error) {
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_CLOEXEC, Resolve: resolveCached}
	dir, name := unix.AT_FDCWD, j.name
	if j.root != "" {
		d, err := unix.Openat2(unix.AT_FDCWD, j.root, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: resolveCached})
		if err != nil {
			return nil, nil, err
		}
		defer unix.Close(d)
		dir = d
		name = j.rel()
		how.Resolve |= unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS
	}
	fd, err := unix.Openat2(dir, name, &how)
	if err != nil {
		return nil, nil, err
	}
	f := os.NewFile(uintptr(fd), j.name)
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}
