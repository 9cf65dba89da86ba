package bufpool

import "github.com/valyala/bytebufferpool"

// GetOutput returns an empty ByteBuffer for assembling output, such as an
// HTTP response whose size is not known in advance. Return it with
// [PutOutput] once its bytes have been written out.
//
// The buffers come from bytebufferpool's process-wide default pool, which
// calibrates itself to the sizes in use and caps what it retains so that
// an occasional huge response does not pin memory. Sharing that pool is
// deliberate: output sizes are a property of the application, not of a
// reactor, and bufpool itself keeps no global state.
func GetOutput() *bytebufferpool.ByteBuffer { return bytebufferpool.Get() }

// PutOutput returns b to the pool. b must not be used afterwards. A nil b
// is ignored.
func PutOutput(b *bytebufferpool.ByteBuffer) {
	if b != nil {
		bytebufferpool.Put(b)
	}
}
