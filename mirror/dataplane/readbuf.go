package dataplane

import (
	"context"
	"sync"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
)

// maxPooledRead is the largest partition read served from a reused buffer;
// larger ones (a partition limit above Kafka's 1 MiB default times eight)
// get fresh memory.
const maxPooledRead = 8 << 20

// readBufferPool holds read buffers of past Fetch responses. A buffer goes
// back only once the server has written (or dropped) the response whose
// record batches it holds: see readBuffers.
var readBufferPool sync.Pool // of *[]byte

// bufferReader is the optional Log method reads into a reused buffer, and
// reads that may answer nothing for a first batch larger than the limit, use
// (fetcher.FileLog.ReadBuffer).
type bufferReader interface {
	ReadBuffer(offset int64, maxBytes int, minOne bool, buf []byte) ([]byte, error)
}

// readBuffers lends pooled buffers to the partition reads of one Fetch and
// takes them back when the server is done with its response.
type readBuffers struct {
	mu   sync.Mutex
	lent []*[]byte
}

// fetchBuffers returns the read buffers of the Fetch that got ctx, released
// by the server after it wrote the response (admin.RequestContext.OnDone);
// nil when ctx comes from no admin server (Serve called directly): the
// reads then use fresh memory.
func fetchBuffers(ctx context.Context) *readBuffers {
	rc, ok := admin.RequestContextFrom(ctx)
	if !ok {
		return nil
	}
	rb := &readBuffers{}
	rc.OnDone(rb.release)
	return rb
}

// get takes a pooled buffer, nil when the pool holds none; the read that
// takes it lends it (lend) when its records are in it, or puts it back. It
// never allocates: a read into a buffer too small for it (or nil) allocates
// what it needs itself, sized to the batches there are up to the partition's
// limit (FileLog.ReadBuffer), and keep lends that memory to the pool. A
// buffer of the partition limit per partition read (1 MiB by default, for a
// batch of a hundred bytes) made one Fetch of 12,500 partitions that each
// held one record allocate 12.5 GiB on the source.
func (rb *readBuffers) get() *[]byte {
	bp, _ := readBufferPool.Get().(*[]byte)
	return bp
}

// minPooledRead is the smallest read whose fresh memory keep pools: smaller
// ones are cheaper to allocate than to hand around.
const minPooledRead = 4 << 10

// keep lends b, memory a read allocated, to the pool once the response is
// done with it, when it is worth pooling.
func (rb *readBuffers) keep(b []byte) {
	if cap(b) < minPooledRead {
		return
	}
	rb.lend(&b)
}

func (rb *readBuffers) lend(bp *[]byte) {
	rb.mu.Lock()
	rb.lent = append(rb.lent, bp)
	rb.mu.Unlock()
}

// recycle returns the buffers lent so far, held by a response the long-poll
// drops unsent, so that a long poll does not pile up one buffer per read;
// nothing may use them after. A nil rb lends nothing.
func (rb *readBuffers) recycle() {
	if rb != nil {
		rb.release()
	}
}

// release returns every lent buffer to the pool; nothing may use them after.
func (rb *readBuffers) release() {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	for _, bp := range rb.lent {
		readBufferPool.Put(bp)
	}
	rb.lent = nil
}

// pooledLog is a partition's log whose reads (those of LocalSource.Fetch)
// go into buffers lent by rb (none when rb is nil or the read is larger than
// maxPooledRead) and return nothing when minOne is false and the first batch
// is larger than the read's limit; every other method is the log's.
type pooledLog struct {
	fetcher.Log
	br     bufferReader
	rb     *readBuffers
	minOne bool
}

// Read implements fetcher.Log. Exactly one buffer per read stays lent, the
// one holding the records: a pooled buffer too small for them goes straight
// back to the pool (lent as well, it was held until the response was done,
// and a long poll's one response then lent two).
func (l pooledLog) Read(offset int64, maxBytes int) ([]byte, error) {
	if l.rb == nil || maxBytes > maxPooledRead {
		return l.br.ReadBuffer(offset, maxBytes, l.minOne, nil)
	}
	bp := l.rb.get()
	var buf []byte
	if bp != nil {
		buf = (*bp)[:0]
	}
	out, err := l.br.ReadBuffer(offset, maxBytes, l.minOne, buf)
	switch {
	case sameMemory(out, buf):
		l.rb.lend(bp)
	default:
		if bp != nil {
			readBufferPool.Put(bp)
		}
		if err == nil && len(out) > 0 {
			l.rb.keep(out) // the read did not fit buf: new memory
		}
	}
	return out, err
}

// sameMemory reports whether out starts in buf's memory.
func sameMemory(out, buf []byte) bool {
	return len(out) > 0 && cap(buf) > 0 && &out[0] == &buf[:1][0]
}

// pooled returns part with its log reading through pooledLog when the log
// can (bufferReader): into rb's buffers when rb is set, and with Kafka's
// minOneMessage as minOne says. A Fetch's partitions after the first with
// data read with minOne false, so a response budget nearly spent costs a
// batch header per partition, not a batch each that is then dropped.
func (part partition) pooled(rb *readBuffers, minOne bool) partition {
	br, ok := part.log.(bufferReader)
	if !ok {
		return part
	}
	part.log = pooledLog{Log: part.log, br: br, rb: rb, minOne: minOne}
	return part
}
