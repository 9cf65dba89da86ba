package http_test

import (
	"context"
	"fmt"
	"io"
	nethttp "net/http"
	"os"
	"path/filepath"

	vhttp "github.com/veloq/veloq/http"
)

// FileServer serves a directory: whole files, ranges and conditional
// requests, with the body sent from the page cache to the socket.
// StripPrefix mounts it under a path of a Router.
func ExampleFileServer() {
	dir, err := os.MkdirTemp("", "veloq-static")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello, static world\n"), 0o644)

	mux := vhttp.NewRouter()
	mux.Handle("GET /static/", vhttp.StripPrefix("/static", vhttp.FileServer(dir)))
	s, err := vhttp.NewServer(mux)
	if err != nil {
		panic(err)
	}
	addr, err := s.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer s.Shutdown(context.Background())

	req, _ := nethttp.NewRequest("GET", "http://"+addr.String()+"/static/hello.txt", nil)
	req.Header.Set("Range", "bytes=7-12")
	resp, err := nethttp.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.Status, resp.Header.Get("Content-Range"), resp.Header.Get("Content-Type"))
	fmt.Printf("%q\n", body)
	// Output:
	// 206 Partial Content bytes 7-12/20 text/plain; charset=utf-8
	// "static"
}

// ServeFile answers with one named file from any handler, here chosen
// by a query parameter among a fixed set.
func ExampleServeFile() {
	dir, err := os.MkdirTemp("", "veloq-static")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "report.json"), []byte(`{"a":1}`), 0o644)

	s, err := vhttp.NewServer(vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
		if name, _ := r.QueryValue("name"); string(name) != "report" {
			w.WriteHeader(vhttp.StatusNotFound)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		vhttp.ServeFile(w, r, filepath.Join(dir, "report.json"))
	}))
	if err != nil {
		panic(err)
	}
	addr, err := s.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer s.Shutdown(context.Background())

	resp, err := nethttp.Get("http://" + addr.String() + "/download?name=report")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.Status, resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"))
	fmt.Printf("%q\n", body)
	// Output:
	// 200 OK application/json no-cache
	// "{\"a\":1}"
}
