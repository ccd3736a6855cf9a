package admin_test

import (
	"errors"
	"fmt"

	"github.com/kmirror/kmirror/admin"
)

func ExampleCode_Err() {
	err := fmt.Errorf("write state: %w", admin.NewError(admin.CodeFencedLeaderEpoch, "stored 7, request 6"))
	fmt.Println(errors.Is(err, admin.CodeFencedLeaderEpoch.Err()))
	fmt.Println(admin.CodeOf(err), admin.CodeOf(err).Retriable())
	fmt.Println(err)
	// Output:
	// true
	// FENCED_LEADER_EPOCH true
	// write state: admin: FENCED_LEADER_EPOCH (74): stored 7, request 6
}

func ExampleStartMirrorTopicsRequest_AppendTo() {
	req := admin.NewStartMirrorTopicsRequest()
	req.MirrorName = "m"
	req.ExcludePatterns = []string{"b"} // tagged field 0
	fmt.Printf("% x\n", req.AppendTo(nil))
	var back admin.StartMirrorTopicsRequest
	fmt.Println(back.ReadFrom(req.AppendTo(nil)), back.ExcludePatterns, back.TimeoutMs)
	// Output:
	// 02 6d 01 01 00 00 ea 60 01 00 03 02 02 62
	// <nil> [b] 60000
}
