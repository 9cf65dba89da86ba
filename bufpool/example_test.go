package bufpool_test

import (
	"fmt"

	"github.com/veloq/veloq/bufpool"
)

func Example() {
	// One shared pool per process, one cache per reactor.
	shared := bufpool.NewPool()
	cache := bufpool.NewCache(shared, 32)

	buf := cache.Get(1500) // e.g. a read buffer
	fmt.Println(len(buf), cap(buf), bufpool.ClassOf(1500))
	n := copy(buf, "hello")
	fmt.Printf("%s\n", buf[:n])
	cache.Put(buf)

	again := cache.Get(2000) // same class: the cached buffer comes back
	fmt.Println(len(again), cap(again), cache.Stats().Hits)
	cache.Put(again)

	// Output assembly.
	out := bufpool.GetOutput()
	out.WriteString("HTTP/1.1 200 OK\n")
	fmt.Print(out.String())
	bufpool.PutOutput(out)

	// Memory for the kernel to write into.
	arena, err := bufpool.NewArena(4096, 8)
	if err != nil {
		panic(err)
	}
	defer arena.Close()
	fmt.Println(arena.Count(), len(arena.Buf(7)))
	// Output:
	// 1500 2048 2
	// hello
	// 2000 2048 1
	// HTTP/1.1 200 OK
	// 8 4096
}
