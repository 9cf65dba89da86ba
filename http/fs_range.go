package http

import (
	"errors"
	nethttp "net/http"
	"strconv"
	"strings"
	"time"
)

// This file holds the request side of file serving: Range parsing and the
// conditional request rules of RFC 9110 §13, with net/http's choices
// where the RFC leaves one.

// byteRange is a part of a file: length bytes from start.
type byteRange struct{ start, length int64 }

// contentRange is the value of a Content-Range field for r in a file of
// size bytes.
func (r byteRange) contentRange(size int64) string {
	return "bytes " + strconv.FormatInt(r.start, 10) + "-" + strconv.FormatInt(r.start+r.length-1, 10) + "/" + strconv.FormatInt(size, 10)
}

// errNoOverlap says that no range of a well-formed Range field lies in
// the file: 416 with "Content-Range: bytes */size".
var errNoOverlap = errors.New("http: no range overlaps the file")

// errBadRange says that a Range field does not parse.
var errBadRange = errors.New("http: invalid range")

// parseRange parses a Range field value ("bytes=0-99,200-,-50") for a
// file of size bytes. Ranges that start past the end are dropped; if all
// of them are, it returns errNoOverlap. A nil result with a nil error
// means the field was empty.
func parseRange(s string, size int64) ([]byteRange, error) {
	if s == "" {
		return nil, nil
	}
	const unit = "bytes="
	if !strings.HasPrefix(s, unit) {
		return nil, errBadRange
	}
	var ranges []byteRange
	overlap := false
	for spec := range strings.SplitSeq(s[len(unit):], ",") {
		spec = strings.TrimSpace(spec)
		if spec == "" {
			continue
		}
		first, last, ok := strings.Cut(spec, "-")
		if !ok {
			return nil, errBadRange
		}
		first, last = strings.TrimSpace(first), strings.TrimSpace(last)
		var r byteRange
		if first == "" {
			// A suffix: the last n bytes.
			if last == "" || last[0] == '-' {
				return nil, errBadRange
			}
			n, err := strconv.ParseInt(last, 10, 64)
			if err != nil || n < 0 {
				return nil, errBadRange
			}
			if n == 0 {
				continue // a zero-length suffix selects nothing
			}
			n = min(n, size)
			r = byteRange{size - n, n}
		} else {
			start, err := strconv.ParseInt(first, 10, 64)
			if err != nil || start < 0 {
				return nil, errBadRange
			}
			if start >= size {
				continue // no overlap with the file
			}
			end := size - 1
			if last != "" {
				e, err := strconv.ParseInt(last, 10, 64)
				if err != nil || e < start {
					return nil, errBadRange
				}
				end = min(e, size-1)
			}
			r = byteRange{start, end - start + 1}
		}
		if r.length > 0 {
			overlap = true
			ranges = append(ranges, r)
		}
	}
	if !overlap {
		return nil, errNoOverlap
	}
	return ranges, nil
}

// sumRanges returns the bytes the ranges select.
func sumRanges(ranges []byteRange) (n int64) {
	for _, r := range ranges {
		n += r.length
	}
	return n
}

// condResult is the outcome of evaluating the request's preconditions.
type condResult uint8

const (
	condNone condResult = iota // no precondition decides
	condTrue
	condFalse
)

// etagStrongMatch reports whether the entity tags a and b match by the
// strong comparison (both strong, equal).
func etagStrongMatch(a, b string) bool {
	return a == b && a != "" && a[0] == '"'
}

// etagWeakMatch reports whether a and b match by the weak comparison.
func etagWeakMatch(a, b string) bool {
	return strings.TrimPrefix(a, "W/") == strings.TrimPrefix(b, "W/")
}

// scanETag returns the entity tag at the start of s and the rest, or ""
// if s does not start with one.
func scanETag(s string) (tag, rest string) {
	s = strings.TrimLeft(s, " \t")
	start := 0
	if strings.HasPrefix(s, "W/") {
		start = 2
	}
	if len(s[start:]) < 2 || s[start] != '"' {
		return "", ""
	}
	for i := start + 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return s[:i+1], s[i+1:]
		case c == 0x21 || c >= 0x23 && c != 0x7f:
		default:
			return "", ""
		}
	}
	return "", ""
}

// matchList evaluates an If-Match (strong) or If-None-Match (weak) list
// against etag.
func matchList(list, etag string, strong bool) condResult {
	for {
		list = strings.TrimLeft(list, " \t,")
		if list == "" {
			return condFalse
		}
		if list[0] == '*' {
			return condTrue
		}
		tag, rest := scanETag(list)
		if tag == "" {
			return condFalse
		}
		if strong && etagStrongMatch(tag, etag) || !strong && etagWeakMatch(tag, etag) {
			return condTrue
		}
		list = rest
	}
}

// unmodifiedSince evaluates If-Modified-Since or If-Unmodified-Since
// against modtime: condTrue if modtime is not after the field's date, at
// the field's one-second resolution.
func unmodifiedSince(field string, modtime time.Time) condResult {
	if field == "" || isZeroTime(modtime) {
		return condNone
	}
	t, err := nethttp.ParseTime(field)
	if err != nil {
		return condNone
	}
	if modtime.Truncate(time.Second).After(t) {
		return condFalse
	}
	return condTrue
}

// isZeroTime reports whether t is unset: the zero Time or the Unix epoch.
func isZeroTime(t time.Time) bool { return t.IsZero() || t.Equal(time.Unix(0, 0)) }

// precondition evaluates the request's conditional fields in RFC 9110
// §13.2.2's order and returns the status that ends the request (304 or
// 412), or 0 to go on. rangeOK reports whether a Range field may be
// honoured (If-Range).
func precondition(r *Request, etag string, modtime time.Time) (status int, rangeOK bool) {
	get := string(r.Method) == "GET" || r.IsHead()
	// 1–2: If-Match, else If-Unmodified-Since.
	if im := string(r.Header("If-Match")); im != "" {
		if matchList(im, etag, true) == condFalse {
			return StatusPreconditionFailed, false
		}
	} else if unmodifiedSince(string(r.Header("If-Unmodified-Since")), modtime) == condFalse {
		return StatusPreconditionFailed, false
	}
	// 3–4: If-None-Match, else If-Modified-Since (GET and HEAD only).
	if inm := string(r.Header("If-None-Match")); inm != "" {
		if matchList(inm, etag, false) == condTrue {
			if get {
				return StatusNotModified, false
			}
			return StatusPreconditionFailed, false
		}
	} else if get && unmodifiedSince(string(r.Header("If-Modified-Since")), modtime) == condTrue {
		return StatusNotModified, false
	}
	// 5: If-Range decides whether Range applies.
	ir := string(r.Header("If-Range"))
	if ir == "" || !get {
		return 0, get
	}
	if tag, _ := scanETag(ir); tag != "" {
		return 0, etagStrongMatch(tag, etag)
	}
	if isZeroTime(modtime) {
		return 0, false
	}
	t, err := nethttp.ParseTime(ir)
	return 0, err == nil && t.Unix() == modtime.Unix()
}
