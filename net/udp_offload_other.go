//go:build !linux

package net

// Outside Linux there is no UDP_SEGMENT (GSO) and no UDP_GRO: every
// datagram is sent and received on its own, and no control messages are
// ever asked for or sent.
var gsoCmsgSpace, groCmsgSpace = 0, 0

// putSegmentCmsg is never called: kernelOffloads reports no GSO.
func putSegmentCmsg([]byte, uint16) {}

// groSegment: no datagram is coalesced without UDP_GRO.
func groSegment([]byte, int) int { return 0 }

// kernelOffloads: neither GSO nor GRO exists outside Linux.
func kernelOffloads(int, bool) (gso, gro bool) { return false, false }
