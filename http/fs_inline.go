package http

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
