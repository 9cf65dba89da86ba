package h2

import "encoding/binary"

// A SettingID names a SETTINGS parameter (RFC 9113 §6.5.2).
type SettingID uint16

// The parameters of RFC 9113 §6.5.2 (and RFC 8441's extended CONNECT).
const (
	SettingHeaderTableSize      SettingID = 0x1
	SettingEnablePush           SettingID = 0x2
	SettingMaxConcurrentStreams SettingID = 0x3
	SettingInitialWindowSize    SettingID = 0x4
	SettingMaxFrameSize         SettingID = 0x5
	SettingMaxHeaderListSize    SettingID = 0x6
	SettingEnableConnectProto   SettingID = 0x8
)

// A Setting is one parameter of a SETTINGS frame.
type Setting struct {
	ID  SettingID
	Val uint32
}

// MaxWindow is the largest flow-control window (RFC 9113 §6.9.1).
const MaxWindow = 1<<31 - 1

// Settings are an endpoint's SETTINGS values. The zero value is not
// valid; start from DefaultSettings.
type Settings struct {
	HeaderTableSize      uint32
	EnablePush           bool
	MaxConcurrentStreams uint32 // 0 in DefaultSettings means no limit announced
	InitialWindowSize    uint32
	MaxFrameSize         uint32
	MaxHeaderListSize    uint32 // 0 means no limit announced
}

// DefaultSettings are the values a peer has before its first SETTINGS
// frame (RFC 9113 §6.5.2).
var DefaultSettings = Settings{
	HeaderTableSize:   4096,
	EnablePush:        true,
	InitialWindowSize: 65535,
	MaxFrameSize:      MinMaxFrameSize,
}

// Apply checks one received parameter and sets it (RFC 9113 §6.5.2):
// ENABLE_PUSH other than 0 or 1 and a MAX_FRAME_SIZE out of range are
// PROTOCOL_ERROR, an INITIAL_WINDOW_SIZE over 2^31-1 is
// FLOW_CONTROL_ERROR, all of the connection. Unknown parameters are
// ignored.
func (s *Settings) Apply(st Setting) error {
	switch st.ID {
	case SettingHeaderTableSize:
		s.HeaderTableSize = st.Val
	case SettingEnablePush:
		if st.Val > 1 {
			return ConnError(ProtocolError, "SETTINGS_ENABLE_PUSH not 0 or 1")
		}
		s.EnablePush = st.Val == 1
	case SettingMaxConcurrentStreams:
		s.MaxConcurrentStreams = st.Val
	case SettingInitialWindowSize:
		if st.Val > MaxWindow {
			return ConnError(FlowControlError, "SETTINGS_INITIAL_WINDOW_SIZE over 2^31-1")
		}
		s.InitialWindowSize = st.Val
	case SettingMaxFrameSize:
		if st.Val < MinMaxFrameSize || st.Val > MaxMaxFrameSize {
			return ConnError(ProtocolError, "SETTINGS_MAX_FRAME_SIZE out of range")
		}
		s.MaxFrameSize = st.Val
	case SettingMaxHeaderListSize:
		s.MaxHeaderListSize = st.Val
	}
	return nil
}

// ParseSettings checks a SETTINGS frame (RFC 9113 §6.5) and calls fn
// for each parameter in order, stopping at fn's first error. An
// acknowledgement carries none.
func ParseSettings(h Header, p []byte, fn func(Setting) error) error {
	switch {
	case h.Stream != 0:
		return ConnError(ProtocolError, "SETTINGS on a stream")
	case h.Flags.Has(FlagAck) && len(p) != 0:
		return ConnError(FrameSizeError, "SETTINGS acknowledgement with a payload")
	case len(p)%6 != 0:
		return ConnError(FrameSizeError, "SETTINGS of length "+itoa(uint32(len(p))))
	}
	for ; len(p) > 0; p = p[6:] {
		st := Setting{ID: SettingID(binary.BigEndian.Uint16(p)), Val: binary.BigEndian.Uint32(p[2:])}
		if err := fn(st); err != nil {
			return err
		}
	}
	return nil
}

// AppendSettings appends a SETTINGS frame with the parameters given.
func AppendSettings(dst []byte, params ...Setting) []byte {
	dst = AppendHeader(dst, Header{Length: uint32(6 * len(params)), Type: TypeSettings})
	for _, st := range params {
		dst = binary.BigEndian.AppendUint16(dst, uint16(st.ID))
		dst = binary.BigEndian.AppendUint32(dst, st.Val)
	}
	return dst
}

// AppendSettingsAck appends the acknowledgement of a SETTINGS frame.
func AppendSettingsAck(dst []byte) []byte {
	return AppendHeader(dst, Header{Type: TypeSettings, Flags: FlagAck})
}
