package http

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"mime"
	nethttp "net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/veloq/veloq/executor"
)

// mimeLoaded is set once the system's MIME tables are in memory: the
// first mime.TypeByExtension reads them from disk, which a loop must not
// do, so until then files are served through the pool (see serveInline).
// They are loaded on first use rather than by every server: about 600 KB
// of small objects that every GC cycle marks again, which cost a FromStd
// server (whose requests allocate) 3,300 of its 34,000 instructions per
// request in callgrind, though it served no file.
var mimeLoaded atomic.Bool

// typeByExtension is mime.TypeByExtension of name's extension, loading
// the MIME tables if they are not yet.
func typeByExtension(name string) string {
	t := mime.TypeByExtension(filepath.Ext(name))
	mimeLoaded.Store(true)
	return t
}

// sniffLen is how much of a file DetectContentType looks at.
const sniffLen = 512

// smallFile is the size up to which a file is read into the response body
// by the task that opened it: a second trip through the blocking pool
// costs more than copying so few bytes.
const smallFile = 16 << 10

// ServeFile replies to r with the contents of the named file or
// directory, with the semantics of net/http's ServeFile: Content-Type
// from the name's extension or else from sniffing the first 512 bytes,
// Last-Modified and an ETag made from the size and modification time,
// the conditional fields (If-Match, If-Unmodified-Since, If-None-Match,
// If-Modified-Since, If-Range), Range (206 with Content-Range for one
// range, multipart/byteranges for several, 416 with
// "Content-Range: bytes */size" when none can be served), and HEAD. A
// request whose path has a ".." element is refused with 400, as
// net/http does, since name is often built from it. A directory is
// served by its index.html (a path without its final slash is
// redirected to it first); a directory without one gets 403, since
// listings are not served. A missing file gets 404, one that cannot be
// opened for want of permission 403.
//
// The file is opened, inspected and (up to 16 KiB) read on the server's
// blocking pool (see [WithFilePool]), never on the loop; the connection's
// later requests wait meanwhile, like those of an [OffloadedBlocking]
// handler. A larger body is sent with vnet.Conn.SendFile: from the page
// cache to the socket with sendfile(2) on the pool, without a copy through
// user space, on a plaintext connection, and in bounded 64 KiB copies over
// TLS; either way a slow client holds no more than its socket buffers. Set
// fields (Cache-Control, a Content-Type, an ETag of your own) before the
// call; the response is complete when the handler returns, so do not
// write a body.
func ServeFile(w *ResponseWriter, r *Request, name string) {
	if hasDotDot(string(r.Path)) {
		w.WriteHeader(StatusBadRequest)
		w.WriteString("invalid URL path\n")
		return
	}
	offloadFile(w, r, fileJob{name: name, dirRedirect: true})
}

// ServeContent replies to r with the contents of f, an open regular file,
// as [ServeFile] does, but with the caller's name (for the Content-Type)
// and modtime (for Last-Modified and the date conditions; the zero time
// leaves them out). An ETag is used only if the caller set one in
// w.Header(), as in net/http. ServeContent takes f over: it is closed
// once the response has been sent (or failed), after the handler has
// returned, so the handler must not close it.
func ServeContent(w *ResponseWriter, r *Request, name string, modtime time.Time, f *os.File) {
	offloadFile(w, r, fileJob{name: name, modtime: modtime, file: f})
}

// FileServer returns a handler that serves the files in the directory
// root, by the request path, with [ServeFile]'s semantics. The path is
// percent-decoded and cleaned, a ".." element is refused with 400, and
// the file is opened through an [os.Root], so neither ".." nor a symbolic
// link can reach outside root. Mount it under a prefix with
// [StripPrefix].
func FileServer(root string) Handler {
	typeByExtension(".html") // load the MIME tables now, not on the pool
	return HandlerFunc(func(w *ResponseWriter, r *Request) {
		p := string(r.Path)
		if strings.Contains(p, "%") {
			u, err := url.PathUnescape(p)
			if err != nil {
				w.WriteHeader(StatusBadRequest)
				w.WriteString("invalid URL escape\n")
				return
			}
			p = u
		}
		if hasDotDot(p) || strings.IndexByte(p, 0) >= 0 {
			w.WriteHeader(StatusBadRequest)
			w.WriteString("invalid URL path\n")
			return
		}
		offloadFile(w, r, fileJob{root: root, name: p, dirRedirect: true})
	})
}

// StripPrefix returns a handler that serves requests whose path starts
// with prefix by h, with the prefix removed from Request.Path (and
// Target), and answers 404 to the others.
func StripPrefix(prefix string, h Handler) Handler {
	return HandlerFunc(func(w *ResponseWriter, r *Request) {
		p := r.Path
		if !strings.HasPrefix(string(p), prefix) {
			w.WriteHeader(StatusNotFound)
			w.WriteString("404 page not found\n")
			return
		}
		r.Path = p[len(prefix):]
		if strings.HasPrefix(string(r.Target), prefix) {
			r.Target = r.Target[len(prefix):]
		}
		h.ServeHTTP(w, r)
	})
}

// hasDotDot reports whether p has a ".." element, with either slash.
func hasDotDot(p string) bool {
	if !strings.Contains(p, "..") {
		return false
	}
	for e := range strings.FieldsFuncSeq(p, func(r rune) bool { return r == '/' || r == '\\' }) {
		if e == ".." {
			return true
		}
	}
	return false
}

// WithFilePool sets the blocking pool on which [ServeFile],
// [ServeContent] and [FileServer] open and read files. By default each
// Server has its own, of up to 64 goroutines that exit when idle; it
// starts none until a file is served.
func WithFilePool(b *executor.BlockingPool) Option {
	return func(o *serverOptions) { o.filePool = b }
}

// fileJob is one file to serve, described on the loop and served on the
// blocking pool (fileJob.ServeHTTP).
type fileJob struct {
	root        string   // FileServer: name is a URL path under root
	name        string   // the file's name (ServeFile) or URL path (FileServer)
	dirRedirect bool     // a directory path without its final slash is redirected
	file        *os.File // ServeContent's file
	modtime     time.Time
}

// offloadFile runs j on the server's file pool as an offloaded request,
// or at once when w is already off the loop.
func offloadFile(w *ResponseWriter, r *Request, j fileJob) {
	if w.off || w.ex == nil {
		j.ServeHTTP(w, r)
		return
	}
	if j.serveInline(w, r) {
		return
	}
	w.then = then{step: stepOffload, job: newOffloadJob(w, r, &offloadHandler{b: w.ex.shared().srv.opts.filePool, h: j})}
}

// ServeHTTP serves the file, off the loop.
func (j fileJob) ServeHTTP(w *ResponseWriter, r *Request) {
	if j.file != nil {
		fi, err := j.file.Stat()
		if err != nil {
			j.file.Close()
			fileError(w, err)
			return
		}
		serveContent(w, r, j.name, j.modtime, j.file, fi.Size(), "", false)
		return
	}
	f, fi, err := j.open()
	if err != nil {
		fileError(w, err)
		return
	}
	if fi.IsDir() {
		urlPath := string(r.Path)
		if j.dirRedirect && !strings.HasSuffix(urlPath, "/") {
			f.Close()
			target := path.Base(urlPath) + "/"
			if len(r.Query) > 0 {
				target += "?" + string(r.Query)
			}
			w.Header().Set("Location", target)
			w.WriteHeader(StatusMovedPermanently)
			return
		}
		f.Close()
		index, ifi, err := j.openIndex()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				err = fs.ErrPermission // no listings
			}
			fileError(w, err)
			return
		}
		f, fi = index, ifi
		j.name = "index.html"
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		fileError(w, fs.ErrPermission)
		return
	}
	serveContent(w, r, j.name, fi.ModTime(), f, fi.Size(), fileETag(fi), false)
}

// fileETag is the strong validator FileServer gives a file: its
// modification time and size.
func fileETag(fi os.FileInfo) string {
	return `"` + strconv.FormatInt(fi.ModTime().UnixNano(), 16) + "-" + strconv.FormatInt(fi.Size(), 16) + `"`
}

// rel is the name j asks for, relative to its root: cleaned, never above
// it ("." for the root itself).
func (j fileJob) rel() string {
	if name := strings.TrimPrefix(path.Clean("/"+j.name), "/"); name != "" {
		return name
	}
	return "."
}

// open opens the file j names and stats it.
func (j fileJob) open() (*os.File, os.FileInfo, error) {
	var (
		f   *os.File
		err error
	)
	if j.root != "" {
		f, err = os.OpenInRoot(j.root, j.rel())
	} else {
		f, err = os.Open(j.name)
	}
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// openIndex opens the index.html of the directory j names.
func (j fileJob) openIndex() (*os.File, os.FileInfo, error) {
	if j.root != "" {
		j.name = path.Join(j.name, "index.html")
	} else {
		j.name = filepath.Join(j.name, "index.html")
	}
	return j.open()
}

// fileError answers an error opening a file as net/http does: 404 for a
// missing file, 403 for a forbidden one, 500 otherwise.
func fileError(w *ResponseWriter, err error) {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		w.WriteHeader(StatusNotFound)
		w.WriteString("404 page not found\n")
	case errors.Is(err, fs.ErrPermission):
		w.WriteHeader(StatusForbidden)
		w.WriteString("403 Forbidden\n")
	default:
		w.WriteHeader(StatusInternalServerError)
		w.WriteString("500 Internal Server Error\n")
	}
}

// serveContent answers r with f (size bytes), off the loop, or on it when
// inline is set: then it must not read the file (the caller made sure
// the type is known without sniffing), and any body is sent from the
// file. It takes f over. etag is used when the handler set none.
func serveContent(w *ResponseWriter, r *Request, name string, modtime time.Time, f *os.File, size int64, etag string, inline bool) {
	h := w.Header()
	if tag := string(h.Get("ETag")); tag != "" {
		etag = tag
	} else if etag != "" {
		h.Set("ETag", etag)
	}
	if !isZeroTime(modtime) {
		h.Set("Last-Modified", modtime.UTC().Format(nethttp.TimeFormat))
	}
	status, rangeOK := precondition(r, etag, modtime)
	if status != 0 {
		f.Close()
		if status == StatusNotModified {
			h.Del("Content-Type")
			if etag != "" {
				h.Del("Last-Modified")
			}
		}
		w.WriteHeader(status)
		return
	}
	ctype := string(h.Get("Content-Type"))
	if ctype == "" {
		ctype = typeByExtension(name)
		if ctype == "" {
			var buf [sniffLen]byte
			n, err := f.ReadAt(buf[:], 0)
			if err != nil && err != io.EOF {
				f.Close()
				fileError(w, err)
				return
			}
			ctype = nethttp.DetectContentType(buf[:n])
		}
		h.Set("Content-Type", ctype)
	}
	h.Set("Accept-Ranges", "bytes")

	var ranges []byteRange
	if rangeOK {
		var err error
		ranges, err = parseRange(string(r.Header("Range")), size)
		if err != nil {
			f.Close()
			h.Del("Content-Type")
			h.Set("Content-Range", "bytes */"+strconv.FormatInt(size, 10))
			w.WriteHeader(StatusRequestedRangeNotSatisfiable)
			w.WriteString(err.Error() + "\n")
			return
		}
		if sumRanges(ranges) > size {
			// More bytes than the file has (overlapping ranges): serve it
			// whole rather than amplify, as net/http does.
			ranges = nil
		}
	}
	body := &fileBody{f: f}
	switch len(ranges) {
	case 0:
		body.parts = []filePart{{r: byteRange{0, size}}}
	case 1:
		h.Set("Content-Range", ranges[0].contentRange(size))
		w.WriteHeader(StatusPartialContent)
		body.parts = []filePart{{r: ranges[0]}}
	default:
		boundary := newBoundary()
		h.Set("Content-Type", "multipart/byteranges; boundary="+boundary)
		w.WriteHeader(StatusPartialContent)
		for i, rg := range ranges {
			head := "\r\n--" + boundary + "\r\n"
			if i == 0 {
				head = head[2:]
			}
			head += "Content-Type: " + ctype + "\r\nContent-Range: " + rg.contentRange(size) + "\r\n\r\n"
			body.parts = append(body.parts, filePart{head: []byte(head), r: rg})
		}
		body.tail = []byte("\r\n--" + boundary + "--\r\n")
	}
	for _, p := range body.parts {
		body.length += int64(len(p.head)) + p.r.length
	}
	body.length += int64(len(body.tail))
	if r.IsHead() {
		body.discard()
		w.file = body
		return
	}
	if !inline && (body.length <= smallFile || w.ex == nil || w.streamed) {
		// Read here, on the pool: the response carries it like any body.
		if err := body.readInto(w); err != nil {
			w.resp.Reset(w.resp.Body()[:0])
			fileError(w, err)
		}
		return
	}
	w.file = body
}

// newBoundary returns a random multipart boundary.
func newBoundary() string {
	var b [15]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
