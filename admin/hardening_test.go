package admin

import (
	"encoding/binary"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFileDescriptorExhaustion (Bar): a server child limited to 128 file
// descriptors runs out of them under idle connections, reports EMFILE, and
// answers ApiVersions again once those connections are closed.
func TestFileDescriptorExhaustion(t *testing.T) {
	c := startServerChild(t, childNoFileEnv+"=128")
	var idle []net.Conn
	defer func() {
		for _, ic := range idle {
			_ = ic.Close()
		}
	}()
	// 200 connections: the kernel completes them from the listen backlog
	// even when the server can no longer accept.
	for range 200 {
		ic, err := net.DialTimeout("tcp", c.addr, 5*time.Second)
		require.NoError(t, err)
		idle = append(idle, ic)
	}
	line := c.next("err admin: accept")
	require.Contains(t, line, "too many open files", "the child must have run out of descriptors")
	for _, ic := range idle {
		require.NoError(t, ic.Close())
	}
	idle = nil
	rc := dialRaw(t, c.addr)
	resp := rc.roundTrip(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
	require.Zero(t, resp.ErrorCode)
	require.NotEmpty(t, resp.ApiKeys)
	_ = rc.c.Close()
	c.stop()
}

// rssBound is the documented bound on the server's peak RSS under ten
// concurrent 64 MiB amplification frames (docs/DESIGN.md, admin server).
const rssBound = 1 << 30

// rssLimit is rssBound, times 5 in race builds (the lower end of the 5-10x Go documents) (the detector's shadow memory
// and its allocation overhead are not the server's).
func rssLimit() int64 {
	if raceBuild {
		return 5 * rssBound
	}
	return rssBound
}

// TestPeakRSSUnderAmplification (Bar): ten connections send a 60 MiB
// ListClusterMirrors frame each at once (a mirror RPC frame may charge half
// of MaxRequestCharge: 64 MiB by default), half of them 60 Mi empty strings
// (refused by the element limit before allocating), half 1 Mi strings of 59
// bytes (decoded: the most the limit lets through); every one is answered and
// the child's peak RSS stays under rssBound.
func TestPeakRSSUnderAmplification(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 600 MiB")
	}
	c := startServerChild(t)
	frames := [][]byte{
		emptyStringsFrame(1, 60<<20, 0),
		emptyStringsFrame(2, DefaultMaxDecodedElements, 59),
	}
	var wg sync.WaitGroup
	codes := make([]int16, 10)
	errs := make([]error, 10)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], errs[i] = sendListFrame(c.addr, frames[i%2])
		}()
	}
	wg.Wait()
	for i := range 10 {
		require.NoError(t, errs[i], "frame %d", i)
	}
	for i := 0; i < 10; i += 2 {
		require.Equal(t, int16(CodeInvalidRequest), codes[i], "64 Mi elements exceed the element limit")
		require.Zero(t, codes[i+1], "1 Mi elements are within the limit")
	}
	hwm, lines := c.stop()
	t.Logf("peak RSS of the server child: %.0f MiB (bound %d MiB)", float64(hwm)/(1<<20), rssLimit()>>20)
	for _, l := range lines {
		require.False(t, strings.Contains(l, "panic"), l)
	}
	require.Less(t, hwm, rssLimit())
}

// sendListFrame writes frame on a new connection and returns the ErrorCode of
// the ListClusterMirrors answer.
func sendListFrame(addr string, frame []byte) (int16, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	rc := &rawConn{c: conn}
	if _, err := conn.Write(frame); err != nil {
		return 0, err
	}
	if err := conn.SetReadDeadline(time.Now().Add(2 * time.Minute)); err != nil {
		return 0, err
	}
	out, err := rc.readFrameNoDeadline()
	if err != nil {
		return 0, err
	}
	r := kbin.Reader{Src: out}
	r.Int32()
	kmsg.SkipTags(&r)
	resp := NewPtrListClusterMirrorsResponse()
	if err := resp.ReadFrom(r.Src); err != nil {
		return 0, err
	}
	return resp.ErrorCode, nil
}

// emptyTopicsFetchFrame is a Fetch v12 request frame of size bytes (size
// prefix excluded) whose topics are all empty: 3 bytes each, the shape kmsg
// decodes to 21 times its size.
func emptyTopicsFetchFrame(corr int32, size int) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0)
	b = kbin.AppendInt16(b, 1)
	b = kbin.AppendInt16(b, 12)
	b = kbin.AppendInt32(b, corr)
	b = kbin.AppendNullableString(b, nil)
	b = append(b, 0) // header tags
	b = kbin.AppendInt32(b, -1)
	b = kbin.AppendInt32(b, 500)
	b = kbin.AppendInt32(b, 1)
	b = kbin.AppendInt32(b, 1<<20)
	b = append(b, 0)
	b = kbin.AppendInt32(b, 0)
	b = kbin.AppendInt32(b, -1)
	n := (size - (len(b) - 4) - 8) / 3
	b = kbin.AppendUvarint(b, uint32(n+1))
	for range n {
		b = append(b, 1, 1, 0) // empty name, no partitions, no tags
	}
	b = append(b, 1, 1, 0) // no forgotten topics, empty rack, no tags
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// TestPeakRSSUnderExtraAmplification: the same bound for an Extra key
// decoded by kmsg, which has no element limit of its own: ten connections
// send a Fetch of empty topics at once, half of them 8 MiB (2.8 Mi elements:
// closed by the pre-scan before kmsg decodes them), half 2.5 MiB (873 Ki
// elements: decoded under their scanned charge and answered); the peak RSS
// stays under rssBound.
func TestPeakRSSUnderExtraAmplification(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 52 MiB that decode to 1 GiB unbounded")
	}
	c := startServerChild(t, childExtraEnv+"=1")
	frames := [][]byte{emptyTopicsFetchFrame(1, 8<<20), emptyTopicsFetchFrame(1, 5<<19)}
	var wg sync.WaitGroup
	errs := make([]error, 10)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = sendFrameReadAnswer(c.addr, frames[i%2])
		}()
	}
	wg.Wait()
	for i := range 10 {
		if i%2 == 0 {
			require.Error(t, errs[i], "frame %d: over the element limit, closed", i)
		} else {
			require.NoError(t, errs[i], "frame %d", i)
		}
	}
	hwm, lines := c.stop()
	refused := 0
	for _, l := range lines {
		if strings.Contains(l, "refused before decoding") && strings.Contains(l, "array elements") {
			refused++
		}
	}
	require.Equal(t, 5, refused, "every refusal is reported: %q", lines)
	t.Logf("peak RSS of the server child: %.0f MiB (bound %d MiB)", float64(hwm)/(1<<20), rssLimit()>>20)
	require.Less(t, hwm, rssLimit())
}

// sendFrameReadAnswer writes frame on a new connection and reads one answer.
func sendFrameReadAnswer(addr string, frame []byte) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.Write(frame); err != nil {
		return err
	}
	if err := conn.SetReadDeadline(time.Now().Add(2 * time.Minute)); err != nil {
		return err
	}
	_, err = (&rawConn{c: conn}).readFrameNoDeadline()
	return err
}
