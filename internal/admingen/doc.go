// Command admingen generates the Go message types and flexible-version
// codecs of package admin from Kafka-style JSON message definitions.
//
// It is run by go generate in admin/:
//
//	//go:generate go run ../internal/admingen -in definitions -out zz_generated.go
//
// Each definition file holds one request or response, in the format of
// Kafka's clients/src/main/resources/common/message/*.json (apiKey, type,
// name, validVersions, flexibleVersions, fields with name, type, versions,
// nullableVersions, default, about, taggedVersions and tag). Only flexible
// versions are supported: every valid version must be flexible. The output
// is deterministic (files are read in name order, nothing ranges over a map)
// and gofmt'ed, so regenerating an unchanged tree is a no-op.
package main
