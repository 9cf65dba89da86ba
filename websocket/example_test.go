package websocket_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"strings"
	"time"

	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/websocket"
)

// An echo server: every message comes back with its type. The client
// half uses the package's codec to speak the protocol by hand.
func Example() {
	u := websocket.NewUpgrader()
	echo := &websocket.HandlerFuncs{
		Message: func(c *websocket.Conn, typ websocket.MessageType, data []byte) {
			c.WriteMessage(typ, data) // data is a view: WriteMessage copies it out
		},
	}
	srv := vhttp.NewServer(vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
		if string(r.Path) == "/ws" {
			u.Upgrade(w, r, echo)
			return
		}
		w.WriteString("Hello, World!")
	}), vhttp.WithLoops(1))
	if _, err := srv.Listen("tcp", "127.0.0.1:0"); err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown(context.Background())

	conn, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	key := "dGhlIHNhbXBsZSBub25jZQ=="
	fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n\r\n", key)
	br := bufio.NewReader(conn)
	status, _ := br.ReadString('\n')
	fmt.Println(strings.TrimSpace(status))
	for line, _ := br.ReadString('\n'); line != "\r\n"; line, _ = br.ReadString('\n') {
		if strings.HasPrefix(line, "Sec-WebSocket-Accept:") {
			fmt.Println("accept ok:", strings.TrimSpace(line[len("Sec-WebSocket-Accept:"):]) == websocket.AcceptKey(key))
		}
	}

	// A client frame must be masked.
	msg := []byte("hello")
	h := websocket.Header{Fin: true, Opcode: websocket.OpText, Masked: true, Mask: [4]byte{1, 2, 3, 4}, Length: int64(len(msg))}
	frame := websocket.AppendHeader(nil, &h)
	frame = append(frame, msg...)
	websocket.MaskBytes(h.Mask, 0, frame[len(frame)-len(msg):])
	conn.Write(frame)

	d := websocket.Decoder{FromServer: true}
	var buf []byte
	for {
		var tmp [512]byte
		n, err := br.Read(tmp[:])
		if err != nil {
			log.Fatal(err)
		}
		buf = append(buf, tmp[:n]...)
		ch, _, err := d.Next(buf)
		if err == websocket.ErrNeedMore {
			continue
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %s\n", ch.Opcode, ch.Payload)
		break
	}
	// Output:
	// HTTP/1.1 101 Switching Protocols
	// accept ok: true
	// text: hello
}

// The Decoder on its own: frames in, chunks out, protocol errors as
// close codes.
func ExampleDecoder() {
	var d websocket.Decoder // decodes client frames: they must be masked
	unmasked := []byte{0x81, 0x02, 'h', 'i'}
	_, _, err := d.Next(unmasked)
	var pe *websocket.ProtocolError
	if errors.As(err, &pe) {
		fmt.Println(pe.Code, pe.Reason)
	}

	// After an error a Decoder is done, like its connection; a new one:
	var d2 websocket.Decoder
	masked := []byte{0x81, 0x82, 1, 2, 3, 4, 'h' ^ 1, 'i' ^ 2}
	ch, n, err := d2.Next(masked)
	fmt.Println(ch.Opcode, string(ch.Payload), n, err)
	// Output:
	// 1002 unmasked frame from a client
	// text hi 8 <nil>
}

// A chat room: members join in OnOpen, leave in OnClose, and any message
// is broadcast to all of them, across loops, encoded once.
func ExampleGroup() {
	room := websocket.NewGroup()
	chat := &websocket.HandlerFuncs{
		Open:  room.Add,
		Close: func(c *websocket.Conn, err error) { room.Remove(c) },
		Message: func(c *websocket.Conn, typ websocket.MessageType, data []byte) {
			room.Broadcast(typ, data) // encodes data into a frame: the view may go
		},
	}
	u := websocket.NewUpgrader(websocket.WithPing(30*time.Second, 10*time.Second))
	srv := vhttp.NewServer(vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
		u.Upgrade(w, r, chat)
	}))
	_ = srv // srv.Listen("tcp", ":8080")
}
