package h1

import "strconv"

// StatusText returns the reason phrase for code, or "" if it is unknown.
func StatusText(code int) string {
	switch code {
	case 100:
		return "Continue"
	case 101:
		return "Switching Protocols"
	case 102:
		return "Processing"
	case 103:
		return "Early Hints"
	case 200:
		return "OK"
	case 201:
		return "Created"
	case 202:
		return "Accepted"
	case 203:
		return "Non-Authoritative Information"
	case 204:
		return "No Content"
	case 205:
		return "Reset Content"
	case 206:
		return "Partial Content"
	case 207:
		return "Multi-Status"
	case 208:
		return "Already Reported"
	case 226:
		return "IM Used"
	case 300:
		return "Multiple Choices"
	case 301:
		return "Moved Permanently"
	case 302:
		return "Found"
	case 303:
		return "See Other"
	case 304:
		return "Not Modified"
	case 305:
		return "Use Proxy"
	case 307:
		return "Temporary Redirect"
	case 308:
		return "Permanent Redirect"
	case 400:
		return "Bad Request"
	case 401:
		return "Unauthorized"
	case 402:
		return "Payment Required"
	case 403:
		return "Forbidden"
	case 404:
		return "Not Found"
	case 405:
		return "Method Not Allowed"
	case 406:
		return "Not Acceptable"
	case 407:
		return "Proxy Authentication Required"
	case 408:
		return "Request Timeout"
	case 409:
		return "Conflict"
	case 410:
		return "Gone"
	case 411:
		return "Length Required"
	case 412:
		return "Precondition Failed"
	case 413:
		return "Content Too Large"
	case 414:
		return "URI Too Long"
	case 415:
		return "Unsupported Media Type"
	case 416:
		return "Range Not Satisfiable"
	case 417:
		return "Expectation Failed"
	case 418:
		return "I'm a teapot"
	case 421:
		return "Misdirected Request"
	case 422:
		return "Unprocessable Content"
	case 423:
		return "Locked"
	case 424:
		return "Failed Dependency"
	case 425:
		return "Too Early"
	case 426:
		return "Upgrade Required"
	case 428:
		return "Precondition Required"
	case 429:
		return "Too Many Requests"
	case 431:
		return "Request Header Fields Too Large"
	case 451:
		return "Unavailable For Legal Reasons"
	case 500:
		return "Internal Server Error"
	case 501:
		return "Not Implemented"
	case 502:
		return "Bad Gateway"
	case 503:
		return "Service Unavailable"
	case 504:
		return "Gateway Timeout"
	case 505:
		return "HTTP Version Not Supported"
	case 506:
		return "Variant Also Negotiates"
	case 507:
		return "Insufficient Storage"
	case 508:
		return "Loop Detected"
	case 510:
		return "Not Extended"
	case 511:
		return "Network Authentication Required"
	}
	return ""
}

// AppendStatusLine appends the status line
// "HTTP/1.<minor> <status> <reason>\r\n" to dst. minor is 0 or 1 (anything
// else is written as 1). A status outside 100..999 is written as 500. An
// unknown status gets an empty reason phrase, which RFC 9112 §4 allows.
func AppendStatusLine(dst []byte, minor int, status int) []byte {
	if status == 200 && minor != 0 {
		return append(dst, "HTTP/1.1 200 OK\r\n"...) // most answers: one copy
	}
	if status < 100 || status > 999 {
		status = 500
	}
	v := byte('1')
	if minor == 0 {
		v = '0'
	}
	dst = append(dst, 'H', 'T', 'T', 'P', '/', '1', '.', v, ' ',
		byte('0'+status/100), byte('0'+status/10%10), byte('0'+status%10), ' ')
	dst = append(dst, StatusText(status)...)
	return append(dst, '\r', '\n')
}

// AppendChunkHeader appends the
// chunk-size line announcing n bytes of data ("<hex>\r\n"). The caller
// appends the data and a CRLF; use it to frame a chunk whose data is
// written separately (e.g. with writev). n must be positive: a zero size
// is the last chunk.
func AppendChunkHeader(dst []byte, n int) []byte {
	dst = strconv.AppendUint(dst, uint64(n), 16)
	return append(dst, '\r', '\n')
}

// AppendChunk appends p as one chunk of a chunked body. An
// empty p appends nothing, since a zero-size chunk would end the body.
func AppendChunk(dst, p []byte) []byte {
	if len(p) == 0 {
		return dst
	}
	dst = AppendChunkHeader(dst, len(p))
	dst = append(dst, p...)
	return append(dst, '\r', '\n')
}

// AppendLastChunk appends the last chunk
// and an empty trailer section, ending a chunked body.
func AppendLastChunk(dst []byte) []byte {
	return append(dst, "0\r\n\r\n"...)
}

// AppendContinue appends the interim
// response "HTTP/1.1 100 Continue" sent to a client that asked for it with
// Expect: 100-continue.
func AppendContinue(dst []byte) []byte {
	return append(dst, "HTTP/1.1 100 Continue\r\n\r\n"...)
}

// AppendError appends a complete plain-text response for status, meant
// for an [Error]: the connection is to be closed afterwards, and the
// response says so. date may be empty; server is the Server field's value.
func AppendError(dst []byte, status int, date []byte, server string) []byte {
	if status < 100 || status > 999 {
		status = 500
	}
	text := StatusText(status)
	dst = AppendStatusLine(dst, 1, status)
	if len(date) > 0 {
		dst = append(dst, "Date: "...)
		dst = append(dst, date...)
		dst = append(dst, '\r', '\n')
	}
	dst = append(dst, "Server: "...)
	dst = append(dst, server...)
	dst = append(dst, "\r\n"+
		"Content-Type: text/plain; charset=utf-8\r\n"+
		"Connection: close\r\n"+
		"Content-Length: "...)
	dst = strconv.AppendInt(dst, int64(len(text)+1), 10)
	dst = append(dst, "\r\n\r\n"...)
	dst = append(dst, text...)
	return append(dst, '\n')
}
