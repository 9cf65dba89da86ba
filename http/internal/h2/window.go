package h2

// A Window is a flow-control window (RFC 9113 §5.2, §6.9): what may be
// sent (or is still allowed to arrive) on a stream or the connection. A
// send window can go below zero when the peer lowers
// SETTINGS_INITIAL_WINDOW_SIZE (§6.9.2); it is kept as int64 so that no
// sum of valid values overflows.
type Window int64

// Add grows w by inc, a WINDOW_UPDATE's increment or the change of
// SETTINGS_INITIAL_WINDOW_SIZE. A window over 2^31-1 is a
// FLOW_CONTROL_ERROR of the stream (id > 0) or of the connection (id 0).
func (w *Window) Add(id uint32, inc int64) error {
	n := int64(*w) + inc
	if n > MaxWindow {
		if id == 0 {
			return ConnError(FlowControlError, "connection window over 2^31-1")
		}
		return StreamError(id, FlowControlError, "stream window over 2^31-1")
	}
	*w = Window(n)
	return nil
}

// Take removes n received bytes from a receive window: more than the
// window allows is a FLOW_CONTROL_ERROR of the connection (id 0) or the
// stream.
func (w *Window) Take(id uint32, n int) error {
	if int64(n) > int64(*w) {
		if id == 0 {
			return ConnError(FlowControlError, "DATA beyond the connection window")
		}
		return StreamError(id, FlowControlError, "DATA beyond the stream window")
	}
	*w -= Window(n)
	return nil
}

// Avail is how many bytes may be sent now: the window, or 0 if it is
// not positive.
func (w Window) Avail() int {
	if w <= 0 {
		return 0
	}
	return int(w)
}
