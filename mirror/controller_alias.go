package mirror

import (
	"context"

	"github.com/kmirror/kmirror/mirror/controller"
)

// The desired-state store (mirror definitions, desired topic states, the controller
// logs) and the CLUSTER_MIRROR config parsing live in package mirror/controller; these
// names keep the API of package mirror.
type (
	// MirrorConfig is controller.MirrorConfig: a parsed, validated mirror definition.
	MirrorConfig = controller.MirrorConfig
	// ACLRule is controller.ACLRule: one acls.include rule.
	ACLRule = controller.ACLRule
	// ControllerLog is controller.ControllerLog: where desired state is stored.
	ControllerLog = controller.ControllerLog
	// TopicState is controller.TopicState: the desired state of one mirror topic.
	TopicState = controller.TopicState
	// MirrorInfo is controller.MirrorInfo: one mirror definition.
	MirrorInfo = controller.MirrorInfo
	// TopicMeta is controller.TopicMeta: a source topic to start.
	TopicMeta = controller.TopicMeta
	// TopicResult is controller.TopicResult: the outcome of an operation for one topic.
	TopicResult = controller.TopicResult
	// FullTruncation is controller.FullTruncation: a full truncation PREPARING will do.
	FullTruncation = controller.FullTruncation
	// Controller is controller.Controller: it validates and records desired state.
	Controller = controller.Controller
	// ControllerView is controller.View: the read-only view of a Controller that
	// Mirror.Controller returns.
	ControllerView = controller.View
	// MemoryControllerLog is controller.MemoryControllerLog: a ControllerLog in memory.
	MemoryControllerLog = controller.MemoryControllerLog
	// FileControllerLog is controller.FileControllerLog: a durable ControllerLog in a
	// directory.
	FileControllerLog = controller.FileControllerLog
	// KafkaControllerLogConfig is controller.KafkaControllerLogConfig.
	KafkaControllerLogConfig = controller.KafkaControllerLogConfig
	// KafkaControllerLog is controller.KafkaControllerLog: a ControllerLog on a
	// compacted Kafka topic.
	KafkaControllerLog = controller.KafkaControllerLog
)

// Errors of the controller logs (controller.Err...).
var (
	// ErrCorruptStateFile is controller.ErrCorruptStateFile.
	ErrCorruptStateFile = controller.ErrCorruptStateFile
	// ErrStateFileVersion is controller.ErrStateFileVersion.
	ErrStateFileVersion = controller.ErrStateFileVersion
	// ErrControllerLogLocked is controller.ErrControllerLogLocked.
	ErrControllerLogLocked = controller.ErrControllerLogLocked
	// ErrControllerTopic is controller.ErrControllerTopic.
	ErrControllerTopic = controller.ErrControllerTopic
	// ErrControllerLog is controller.ErrControllerLog.
	ErrControllerLog = controller.ErrControllerLog
	// ErrControllerLogClosed is controller.ErrControllerLogClosed.
	ErrControllerLogClosed = controller.ErrControllerLogClosed
)

// Names of the controller logs.
const (
	// FileControllerLogLockFile is controller.FileControllerLogLockFile.
	FileControllerLogLockFile = controller.FileControllerLogLockFile
	// DefaultControllerTopic is controller.DefaultControllerTopic.
	DefaultControllerTopic = controller.DefaultControllerTopic
)

// ParseMirrorConfig is controller.ParseMirrorConfig: it validates a mirror definition.
func ParseMirrorConfig(raw map[string]string) (MirrorConfig, error) {
	return controller.ParseMirrorConfig(raw)
}

// ValidMirrorName is controller.ValidMirrorName.
func ValidMirrorName(name string) error { return controller.ValidMirrorName(name) }

// ParseACLRule is controller.ParseACLRule: it parses one acls.include rule.
func ParseACLRule(rule string) (ACLRule, error) { return controller.ParseACLRule(rule) }

// CanonicalConfigKey is controller.CanonicalConfigKey.
func CanonicalConfigKey(k string) string { return controller.CanonicalConfigKey(k) }

// CanonicalMirrorConfigs is controller.CanonicalMirrorConfigs.
func CanonicalMirrorConfigs(raw map[string]string) (map[string]string, error) {
	return controller.CanonicalMirrorConfigs(raw)
}

// OpenController is controller.OpenController: it replays log into a Controller.
func OpenController(ctx context.Context, log ControllerLog) (*Controller, error) {
	return controller.OpenController(ctx, log)
}

// OpenFileControllerLog is controller.OpenFileControllerLog.
func OpenFileControllerLog(dir string) (*FileControllerLog, error) {
	return controller.OpenFileControllerLog(dir)
}

// OpenKafkaControllerLog is controller.OpenKafkaControllerLog.
func OpenKafkaControllerLog(ctx context.Context, cfg KafkaControllerLogConfig) (*KafkaControllerLog, error) {
	return controller.OpenKafkaControllerLog(ctx, cfg)
}

// Mirror-level configuration keys: controller.Key... (the CLUSTER_MIRROR resource,
// spec §13.2).
const (
	KeyBootstrapServers         = controller.KeyBootstrapServers
	KeyTopicsInclude            = controller.KeyTopicsInclude
	KeyTopicsExclude            = controller.KeyTopicsExclude
	KeyGroupsInclude            = controller.KeyGroupsInclude
	KeyGroupsExclude            = controller.KeyGroupsExclude
	KeyTopicPropertiesExcl      = controller.KeyTopicPropertiesExcl
	KeyACLsInclude              = controller.KeyACLsInclude
	KeySocketTimeoutMs          = controller.KeySocketTimeoutMs
	KeySocketReceiveBufferBytes = controller.KeySocketReceiveBufferBytes
	KeySecurityProtocol         = controller.KeySecurityProtocol
	KeySASLMechanism            = controller.KeySASLMechanism
	KeySASLUsername             = controller.KeySASLUsername
	KeySASLPassword             = controller.KeySASLPassword
	KeySSLCAFile                = controller.KeySSLCAFile
	KeySSLCertFile              = controller.KeySSLCertFile
	KeySSLKeyFile               = controller.KeySSLKeyFile
	KeySSLEndpointIdent         = controller.KeySSLEndpointIdent
	KeyRequestTimeoutMs         = controller.KeyRequestTimeoutMs
	KeyFetchWaitMaxMs           = controller.KeyFetchWaitMaxMs
	KeyFetchBackoffMs           = controller.KeyFetchBackoffMs
	KeyFetchMinBytes            = controller.KeyFetchMinBytes
	KeyFetchResponseMaxBytes    = controller.KeyFetchResponseMaxBytes
	KeyFetchMaxBytes            = controller.KeyFetchMaxBytes
	KeyUncleanLeaderElection    = controller.KeyUncleanLeaderElection
	KeyStopOpenTransactions     = controller.KeyStopOpenTransactions
)
