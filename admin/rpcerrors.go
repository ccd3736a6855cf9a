package admin

// commonErrors may be answered by every RPC: internal failures, malformed
// requests and version problems.
var commonErrors = []Code{CodeNone, CodeUnknownServerError, CodeInvalidRequest, CodeUnsupportedVersion}

// lifecycleErrors are shared by Stop/Pause/Resume (spec §11.6, §11.7, §12).
var lifecycleErrors = []Code{
	CodeNotController, CodeUnknownClusterMirror, CodeInvalidClusterMirrorStates,
	CodeClusterMirrorAuthorizationFailed, CodeTopicAuthorizationFailed,
	CodeUnknownTopicOrPartition, CodeTopicNotInClusterMirror, CodeRequestTimedOut,
}

// coordinatorErrors are answered by the coordinator-bound RPCs.
var coordinatorErrors = []Code{CodeNotCoordinator, CodeCoordinatorLoadInProgress, CodeCoordinatorNotAvailable}

// rpcErrors is the one table of which error codes each RPC may answer (at any
// level: top, mirror, topic or partition), beyond commonErrors. It follows
// spec §11 and §12; entries marked [I] there are included, prototype-only
// codes ([P]) too.
var rpcErrors = map[int16][]Code{
	KeyCreateClusterMirror: {CodeNotController, CodeClusterMirrorAlreadyExists, CodeClusterMirrorAuthorizationFailed,
		CodeInvalidConfig, CodePolicyViolation},
	KeyDeleteClusterMirrors: {CodeNotController, CodeUnknownClusterMirror, CodeInvalidClusterMirrorStates,
		CodeClusterMirrorAuthorizationFailed, CodeRequestTimedOut},
	KeyListClusterMirrors: {CodeClusterMirrorAuthorizationFailed},
	KeyDescribeClusterMirrors: append([]Code{CodeUnknownClusterMirror, CodeClusterMirrorAuthorizationFailed,
		CodeNotLeaderOrFollower, CodeLeaderNotAvailable, CodeUnknownTopicOrPartition, CodeRequestTimedOut,
		CodeNetworkException}, coordinatorErrors...),
	KeyStartMirrorTopics: {CodeNotController, CodeUnknownClusterMirror, CodeInvalidClusterMirrorStates,
		CodeInvalidReplicationFactor, CodeTopicAlreadyExists, CodeClusterMirrorAuthorizationFailed,
		CodeTopicAuthorizationFailed, CodeUnknownTopicOrPartition, CodeInvalidTopic, CodeRequestTimedOut,
		CodeTopicAlreadyInClusterMirror, CodeInconsistentTopicID, CodeMirrorTruncationRefused},
	KeyStopMirrorTopics:   lifecycleErrors,
	KeyPauseMirrorTopics:  lifecycleErrors,
	KeyResumeMirrorTopics: lifecycleErrors,
	// RecoverMirrorTopics (a later revision, spec §14.10) is answered like the other
	// topic lifecycle RPCs.
	KeyRecoverMirrorTopics: lifecycleErrors,
	KeyReadMirrorStates: append([]Code{CodeUnknownClusterMirror, CodeFencedLeaderEpoch, CodeUnknownTopicOrPartition,
		CodeClusterAuthorizationFailed}, coordinatorErrors...),
	KeyWriteMirrorStates: append([]Code{CodeUnknownClusterMirror, CodeFencedLeaderEpoch, CodeFencedStateEpoch,
		CodeUnknownTopicOrPartition, CodeClusterAuthorizationFailed}, coordinatorErrors...),
	KeyReadMirrorOffsets: {CodeUnknownClusterMirror, CodeNotLeaderOrFollower, CodeLeaderNotAvailable,
		CodeUnknownTopicOrPartition, CodeClusterAuthorizationFailed},
	KeyBumpLeaderEpochs: {CodeNotController, CodeUnknownTopicOrPartition, CodeUnknownTopicID,
		CodeClusterAuthorizationFailed},
}

// AllowedErrors returns the codes RPC key may answer (a copy), including the
// common ones; nil for an unknown key.
func AllowedErrors(key int16) []Code {
	specific, ok := rpcErrors[key]
	if !ok {
		return nil
	}
	out := append([]Code(nil), commonErrors...)
	return append(out, specific...)
}

// ErrorAllowed reports whether RPC key may answer code c.
func ErrorAllowed(key int16, c Code) bool {
	for _, a := range AllowedErrors(key) {
		if a == c {
			return true
		}
	}
	return false
}
