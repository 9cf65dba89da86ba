package client

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
)

// Transport adapts a Client to net/http.RoundTripper, so http.Client and
// httputil.ReverseProxy send through the Client's per-loop pools:
//
//	hc := &http.Client{Transport: &client.Transport{Client: c}}
//
// A request body is read whole before the request is sent (the Client
// sends a body with the head, in one write). Requests go over HTTP/1.1,
// or HTTP/2 with Proto set; "http" and "https" URLs only.
type Transport struct {
	Client *Client
	Proto  Proto // the protocol of every request (see Request.Proto)
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	req, err := toRequest(r)
	if err != nil {
		return nil, err
	}
	req.Proto = t.Proto
	resp, err := t.Client.Do(r.Context(), req)
	if err != nil {
		if cerr := r.Context().Err(); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
	hr := &http.Response{
		Status:        fmt.Sprintf("%d %s", resp.Status, resp.Reason),
		StatusCode:    resp.Status,
		Proto:         fmt.Sprintf("HTTP/1.%d", resp.Minor),
		ProtoMajor:    1,
		ProtoMinor:    resp.Minor,
		Header:        resp.Header,
		Body:          resp.Body,
		ContentLength: resp.ContentLength,
		Request:       r,
	}
	if resp.HTTP2 {
		hr.Status = fmt.Sprintf("%d %s", resp.Status, http.StatusText(resp.Status))
		hr.Proto, hr.ProtoMajor, hr.ProtoMinor = "HTTP/2.0", 2, 0
		hr.Trailer = http.Header{}
		resp.Trailer = hr.Trailer // filled before Body returns io.EOF
	}
	if resp.Header.Get("Transfer-Encoding") != "" {
		hr.TransferEncoding = []string{"chunked"}
		hr.Header.Del("Transfer-Encoding")
		hr.Trailer = http.Header{}
		resp.Trailer = hr.Trailer // filled before Body returns io.EOF
	}
	if r.Method == http.MethodHead || resp.Status == 204 || resp.Status == 304 {
		hr.Body = http.NoBody
		resp.Body.Close()
	}
	return hr, nil
}

// toRequest converts a net/http request to a Request.
func toRequest(r *http.Request) (*Request, error) {
	if r.URL == nil {
		return nil, fmt.Errorf("%w: no URL", ErrInvalidRequest)
	}
	var tls bool
	switch r.URL.Scheme {
	case "http":
	case "https":
		tls = true
	default:
		return nil, fmt.Errorf("%w: unsupported scheme %q", ErrInvalidRequest, r.URL.Scheme)
	}
	addr := r.URL.Host
	if _, _, err := net.SplitHostPort(addr); err != nil {
		port := "80"
		if tls {
			port = "443"
		}
		addr = net.JoinHostPort(strings.Trim(addr, "[]"), port)
	}
	method := r.Method
	if method == "" {
		method = http.MethodGet
	}
	req := &Request{Method: method, Addr: addr, TLS: tls, Host: r.Host, Target: r.URL.RequestURI()}
	if req.Host == "" {
		req.Host = r.URL.Host
	}
	for k, vs := range r.Header {
		if isHopByHop(k) {
			continue
		}
		for _, v := range vs {
			req.Header = append(req.Header, Field{Name: []byte(k), Value: []byte(v)})
		}
	}
	if r.Body != nil && r.Body != http.NoBody {
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		req.Body = b
	}
	if req.Body == nil && bodyExpected(method) {
		req.Body = []byte{}
	}
	return req, nil
}

// isHopByHop: fields of one connection, not forwarded (RFC 9110 §7.6.1).
func isHopByHop(k string) bool {
	switch k {
	case "Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade", "Te", "Trailer":
		return true
	}
	return false
}
