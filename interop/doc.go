// Package interop tests veloq against third-party libraries that must work
// with it unchanged (WebSocket servers upgrading through FromStd's
// net/http.Hijacker). It is a module of its own so that those libraries
// never enter veloq's go.mod; CI runs its tests.
package interop
