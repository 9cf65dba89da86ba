package h2

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func frame(t Type, f Flags, stream uint32, payload ...byte) []byte {
	b := AppendHeader(nil, Header{Length: uint32(len(payload)), Type: t, Flags: f, Stream: stream})
	return append(b, payload...)
}

func TestNextWaitsForWholeFrames(t *testing.T) {
	f := frame(TypePing, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8)
	for i := 0; i < len(f); i++ {
		_, _, n, err := Next(f[:i], MinMaxFrameSize)
		require.NoError(t, err)
		require.Zero(t, n, "a frame cut after %d bytes is not complete", i)
	}
	h, p, n, err := Next(append(f, 0xff), MinMaxFrameSize)
	require.NoError(t, err)
	require.Equal(t, len(f), n)
	require.Equal(t, Header{Length: 8, Type: TypePing, Stream: 0}, h)
	require.Equal(t, []byte{1, 2, 3, 4, 5, 6, 7, 8}, p)
}

func TestNextRefusesOversizedFrameFromItsHeader(t *testing.T) {
	// Only the header has arrived: the size is refused before the payload.
	hdr := AppendHeader(nil, Header{Length: MinMaxFrameSize + 1, Type: TypeData, Stream: 1})
	_, _, n, err := Next(hdr, MinMaxFrameSize)
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, FrameSizeError, e.Code)
	require.Zero(t, e.Stream)
	require.Zero(t, n)
	require.ErrorIs(t, err, ErrProtocol)
}

func TestHeaderIgnoresReservedBit(t *testing.T) {
	b := frame(TypeData, 0, 3)
	b[5] |= 0x80
	require.Equal(t, uint32(3), ParseHeader(b).Stream)
}

// Each rule of RFC 9113 §6 that a peer can break, with the error the RFC
// names and whether it is the connection's or the stream's.
func TestFrameRules(t *testing.T) {
	conn, stream := uint32(0), uint32(1)
	cases := []struct {
		name  string
		frame []byte
		code  ErrCode
		scope uint32 // 0: connection error; else that stream
	}{
		{"DATA on stream 0", frame(TypeData, 0, 0, 'x'), ProtocolError, conn},
		{"DATA padding too long", frame(TypeData, FlagPadded, 1, 2, 'x'), ProtocolError, conn},
		{"DATA padded without pad length", frame(TypeData, FlagPadded, 1), FrameSizeError, conn},
		{"HEADERS on stream 0", frame(TypeHeaders, FlagEndHeaders, 0), ProtocolError, conn},
		{"HEADERS padding too long", frame(TypeHeaders, FlagPadded|FlagEndHeaders, 1, 5, 1, 2), ProtocolError, conn},
		{"HEADERS depends on itself", frame(TypeHeaders, FlagPriority|FlagEndHeaders, 1, 0, 0, 0, 1, 16), ProtocolError, stream},
		{"HEADERS priority truncated", frame(TypeHeaders, FlagPriority|FlagEndHeaders, 1, 0, 0), FrameSizeError, conn},
		{"PRIORITY on stream 0", frame(TypePriority, 0, 0, 0, 0, 0, 3, 16), ProtocolError, conn},
		{"PRIORITY wrong length", frame(TypePriority, 0, 1, 0, 0, 0, 3), FrameSizeError, stream},
		{"PRIORITY depends on itself", frame(TypePriority, 0, 1, 0, 0, 0, 1, 16), ProtocolError, stream},
		{"RST_STREAM on stream 0", frame(TypeRSTStream, 0, 0, 0, 0, 0, 8), ProtocolError, conn},
		{"RST_STREAM wrong length", frame(TypeRSTStream, 0, 1, 0, 0, 8), FrameSizeError, conn},
		{"SETTINGS on a stream", frame(TypeSettings, 0, 1), ProtocolError, conn},
		{"SETTINGS ack with payload", frame(TypeSettings, FlagAck, 0, 0, 1, 0, 0, 0, 1), FrameSizeError, conn},
		{"SETTINGS not a multiple of 6", frame(TypeSettings, 0, 0, 0, 1, 0), FrameSizeError, conn},
		{"SETTINGS_ENABLE_PUSH 2", frame(TypeSettings, 0, 0, 0, 2, 0, 0, 0, 2), ProtocolError, conn},
		{"SETTINGS_INITIAL_WINDOW_SIZE 2^31", frame(TypeSettings, 0, 0, 0, 4, 0x80, 0, 0, 0), FlowControlError, conn},
		{"SETTINGS_MAX_FRAME_SIZE too small", frame(TypeSettings, 0, 0, 0, 5, 0, 0, 0x3f, 0xff), ProtocolError, conn},
		{"SETTINGS_MAX_FRAME_SIZE too large", frame(TypeSettings, 0, 0, 0, 5, 1, 0, 0, 0), ProtocolError, conn},
		{"PING on a stream", frame(TypePing, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0), ProtocolError, conn},
		{"PING wrong length", frame(TypePing, 0, 0, 0, 0, 0, 0, 0, 0), FrameSizeError, conn},
		{"GOAWAY on a stream", frame(TypeGoAway, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0), ProtocolError, conn},
		{"GOAWAY too short", frame(TypeGoAway, 0, 0, 0, 0, 0, 0), FrameSizeError, conn},
		{"WINDOW_UPDATE wrong length", frame(TypeWindowUpdate, 0, 1, 0, 0, 1), FrameSizeError, conn},
		{"WINDOW_UPDATE 0 on the connection", frame(TypeWindowUpdate, 0, 0, 0, 0, 0, 0), ProtocolError, conn},
		{"WINDOW_UPDATE 0 on a stream", frame(TypeWindowUpdate, 0, 1, 0, 0, 0, 0), ProtocolError, stream},
		{"CONTINUATION on stream 0", frame(TypeContinuation, FlagEndHeaders, 0), ProtocolError, conn},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, p, n, err := Next(tc.frame, MinMaxFrameSize)
			require.NoError(t, err)
			require.Equal(t, len(tc.frame), n)
			err = check(h, p)
			var e *Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, tc.code, e.Code, "%v", err)
			require.Equal(t, tc.scope, e.Stream, "%v", err)
		})
	}
}

// check runs the parser of h's type, as a server does.
func check(h Header, p []byte) error {
	var err error
	switch h.Type {
	case TypeData:
		_, err = ParseData(h, p)
	case TypeHeaders:
		_, err = ParseHeaders(h, p)
	case TypePriority:
		_, err = ParsePriority(h, p)
	case TypeRSTStream:
		_, err = ParseRSTStream(h, p)
	case TypeSettings:
		s := DefaultSettings
		err = ParseSettings(h, p, s.Apply)
	case TypePing:
		_, err = ParsePing(h, p)
	case TypeGoAway:
		_, _, _, err = ParseGoAway(h, p)
	case TypeWindowUpdate:
		_, err = ParseWindowUpdate(h, p)
	case TypeContinuation:
		_, err = ParseContinuation(h, p)
	}
	return err
}

func TestPaddingAndPriorityRemoved(t *testing.T) {
	data, err := ParseData(Header{Type: TypeData, Flags: FlagPadded, Stream: 1}, []byte{2, 'h', 'i', 0, 0})
	require.NoError(t, err)
	require.Equal(t, "hi", string(data))
	// A pad as long as the rest is allowed: empty data.
	data, err = ParseData(Header{Type: TypeData, Flags: FlagPadded, Stream: 1}, []byte{2, 0, 0})
	require.NoError(t, err)
	require.Empty(t, data)
	block, err := ParseHeaders(Header{Type: TypeHeaders, Flags: FlagPadded | FlagPriority, Stream: 3},
		[]byte{1, 0x80, 0, 0, 1, 200, 0x82, 0})
	require.NoError(t, err)
	require.Equal(t, []byte{0x82}, block)
}

// Frames appended here read back the same through Next and the parsers;
// a header block longer than a frame is split into HEADERS and
// CONTINUATION frames that join back to it.
func TestAppendedFramesReadBack(t *testing.T) {
	var b []byte
	b = AppendSettings(b, Setting{SettingMaxConcurrentStreams, 250}, Setting{SettingInitialWindowSize, 1 << 20})
	b = AppendSettingsAck(b)
	big := bytes.Repeat([]byte{0x82}, 40000)
	b = AppendHeaders(b, 1, true, big, MinMaxFrameSize)
	b = AppendData(b, 1, true, []byte("hello"))
	b = AppendWindowUpdate(b, 0, 1000)
	b = AppendRSTStream(b, 3, Cancel)
	b = AppendPing(b, true, [8]byte{1, 2, 3, 4, 5, 6, 7, 8})
	b = AppendGoAway(b, 5, EnhanceYourCalm, []byte("bye"))

	next := func() (Header, []byte) {
		t.Helper()
		h, p, n, err := Next(b, MinMaxFrameSize)
		require.NoError(t, err)
		require.NotZero(t, n)
		b = b[n:]
		return h, p
	}
	s := DefaultSettings
	h, p := next()
	require.NoError(t, ParseSettings(h, p, s.Apply))
	require.Equal(t, uint32(250), s.MaxConcurrentStreams)
	require.Equal(t, uint32(1<<20), s.InitialWindowSize)
	h, p = next()
	require.True(t, h.Type == TypeSettings && h.Flags.Has(FlagAck) && len(p) == 0)

	h, p = next()
	require.Equal(t, TypeHeaders, h.Type)
	require.True(t, h.Flags.Has(FlagEndStream))
	require.False(t, h.Flags.Has(FlagEndHeaders))
	got, err := ParseHeaders(h, p)
	require.NoError(t, err)
	got = bytes.Clone(got)
	for frames := 1; ; frames++ {
		h, p = next()
		require.Equal(t, TypeContinuation, h.Type)
		require.Equal(t, uint32(1), h.Stream)
		frag, err := ParseContinuation(h, p)
		require.NoError(t, err)
		got = append(got, frag...)
		if h.Flags.Has(FlagEndHeaders) {
			require.Equal(t, 2, frames, "40,000 bytes: a HEADERS and two CONTINUATIONs of at most 16,384")
			break
		}
	}
	require.Equal(t, big, got)

	h, p = next()
	data, err := ParseData(h, p)
	require.NoError(t, err)
	require.Equal(t, "hello", string(data))
	require.True(t, h.Flags.Has(FlagEndStream))
	h, p = next()
	inc, err := ParseWindowUpdate(h, p)
	require.NoError(t, err)
	require.Equal(t, uint32(1000), inc)
	h, p = next()
	code, err := ParseRSTStream(h, p)
	require.NoError(t, err)
	require.Equal(t, Cancel, code)
	require.Equal(t, uint32(3), h.Stream)
	h, p = next()
	ping, err := ParsePing(h, p)
	require.NoError(t, err)
	require.True(t, h.Flags.Has(FlagAck))
	require.Equal(t, [8]byte{1, 2, 3, 4, 5, 6, 7, 8}, ping)
	h, p = next()
	last, code, debug, err := ParseGoAway(h, p)
	require.NoError(t, err)
	require.Equal(t, uint32(5), last)
	require.Equal(t, EnhanceYourCalm, code)
	require.Equal(t, "bye", string(debug))
	require.Empty(t, b)
}

func TestWindow(t *testing.T) {
	w := Window(65535)
	require.NoError(t, w.Take(1, 65535))
	require.Equal(t, 0, w.Avail())
	var e *Error
	require.ErrorAs(t, w.Take(1, 1), &e)
	require.Equal(t, FlowControlError, e.Code)
	require.Equal(t, uint32(1), e.Stream)
	require.NoError(t, w.Add(1, MaxWindow))
	require.ErrorAs(t, w.Add(0, 1), &e)
	require.Zero(t, e.Stream)
	// A lower initial window takes a send window below zero.
	w = 10
	require.NoError(t, w.Add(1, -100))
	require.Equal(t, 0, w.Avail())
	require.Equal(t, Window(-90), w)
}

func TestErrorText(t *testing.T) {
	require.Equal(t, "h2: connection error FRAME_SIZE_ERROR: x", ConnError(FrameSizeError, "x").Error())
	require.Equal(t, "h2: stream 3 error CANCEL: y", StreamError(3, Cancel, "y").Error())
	require.Equal(t, "unknown error code 0xff", ErrCode(0xff).String())
	require.True(t, errors.Is(StreamError(1, Cancel, ""), ErrProtocol))
}

// FuzzNext: any input either waits for more, is refused with an *Error,
// or yields frames whose parsers return a value or an *Error, never a
// panic; a frame's header appended again reads back the same.
func FuzzNext(f *testing.F) {
	f.Add(frame(TypeHeaders, FlagPadded|FlagPriority|FlagEndHeaders, 1, 1, 0, 0, 0, 3, 7, 0x82, 0))
	f.Add(frame(TypeSettings, 0, 0, 0, 4, 0x7f, 0xff, 0xff, 0xff))
	f.Add(frame(TypeData, FlagPadded, 1, 0))
	f.Add([]byte(ClientPreface))
	f.Fuzz(func(t *testing.T, in []byte) {
		for len(in) > 0 {
			h, p, n, err := Next(in, MinMaxFrameSize)
			if err != nil {
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("Next: %v is not an *Error", err)
				}
				return
			}
			if n == 0 {
				return
			}
			if got := ParseHeader(AppendHeader(nil, h)); got != h {
				t.Fatalf("header %+v reads back as %+v", h, got)
			}
			if err := check(h, p); err != nil {
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("%v: %v is not an *Error", h.Type, err)
				}
			}
			in = in[n:]
		}
	})
}
