//go:build !race

package admin

// raceBuild: see race_on_test.go.
const raceBuild = false
