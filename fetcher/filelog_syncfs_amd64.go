//go:build linux && amd64

package fetcher

const syncfsNumber = 306
