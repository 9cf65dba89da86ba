// Package interop checks veloq's websocket package against real clients:
// gorilla/websocket and gobwas/ws. It is a package of the interop module,
// so that neither enters veloq's go.mod; CI runs its tests.
package interop
