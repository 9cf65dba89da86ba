// Package interop tests veloq against third-party libraries and clients
// that must work with it unchanged: WebSocket servers upgrading through
// FromStd's net/http.Hijacker, and over HTTP/2 grpc-go mounted through
// FromStd, curl, nghttp and the h2spec conformance suite. It is a module
// of its own so that those libraries never enter veloq's go.mod; CI runs
// its tests.
package interop
