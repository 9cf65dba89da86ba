package http

import (
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2/hpack"

	"github.com/veloq/veloq/http/internal/h2"
	vnet "github.com/veloq/veloq/net"
)

// freshHead reads until stream id's response HEADERS and decodes it with
// a decoder of its own, whose dynamic table is empty: that works only if
// the server's answers refer to no table entry.
func (r *rawH2) freshHead(id uint32) map[string]string {
	for {
		h, p, ok := r.next()
		require.True(r.t, ok, "connection closed before stream %d's answer", id)
		require.False(r.t, h.Type == h2.TypeGoAway || h.Type == h2.TypeRSTStream, "%s from the server", h.Type)
		if h.Type != h2.TypeHeaders || h.Stream != id {
			continue
		}
		block, err := h2.ParseHeaders(h, p)
		require.NoError(r.t, err)
		fields, err := hpack.NewDecoder(4096, nil).DecodeFull(block)
		require.NoError(r.t, err, "stream %d's head needs a table the client does not have", id)
		m := make(map[string]string, len(fields))
		for _, f := range fields {
			m[f.Name] = f.Value
		}
		return m
	}
}

// TestH2HPACKTablesPerConnection: connections of one loop share its HPACK
// scratch state, never a dynamic table. Each client's table stays with its
// connection across requests (entries it indexed are read back later,
// whatever other connections sent meanwhile), a reference to an entry
// only another connection has is a COMPRESSION_ERROR, and answers refer to
// no table entry, so each head decodes on its own.
func TestH2HPACKTablesPerConnection(t *testing.T) {
	echoTag := HandlerFunc(func(w *ResponseWriter, r *Request) {
		v, _ := r.Lookup("x-tag")
		w.Header().Set("X-Tag", string(v))
		w.Header().Set("Content-Type", "text/plain")
		w.WriteString("tag " + string(v))
	})
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, echoTag, WithNetOptions(vnet.WithLoops(1)))
		addr := s.Addr().String()
		tests := []struct {
			conn int // which client connection sends
			tag  string
		}{
			{0, "alpha"}, // connection 0 indexes x-tag: alpha
			{1, "beta"},  // connection 1 indexes x-tag: beta
			{0, "alpha"}, // ... and each refers to its own entry after
			{1, "beta"},
			{0, "gamma"},
			{0, "alpha"},
			{1, "beta"},
		}
		conns := []*rawH2{dialH2(t, addr), dialH2(t, addr)}
		next := []uint32{1, 1}
		for i, tt := range tests {
			r := conns[tt.conn]
			id := next[tt.conn]
			next[tt.conn] += 2
			require.NoError(t, r.write(h2.AppendHeaders(nil, id, true, r.block("GET", "/", "x-tag", tt.tag), h2.MinMaxFrameSize)))
			head := r.freshHead(id)
			require.Equal(t, "200", head[":status"], "request %d", i)
			require.Equal(t, tt.tag, head["x-tag"], "request %d", i)
			require.NotEmpty(t, head["date"])
			require.Equal(t, DefaultServerName, head["server"])
		}
		// A block that names dynamic entry 62 (the newest) on a
		// connection whose client indexed nothing: the entry is another
		// connection's, and this one's decoder must not find it.
		r := dialH2(t, addr)
		block := []byte{0x82, 0x86, 0x84, 0x41, 0x01, 'x', 0x80 | 62 + 1} // :method GET, :scheme http, :path /, :authority x (indexed as 62), then 63
		require.NoError(t, r.write(h2.AppendHeaders(nil, 1, true, block, h2.MinMaxFrameSize)))
		require.Equal(t, h2.CompressionError, r.goAway())
	})
}

// TestH2HeaderBlockSplit: a block in one HEADERS is decoded where it lies
// in the input, one split over CONTINUATION frames is collected first;
// both give the same request, on one connection whose client indexes its
// fields (so the second block refers to entries the first one made).
func TestH2HeaderBlockSplit(t *testing.T) {
	echoTag := HandlerFunc(func(w *ResponseWriter, r *Request) {
		v, _ := r.Lookup("x-tag")
		w.Header().Set("X-Tag", string(v))
	})
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, echoTag)
		r := dialH2(t, s.Addr().String())
		tests := []struct {
			name  string
			parts int // frames the block is split over
		}{
			{"one HEADERS", 1},
			{"HEADERS and a CONTINUATION", 2},
			{"HEADERS and two CONTINUATIONs", 3},
			{"one HEADERS again", 1},
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				id := uint32(2*i + 1)
				tag := "tag-" + itoa(i%2) // every other block refers to an indexed value
				block := r.block("GET", "/", "x-tag", tag)
				size := (len(block) + tt.parts - 1) / tt.parts
				var out []byte
				for k := 0; k < tt.parts; k++ {
					frag := block[min(k*size, len(block)):min((k+1)*size, len(block))]
					h := h2.Header{Length: uint32(len(frag)), Type: h2.TypeContinuation, Stream: id}
					if k == 0 {
						h.Type, h.Flags = h2.TypeHeaders, h2.FlagEndStream
					}
					if k == tt.parts-1 {
						h.Flags |= h2.FlagEndHeaders
					}
					out = append(h2.AppendHeader(out, h), frag...)
				}
				require.NoError(t, r.write(out))
				head := r.freshHead(id)
				require.Equal(t, "200", head[":status"])
				require.Equal(t, tag, head["x-tag"])
			})
		}
	})
}
