package main

import (
	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/websocket"
)

// wsEcho sends every message back with its type. The message is a view
// of the loop's input; WriteMessage copies it into the output.
var wsEcho = &websocket.HandlerFuncs{
	Message: func(c *websocket.Conn, typ websocket.MessageType, data []byte) {
		c.WriteMessage(typ, data)
	},
}

// wsHandler upgrades any request that asks for an upgrade, on any path,
// to a WebSocket echo; every other request gets HTTP mode's answers
// (GET / says hello).
func wsHandler(u *websocket.Upgrader) vhttp.HandlerFunc {
	return func(w *vhttp.ResponseWriter, r *vhttp.Request) {
		if _, ok := r.Lookup("Upgrade"); ok {
			u.Upgrade(w, r, wsEcho) // a bad handshake is answered there
			return
		}
		httpHandler(w, r)
	}
}
