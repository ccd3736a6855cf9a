package admin

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Code is a Kafka protocol error code as carried in the ErrorCode fields of
// the mirror RPCs (int16 on the wire).
type Code int16

// The protocol error codes the mirror RPCs use. Codes below 10000 are Apache
// Kafka's own, with Kafka's names. The new KIP-1279 errors have no upstream
// numbers yet; they live in kmirror's block 10000-10999, each the prototype's
// allocation plus 10000 (READ_ONLY_TOPIC 134 -> 10134, 136-146 ->
// 10136-10146). The prototype's numbers collide with Kafka 4.4.0
// (134 GROUP_DELETION_FAILED, 136 CONTROLLER_ID_NOT_REGISTERED), and Kafka
// allocates about ten codes a year from 0 upwards (136 in 4.4), so the block
// has centuries of headroom while staying inside int16. A Kafka client that
// does not know a code reports it as unknown instead of as a wrong Kafka
// error. The codes live only in the codeTable below, so they change in one
// place when the KIP is voted; TestNumbersDoNotCollideWithKafka checks them
// against the harness's Kafka jars.
const (
	CodeUnknownServerError               Code = -1
	CodeNone                             Code = 0
	CodeCorruptMessage                   Code = 2
	CodeUnknownTopicOrPartition          Code = 3
	CodeLeaderNotAvailable               Code = 5
	CodeNotLeaderOrFollower              Code = 6
	CodeRequestTimedOut                  Code = 7
	CodeNetworkException                 Code = 13
	CodeCoordinatorLoadInProgress        Code = 14
	CodeCoordinatorNotAvailable          Code = 15
	CodeNotCoordinator                   Code = 16
	CodeInvalidTopic                     Code = 17
	CodeTopicAuthorizationFailed         Code = 29
	CodeClusterAuthorizationFailed       Code = 31
	CodeUnsupportedSaslMechanism         Code = 33
	CodeIllegalSaslState                 Code = 34
	CodeUnsupportedVersion               Code = 35
	CodeTopicAlreadyExists               Code = 36
	CodeInvalidReplicationFactor         Code = 38
	CodeInvalidConfig                    Code = 40
	CodeNotController                    Code = 41
	CodeInvalidRequest                   Code = 42
	CodePolicyViolation                  Code = 44
	CodeSaslAuthenticationFailed         Code = 58
	CodeFencedLeaderEpoch                Code = 74
	CodeInvalidRecord                    Code = 87
	CodeResourceNotFound                 Code = 91
	CodeDuplicateResource                Code = 92
	CodeUnacceptableCredential           Code = 93
	CodeUnknownTopicID                   Code = 100
	CodeInconsistentTopicID              Code = 103
	CodeFencedStateEpoch                 Code = 124
	CodeReadOnlyTopic                    Code = 10134
	CodeClusterMirrorAlreadyExists       Code = 10136
	CodeUnknownClusterMirror             Code = 10137
	CodeTopicAlreadyInClusterMirror      Code = 10138
	CodeTopicNotInClusterMirror          Code = 10139
	CodeMirrorTopicAlreadyPaused         Code = 10140
	CodeMirrorTopicNotPaused             Code = 10141
	CodeMirrorTopicBeingStopped          Code = 10142
	CodeClusterMirrorNotEmpty            Code = 10143
	CodeClusterMirrorAuthorizationFailed Code = 10144
	CodeInvalidClusterMirrorStates       Code = 10145
	CodeMirrorTopicNotStopped            Code = 10146
	// CodeMirrorTruncationRefused is kmirror's own (not the prototype's): a start
	// that would remove records written on the destination cluster, without
	// AllowTruncation (StartMirrorTopics v1); the response carries the plan.
	CodeMirrorTruncationRefused Code = 10147
)

// CodeInfo describes one protocol error code.
type CodeInfo struct {
	Code        Code
	Name        string // Kafka's upper-case name, e.g. "UNKNOWN_CLUSTER_MIRROR"
	Retriable   bool   // whether a client may retry the same request unchanged
	Description string
}

// codeTable is the one table of every code this package knows.
var codeTable = []CodeInfo{
	{CodeUnknownServerError, "UNKNOWN_SERVER_ERROR", false, "The server experienced an unexpected error when processing the request."},
	{CodeNone, "NONE", false, "No error."},
	{CodeCorruptMessage, "CORRUPT_MESSAGE", true, "A record batch is malformed or its CRC does not match."},
	{CodeUnknownTopicOrPartition, "UNKNOWN_TOPIC_OR_PARTITION", true, "This server does not host this topic-partition."},
	{CodeLeaderNotAvailable, "LEADER_NOT_AVAILABLE", true, "There is no leader for this topic-partition as we are in the middle of a leadership election."},
	{CodeNotLeaderOrFollower, "NOT_LEADER_OR_FOLLOWER", true, "This server is not the leader or a follower for that topic-partition."},
	{CodeRequestTimedOut, "REQUEST_TIMED_OUT", true, "The request timed out."},
	{CodeNetworkException, "NETWORK_EXCEPTION", true, "The server disconnected before a response was received."},
	{CodeCoordinatorLoadInProgress, "COORDINATOR_LOAD_IN_PROGRESS", true, "The coordinator is loading and hence can't process requests."},
	{CodeCoordinatorNotAvailable, "COORDINATOR_NOT_AVAILABLE", true, "The coordinator is not available."},
	{CodeNotCoordinator, "NOT_COORDINATOR", true, "This is not the correct coordinator."},
	{CodeInvalidTopic, "INVALID_TOPIC_EXCEPTION", false, "The request attempted to perform an operation on an invalid topic."},
	{CodeTopicAuthorizationFailed, "TOPIC_AUTHORIZATION_FAILED", false, "Topic authorization failed."},
	{CodeClusterAuthorizationFailed, "CLUSTER_AUTHORIZATION_FAILED", false, "Cluster authorization failed."},
	{CodeUnsupportedSaslMechanism, "UNSUPPORTED_SASL_MECHANISM", false, "The broker does not support the requested SASL mechanism."},
	{CodeIllegalSaslState, "ILLEGAL_SASL_STATE", false, "Request is not valid given the current SASL state."},
	{CodeUnsupportedVersion, "UNSUPPORTED_VERSION", false, "The version of API is not supported."},
	{CodeTopicAlreadyExists, "TOPIC_ALREADY_EXISTS", false, "The topic already exists, or its id is used by a topic of another name."},
	{CodeInvalidReplicationFactor, "INVALID_REPLICATION_FACTOR", false, "The replication factor is invalid or cannot be satisfied."},
	{CodeInvalidConfig, "INVALID_CONFIG", false, "Configuration is invalid."},
	{CodeNotController, "NOT_CONTROLLER", true, "This is not the correct controller for this cluster."},
	{CodeInvalidRequest, "INVALID_REQUEST", false, "The request is malformed or its content is not valid."},
	{CodePolicyViolation, "POLICY_VIOLATION", false, "Request parameters do not satisfy the configured policy."},
	{CodeSaslAuthenticationFailed, "SASL_AUTHENTICATION_FAILED", false, "SASL Authentication failed."},
	{CodeFencedLeaderEpoch, "FENCED_LEADER_EPOCH", true, "The leader epoch in the request is older than the epoch on the coordinator."},
	{CodeInvalidRecord, "INVALID_RECORD", false, "A record was refused by the broker's validation (for example a control batch from a client)."},
	{CodeResourceNotFound, "RESOURCE_NOT_FOUND", false, "A request illegally referred to a resource that does not exist."},
	{CodeDuplicateResource, "DUPLICATE_RESOURCE", false, "A request illegally referred to the same resource twice."},
	{CodeUnacceptableCredential, "UNACCEPTABLE_CREDENTIAL", false, "Requested credential would not meet criteria for acceptability."},
	{CodeUnknownTopicID, "UNKNOWN_TOPIC_ID", true, "This server does not host this topic ID."},
	{CodeInconsistentTopicID, "INCONSISTENT_TOPIC_ID", true, "The topic ID does not match the topic name (superseded by TOPIC_ALREADY_EXISTS in the KIP)."},
	{CodeFencedStateEpoch, "FENCED_STATE_EPOCH", false, "The state epoch in the request is older than the state epoch on the coordinator."},
	{CodeReadOnlyTopic, "READ_ONLY_TOPIC", false, "The topic is a mirror topic that is not stopped and cannot be written to."},
	{CodeClusterMirrorAlreadyExists, "CLUSTER_MIRROR_ALREADY_EXISTS", false, "A cluster mirror with this name already exists."},
	{CodeUnknownClusterMirror, "UNKNOWN_CLUSTER_MIRROR", false, "The cluster mirror does not exist."},
	{CodeTopicAlreadyInClusterMirror, "TOPIC_ALREADY_IN_CLUSTER_MIRROR", false, "The topic is already mirrored by another cluster mirror."},
	{CodeTopicNotInClusterMirror, "TOPIC_NOT_IN_CLUSTER_MIRROR", false, "The topic does not belong to this cluster mirror."},
	{CodeMirrorTopicAlreadyPaused, "MIRROR_TOPIC_ALREADY_PAUSED", false, "The mirror topic is already paused (prototype only; the KIP uses INVALID_CLUSTER_MIRROR_STATES)."},
	{CodeMirrorTopicNotPaused, "MIRROR_TOPIC_NOT_PAUSED", false, "The mirror topic is not paused (prototype only; the KIP uses INVALID_CLUSTER_MIRROR_STATES)."},
	{CodeMirrorTopicBeingStopped, "MIRROR_TOPIC_BEING_STOPPED", false, "The mirror topic is being stopped (prototype only; the KIP uses INVALID_CLUSTER_MIRROR_STATES)."},
	{CodeClusterMirrorNotEmpty, "CLUSTER_MIRROR_NOT_EMPTY", false, "The cluster mirror still has topics (prototype only; the KIP uses INVALID_CLUSTER_MIRROR_STATES)."},
	{CodeClusterMirrorAuthorizationFailed, "CLUSTER_MIRROR_AUTHORIZATION_FAILED", false, "Not authorized on the CLUSTER_MIRROR resource."},
	{CodeInvalidClusterMirrorStates, "INVALID_CLUSTER_MIRROR_STATES", false, "Some partitions or topics are not in the state the operation requires."},
	{CodeMirrorTruncationRefused, "MIRROR_TRUNCATION_REFUSED", false, "The start would remove records written on this cluster; the response carries the plan, and a start with AllowTruncation removes them."},
	{CodeMirrorTopicNotStopped, "MIRROR_TOPIC_NOT_STOPPED", false, "The mirror topic is not stopped (prototype only; the KIP uses INVALID_CLUSTER_MIRROR_STATES)."},
}

// codeIndex maps a code to its position in codeTable; built once, never
// mutated afterwards.
var codeIndex = func() map[Code]int {
	m := make(map[Code]int, len(codeTable))
	for i, ci := range codeTable {
		m[ci.Code] = i
	}
	return m
}()

// codeErrs holds one canonical *Error per known code (nil for CodeNone), so
// that Code.Err returns a stable value.
var codeErrs = func() []*Error {
	errs := make([]*Error, len(codeTable))
	for i, ci := range codeTable {
		if ci.Code != CodeNone {
			errs[i] = &Error{Code: ci.Code}
		}
	}
	return errs
}()

// Codes returns every known code in table order (a copy).
func Codes() []CodeInfo {
	return append([]CodeInfo(nil), codeTable...)
}

// Info returns the table entry for c; ok is false for an unknown code.
func (c Code) Info() (info CodeInfo, ok bool) {
	i, ok := codeIndex[c]
	if !ok {
		return CodeInfo{Code: c, Name: "UNKNOWN_CODE_" + strconv.Itoa(int(c))}, false
	}
	return codeTable[i], true
}

// Known reports whether c is in the code table.
func (c Code) Known() bool {
	_, ok := codeIndex[c]
	return ok
}

// String returns Kafka's name for the code ("UNKNOWN_CLUSTER_MIRROR"), or
// "UNKNOWN_CODE_<n>" for a code not in the table.
func (c Code) String() string {
	info, _ := c.Info()
	return info.Name
}

// Retriable reports whether a client may retry a request that failed with c.
// Unknown codes are not retriable.
func (c Code) Retriable() bool {
	info, _ := c.Info()
	return info.Retriable
}

// Err returns nil for CodeNone and otherwise an error that errors.Is matches
// against any *Error carrying the same code.
func (c Code) Err() error {
	if c == CodeNone {
		return nil
	}
	if i, ok := codeIndex[c]; ok {
		return codeErrs[i]
	}
	return &Error{Code: c}
}

// Error is a protocol error: a code plus an optional human-readable message
// (the ErrorMessage field of a response).
type Error struct {
	Code    Code
	Message string
}

// NewError returns an *Error with code c and message msg.
func NewError(c Code, msg string) *Error {
	return &Error{Code: c, Message: msg}
}

// Errorf returns an *Error with code c and a formatted message.
func Errorf(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Message: fmt.Sprintf(format, args...)}
}

// Error implements error: "admin: UNKNOWN_CLUSTER_MIRROR (10137): message".
func (e *Error) Error() string {
	s := "admin: " + e.Code.String() + " (" + strconv.Itoa(int(e.Code)) + ")"
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Is reports whether target is an *Error with the same code, so
// errors.Is(err, admin.CodeX.Err()) matches by code regardless of message.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t != nil && e != nil && t.Code == e.Code
}

// Retriable reports whether the error's code is retriable.
func (e *Error) Retriable() bool { return e.Code.Retriable() }

// CodeOf extracts the protocol code of err: CodeNone for nil, the code of
// the first *Error in the chain, or CodeUnknownServerError otherwise.
func CodeOf(err error) Code {
	if err == nil {
		return CodeNone
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeUnknownServerError
}

// MessageOf is the text of err for the ErrorMessage field of a response whose ErrorCode
// is CodeOf(err). The code travels as a number and the reader names it (Error, a CLI), so
// the message leaves out the "admin: NAME (n)" of the *Error in err's chain and keeps the
// context wrapped around it: fmt.Errorf("start: %w", Errorf(CodeX, "no such topic"))
// gives "start: no such topic", an *Error alone its Message. The chain is followed
// through single Unwrap steps whose text ends with their cause's text (as fmt.Errorf's
// "...: %w" does); an error with no *Error in such a chain, or one that renders its cause
// otherwise (errors.Join), is given whole.
func MessageOf(err error) string {
	var b strings.Builder
	for err != nil {
		if e, ok := err.(*Error); ok {
			if e.Message == "" {
				return strings.TrimSuffix(b.String(), ": ")
			}
			return b.String() + e.Message
		}
		inner := errors.Unwrap(err)
		var ae *Error
		if inner == nil || !errors.As(inner, &ae) {
			break
		}
		context, ok := strings.CutSuffix(err.Error(), inner.Error())
		if !ok {
			break
		}
		b.WriteString(context)
		err = inner
	}
	if err == nil {
		return b.String()
	}
	return b.String() + err.Error()
}

// ErrorFromResponse turns a response's (ErrorCode, ErrorMessage) pair into an
// error: nil for CodeNone, otherwise an *Error.
func ErrorFromResponse(code int16, msg *string) error {
	if Code(code) == CodeNone {
		return nil
	}
	e := &Error{Code: Code(code)}
	if msg != nil {
		e.Message = *msg
	}
	return e
}
