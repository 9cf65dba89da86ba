//go:build linux

package net

import "time"

// activity counts, for a backend's batched waits (Config.BatchWait), the
// inputs reported since the last wait and the distinct connections that
// sent input per activity epoch. Each connection record keeps the epoch of
// its last input (a uint8 that wraps: a connection silent for exactly 256
// epochs is missed once, which only makes one batch decision smaller).
type activity struct {
	wait     time.Duration // Config.BatchWait; 0: no batching
	least    uint32        // the smallest batch worth waiting for
	inputs   uint32        // inputs since the last wait
	epoch    uint8
	epochEnd time.Duration // since start
	seen     uint32        // connections with input in this epoch
	active   uint32        // ... in the last complete one
	start    time.Time
	peers    [peerMarks]uint8 // epoch marks of datagram senders (packetInput)
}

// peerMarks is how many senders' epoch marks the datagram sockets of a
// loop keep. A sender has no record of its own to keep a mark in, so a
// hash of its address picks one: senders that share a mark count as one,
// which makes a batch smaller, never larger.
const peerMarks = 1024

// activityEpoch is the least window over which a backend counts the
// connections that sent input.
const activityEpoch = time.Millisecond

// batchShare: a batched wait asks for at most one event per batchShare
// recently active connections.
const batchShare = 4

func (a *activity) enable(wait time.Duration, least uint32) {
	a.wait, a.least, a.start, a.epoch = wait, least, time.Now(), 1
}

// input notes one input on the connection whose record holds connEpoch.
func (a *activity) input(connEpoch *uint8) {
	a.inputs++
	if *connEpoch != a.epoch {
		*connEpoch = a.epoch
		a.seen++
	}
}

// packetInput notes one datagram from the sender whose address the
// kernel wrote in name (see peerMarks).
func (a *activity) packetInput(name []byte) {
	// FNV-1a over the address (and port): tens of bytes at most; a
	// unixgram path longer than that shares marks by its prefix.
	h := uint32(2166136261)
	for _, c := range name[:min(len(name), 32)] {
		h = (h ^ uint32(c)) * 16777619
	}
	a.input(&a.peers[h%peerMarks])
}

// share is how many events a batched wait may gather now: one per
// batchShare connections that sent input in the last complete epoch, or
// 0 when that is fewer than least. An epoch lasts at least activityEpoch
// and ends at the first call after that.
func (a *activity) share() uint32 {
	if now := time.Since(a.start); now >= a.epochEnd {
		a.active, a.seen = a.seen, 0
		a.epoch++
		a.epochEnd = now + activityEpoch
	}
	if n := a.active / batchShare; n >= a.least {
		return n
	}
	return 0
}
