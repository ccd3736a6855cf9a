// Package lint holds kmirror's lint rules written as Go tests, so that they run with
// `go test ./...` and cannot be forgotten.
//
// The rule it enforces is the purity of the protocol core (DESIGN.md §3): the packages
// records, epoch, statemachine, the admin message types and the coordinator shard do no
// I/O, start no goroutines, never read the clock and draw no randomness of their own.
// Time and randomness come in as parameters; files belong to logs and stores, sockets to
// sources, stores and the admin server.
package lint
