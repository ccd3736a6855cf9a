//go:build linux && arm64

package fetcher

const syncfsNumber = 267
