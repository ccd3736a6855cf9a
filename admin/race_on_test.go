//go:build race

package admin

// raceBuild: the race detector multiplies memory use (Go documents 5-10x),
// so the RSS bounds of the child-process tests are scaled in race builds.
const raceBuild = true
