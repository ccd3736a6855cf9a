// Package admin owns the KIP-1279 mirror RPCs as seen on the Kafka wire:
// their request and response types and flexible-version codecs, the API key
// table, the protocol error codes (Code, Error), which RPC may answer which
// error, the ACL resource types and operations each RPC needs, and a server
// and client that carry the RPCs over the Kafka protocol.
//
// # Messages
//
// Every RPC is defined once, as a Kafka-style JSON message definition in
// definitions/*.json; internal/admingen turns them into zz_generated.go
// (go generate ./admin). Each request implements kmsg.Request and each
// response kmsg.Response, so any kgo client built with ClientOpts can send
// them. Encoding appends to a caller's slice (AppendTo); decoding (ReadFrom)
// never panics and reports truncation and malformed input as errors wrapping
// ErrTruncated or ErrMalformed. Unknown tagged fields are kept and written
// back. API key numbers are the prototype's (spec §11) plus 10000, in kmirror's
// block 10000-10999, far from Kafka's own keys (0-94 in Kafka 4.4.0, which
// took the prototype's 94 for UNREGISTER_CONTROLLER); they live only in the
// definitions; change them there and regenerate.
//
// # Errors
//
// Code is a protocol error code; codeTable lists every code with its Kafka
// name, retriable flag and description; rpcErrors says which RPC may answer
// which code. Error carries a code and a message and matches with errors.Is
// by code: errors.Is(err, CodeUnknownClusterMirror.Err()).
//
// # Server and client
//
// Server serves ApiVersions (advertising exactly the implemented keys) and
// the mirror RPCs on listeners the host owns, dispatching to a Handler after
// the Authorizer checks of spec §16.2. Client wraps a *kgo.Client with one
// method per RPC.
//
// # Authentication
//
// ServerConfig.TLS runs TLS on every connection; a client certificate names
// the principal (CertificatePrincipal: Kafka's default mapping, the subject
// in RFC 2253 form). ServerConfig.SASL requires SASL PLAIN or
// SCRAM-SHA-256/512 (package scram) before anything but ApiVersions is
// served, with Kafka's SaslHandshake/SaslAuthenticate semantics; the SASL
// user is then the principal every handler, authorizer and log sees
// (RequestContext.Principal). A connection not yet authenticated may send
// frames of MaxUnauthenticatedFrame at most and must finish within
// SASLConfig.Timeout.
//
// # Who calls it
//
// The coordinator answers ReadMirrorStates/WriteMirrorStates with these
// types and codes; the mirror facade implements Handler and mounts the
// Server; instances and tools use Client.
//
// # Concurrency
//
// Message types, codecs and tables are pure: no I/O, no clock, no
// goroutines; a message value is not safe for concurrent mutation. Only
// server.go and client.go touch the network. Server runs one goroutine per
// connection, owned by the Server; Close cancels the handlers' context,
// closes every connection and returns when all of them are gone. Handler
// and Authorizer implementations must be safe for concurrent use.
package admin
