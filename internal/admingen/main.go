package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
)

func main() {
	in := flag.String("in", "definitions", "directory of *.json message definitions")
	out := flag.String("out", "zz_generated.go", "output Go file")
	check := flag.Bool("check", false, "exit non-zero if -out is not up to date instead of writing it")
	flag.Parse()
	if err := run(*in, *out, *check); err != nil {
		fmt.Fprintln(os.Stderr, "admingen:", err)
		os.Exit(1)
	}
}

func run(in, out string, check bool) error {
	msgs, err := load(in)
	if err != nil {
		return err
	}
	src, err := generate(msgs, in)
	if err != nil {
		return err
	}
	if check {
		old, err := os.ReadFile(out)
		if err != nil {
			return err
		}
		if !bytes.Equal(old, src) {
			return fmt.Errorf("%s is stale; run go generate", out)
		}
		return nil
	}
	return os.WriteFile(out, src, 0o644)
}
