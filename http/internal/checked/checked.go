// Package checked lets a package of the http tree hand package http a
// header field that its own parser has already checked, without http
// checking it again. http/proxy forwards each field of an upstream's
// HTTP/1 response head, which http/client parsed strictly; checking it
// again in ResponseHeader.AddBytes cost 1,500 instructions per proxied
// nginx response head (callgrind, cmd/veloq-proxy -backend epoll).
package checked

// AddResponseField appends the field name: value to h, which must be a
// *http.ResponseHeader, as its AddBytes does but without checking or
// cleaning it: name must be a token and value field-value bytes (no
// control character other than HTAB) without surrounding whitespace, as
// http/client's HTTP/1 parser delivers them. A field that breaks these
// rules would be sent as it is, and a CR or LF in it would split the
// response, so nothing that did not come out of such a parser may be
// given to it. Package http sets it when it is initialized.
var AddResponseField func(h any, name, value []byte)

// RequestChecked tells http/client that req, which must be a
// *client.Request, was built from what package http's HTTP/1 parser
// delivered, so its serializer need not check it again: the first fields
// of req.Header, and its Method, Target and Host when head is set.
// Those fields must have token names other than Host, Content-Length and
// Transfer-Encoding (which the client writes itself), and values without
// CR, LF or NUL; the method a token, the target and Host without
// whitespace or control characters. A field that breaks them would be
// sent as it is, and a CR or LF in it would split the request, so only
// bytes that came out of that parser (or constants) may be marked.
// http/proxy forwards an HTTP/1 client's request this way; checking it
// again in the client cost 800 instructions per proxied request
// (callgrind, cmd/veloq-proxy -backend epoll). Package client sets it
// when it is initialized.
var RequestChecked func(req any, fields int, head bool)
