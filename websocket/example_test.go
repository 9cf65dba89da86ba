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
	vnet "github.com/veloq/veloq/net"
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
	srv, err := vhttp.NewServer(vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
		if string(r.Path) == "/ws" {
			u.Upgrade(w, r, echo)
			return
		}
		w.WriteString("Hello, World!")
	}), vhttp.WithNetOptions(vnet.WithLoops(1)))
	if err != nil {
		panic(err)
	}
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
	srv, err := vhttp.NewServer(vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
		u.Upgrade(w, r, chat)
	}), vhttp.WithNetOptions(vnet.WithLoops(2)))
	if err != nil {
		panic(err)
	}
	if _, err := srv.Listen("tcp", "127.0.0.1:0"); err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown(context.Background())

	// Two members, each a hand-made client as in Example. A member is in
	// the room once its 101 has arrived: OnOpen ran before the server
	// sent it.
	alice := joinRoom(srv.Addr().String())
	defer alice.Close()
	bob := joinRoom(srv.Addr().String())
	defer bob.Close()

	alice.say("hello, room")
	fmt.Println("alice got:", alice.hear())
	fmt.Println("bob got:", bob.hear())
	// Output:
	// alice got: hello, room
	// bob got: hello, room
}

// member is a minimal WebSocket client for ExampleGroup.
type member struct {
	net.Conn
	br  *bufio.Reader
	dec websocket.Decoder
	buf []byte
}

// joinRoom connects and completes the opening handshake.
func joinRoom(addr string) *member {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "GET /chat HTTP/1.1\r\nHost: example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
	m := &member{Conn: conn, br: bufio.NewReader(conn), dec: websocket.Decoder{FromServer: true}}
	for {
		line, err := m.br.ReadString('\n')
		if err != nil {
			log.Fatal(err)
		}
		if line == "\r\n" {
			return m
		}
	}
}

// say sends one masked text frame.
func (m *member) say(text string) {
	h := websocket.Header{Fin: true, Opcode: websocket.OpText, Masked: true, Mask: [4]byte{9, 8, 7, 6}, Length: int64(len(text))}
	frame := append(websocket.AppendHeader(nil, &h), text...)
	websocket.MaskBytes(h.Mask, 0, frame[len(frame)-len(text):])
	if _, err := m.Write(frame); err != nil {
		log.Fatal(err)
	}
}

// hear reads one whole single-frame message.
func (m *member) hear() string {
	for {
		ch, n, err := m.dec.Next(m.buf)
		if err == nil {
			text := string(ch.Payload)
			m.buf = m.buf[n:]
			return text
		}
		if err != websocket.ErrNeedMore {
			log.Fatal(err)
		}
		var tmp [512]byte
		k, err := m.br.Read(tmp[:])
		if err != nil {
			log.Fatal(err)
		}
		m.buf = append(m.buf, tmp[:k]...)
	}
}
