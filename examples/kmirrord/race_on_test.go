//go:build race

package main

// raceBuild: the race detector multiplies memory use (Go documents 5-10x).
const raceBuild = true
