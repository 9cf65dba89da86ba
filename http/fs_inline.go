package http

import (
	"os"

	"golang.org/x/sys/unix"
)

// This file serves a file on the loop itself when that cannot block: the
// open is an openat2(2) with RESOLVE_CACHED, which fails with EAGAIN
// unless every path component is in the kernel's lookup cache (io_uring
// opens files without blocking the same way), fstat on an open file
// reads only the in-memory inode, and the body still leaves through
// Conn.SendFile on the blocking pool. That saves one trip through the
// pool per request: a thread hand-off costs more than the whole of the
// work on the loop. Anything else (a lookup not in cache, a directory, an
// error to map, a small file read into the response, a type that needs
// sniffing) goes to the pool as before.

// resolveCached is openat2's RESOLVE_CACHED (Linux 5.12, include/uapi/
// linux/openat2.h), which x/sys does not name.
const resolveCached = 0x20

// serveInline serves j on the loop if it can without blocking, and
// reports whether it did.
func (j fileJob) serveInline(w *ResponseWriter, r *Request) bool {
	if j.file != nil || w.streamed {
		return false
	}
	ctype := string(w.Header().Get("Content-Type"))
	if ctype == "" && (!mimeLoaded.Load() || typeByExtension(j.name) == "") {
		return false // sniffing reads the file; loading the MIME tables reads theirs
	}
	f, fi, err := j.openCached()
	if err != nil {
		return false
	}
	if !fi.Mode().IsRegular() || fi.Size() <= smallFile {
		f.Close()
		return false
	}
	serveContent(w, r, j.name, fi.ModTime(), f, fi.Size(), fileETag(fi), true)
	return true
}

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
