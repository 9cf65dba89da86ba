// Package interop checks veloq's websocket package against real clients:
// gorilla/websocket and gobwas/ws. It is a module of its own so that
// neither enters veloq's go.mod; CI runs its tests.
package interop
