package http

import (
	"bytes"

	"golang.org/x/net/http2/hpack"
)

// h2Shared is the HTTP/2 state a loop's connections share, because each
// use of it ends before the loop turns to another connection: the fields
// of the header block being decoded, and the encoder of answers' heads.
// A connection keeps only what must outlive a request, so an idle one
// holds no HPACK buffers.
//
// Answers are encoded without HPACK's dynamic table (RFC 7541 §6.2.2,
// literals without indexing, and the static table): the encoder then has
// no state a connection would have to keep, or that could carry one
// connection's table into another's, and it fits any
// SETTINGS_HEADER_TABLE_SIZE a client sets, 0 included. The price is a
// few dozen bytes per answer that an indexed date and server field would
// save; nginx too sends those fields again in every answer. The client's
// dynamic table, which it fills as it likes, stays with each connection's
// decoder (h2Conn.dec).
type h2Shared struct {
	fields []hpack.HeaderField            // the block being decoded
	spans  []struct{ ns, ne, vs, ve int } // buildRequest's field positions
	enc    *hpack.Encoder
	encBuf bytes.Buffer
	lower  []byte // a field name in lowercase

	// stdStarts are the FromStd streams opened in the loop's current
	// batch of events, whose handlers start after it (startStds,
	// deferred once per batch): a stream the client resets in the same
	// input, as a rapid reset does, then costs no goroutine, no handler
	// run and no post back to the loop; and, when it has no body, no
	// net/http request either.
	stdStarts   []stdStart
	startStdsFn func() // startStds, made once
}

// stdStart is a FromStd handler to start: on st, with its exchange x, or
// with the root handler on a request made then when x is nil.
type stdStart struct {
	st *h2Stream
	x  *stdExchange
}

// h2Shared returns the loop's HTTP/2 state, made on first use, so a loop
// that serves no HTTP/2 holds none.
func (ls *loopState) h2Shared() *h2Shared {
	if ls.h2 == nil {
		sh := &h2Shared{}
		sh.enc = hpack.NewEncoder(&sh.encBuf)
		// A table of 0 bytes: nothing is ever indexed. The encoder
		// announces a new size at the start of its next block; that
		// announcement is written here and dropped, since no client's
		// table needs it (an encoder may always use less than allowed).
		sh.enc.SetMaxDynamicTableSizeLimit(0)
		_ = sh.enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
		sh.encBuf.Reset()
		sh.startStdsFn = sh.startStds
		ls.h2 = sh
	}
	return ls.h2
}

// startStdLater starts a FromStd handler on st after the loop's current
// batch of events: x's, or with x nil the root handler's.
func (sh *h2Shared) startStdLater(st *h2Stream, x *stdExchange) {
	if len(sh.stdStarts) == 0 {
		st.hc.cs.c.Loop().Defer(sh.startStdsFn)
	}
	sh.stdStarts = append(sh.stdStarts, stdStart{st, x})
}

// startStds starts the handlers startStdLater kept (h2Stream.runStd).
func (sh *h2Shared) startStds() {
	for i := 0; i < len(sh.stdStarts); i++ {
		s := sh.stdStarts[i]
		sh.stdStarts[i] = stdStart{}
		s.st.runStd(s.x)
	}
	sh.stdStarts = sh.stdStarts[:0]
}
