package http

// h2Streams is a connection's open streams. A slice searched in order,
// not a map: a connection has a few open streams at a time (at most
// h2MaxStreams), and an idle one has none, so it keeps nothing but a
// small array where a map would keep its table (about 190 bytes) for the
// life of the connection.
type h2Streams []h2Entry

type h2Entry struct {
	id uint32
	st *h2Stream
}

// get returns the open stream id, or nil.
func (s h2Streams) get(id uint32) *h2Stream {
	for i := range s {
		if s[i].id == id {
			return s[i].st
		}
	}
	return nil
}

// add records st as open.
func (s *h2Streams) add(st *h2Stream) { *s = append(*s, h2Entry{st.id, st}) }

// remove forgets stream id. The order of the others is kept, so that a
// walk from the end (each) sees every stream once however many close on
// the way. With none left, an array grown by a burst of streams goes.
func (s *h2Streams) remove(id uint32) {
	t := *s
	for i := range t {
		if t[i].id == id {
			copy(t[i:], t[i+1:])
			t[len(t)-1] = h2Entry{}
			t = t[:len(t)-1]
			break
		}
	}
	if len(t) == 0 && cap(t) > 4 {
		t = nil
	}
	*s = t
}

// each calls f for every open stream, newest first. f may close streams,
// its own or others: walking from the end, a removal only moves streams
// already seen, so none is missed (one may come twice, which the
// callers' closed checks make harmless).
func (s *h2Streams) each(f func(st *h2Stream)) {
	for i := len(*s) - 1; i >= 0; i-- {
		if i >= len(*s) {
			i = len(*s)
			continue
		}
		f((*s)[i].st)
	}
}
