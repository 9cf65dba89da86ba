package http

// stdHandler is the Handler FromStd returns.
type stdHandler struct{}

func (*stdHandler) ServeHTTP(w *ResponseWriter, r *Request) { w.WriteHeader(StatusNotImplemented) }

// stdExchange is one FromStd request in progress.
type stdExchange struct{}

func (cs *conn) startStd(req *Request)  { cs.fail(StatusNotImplemented) }
func (cs *conn) feedStd()               {}
func (x *stdExchange) peerGone()        {}
func (x *stdExchange) connClosed(error) {}
