package mirror

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/mirror/controller"
	"github.com/kmirror/kmirror/mirror/dest"
	"github.com/kmirror/kmirror/mirror/metasync"
)

// The metadata sync (discovery, topic creation, partition growth, config, group-offset
// and ACL sync) and the source admin clients live in package mirror/metasync; these
// names keep the API of package mirror.
type (
	// SyncConfig is metasync.SyncConfig: the configuration of one mirror's Syncer.
	SyncConfig = metasync.SyncConfig
	// Syncer is metasync.Syncer: the metadata sync of one mirror.
	Syncer = metasync.Syncer
	// SyncStats is metasync.SyncStats: what one sync cycle did.
	SyncStats = metasync.SyncStats
	// SyncError is metasync.SyncError: one per-topic or per-group sync failure.
	SyncError = metasync.SyncError
	// SourceTopic is metasync.SourceTopic: one topic of the source cluster.
	SourceTopic = metasync.SourceTopic
	// SourceTopicError is metasync.SourceTopicError: a failure about one source topic.
	SourceTopicError = metasync.SourceTopicError
	// SourceAdmin is metasync.SourceAdmin: the admin view of a source cluster.
	SourceAdmin = metasync.SourceAdmin
	// ACLSource is metasync.ACLSource: a SourceAdmin that lists the source's ACLs.
	ACLSource = metasync.ACLSource
	// GroupLister is metasync.GroupLister: a Destination that lists its groups.
	GroupLister = metasync.GroupLister
	// KafkaSourceAdmin is metasync.KafkaSourceAdmin: a SourceAdmin over franz-go (kmsg).
	KafkaSourceAdmin = metasync.KafkaSourceAdmin
	// LocalSourceAdmin is metasync.LocalSourceAdmin: a SourceAdmin over a Destination.
	LocalSourceAdmin = metasync.LocalSourceAdmin
)

// DefaultSyncInterval is metasync.DefaultSyncInterval, the default period of the
// metadata sync.
const DefaultSyncInterval = metasync.DefaultSyncInterval

// Errors of the metadata sync and the source admin (metasync.Err...).
var (
	// ErrSourceTopicRecreated is metasync.ErrSourceTopicRecreated.
	ErrSourceTopicRecreated = metasync.ErrSourceTopicRecreated
	// ErrSourceTopicMissing is metasync.ErrSourceTopicMissing.
	ErrSourceTopicMissing = metasync.ErrSourceTopicMissing
	// ErrDestinationTopicMismatch is metasync.ErrDestinationTopicMismatch.
	ErrDestinationTopicMismatch = metasync.ErrDestinationTopicMismatch
	// ErrSourceAdmin is metasync.ErrSourceAdmin.
	ErrSourceAdmin = metasync.ErrSourceAdmin
	// ErrSourceAdminClosed is metasync.ErrSourceAdminClosed.
	ErrSourceAdminClosed = metasync.ErrSourceAdminClosed
)

// NewSyncer is metasync.NewSyncer.
func NewSyncer(cfg SyncConfig) (*Syncer, error) { return metasync.NewSyncer(cfg) }

// ClampGroupOffset is metasync.ClampGroupOffset: a source group offset clamped to the
// destination log [logStart, logEnd].
func ClampGroupOffset(committed, logStart, logEnd int64) int64 {
	return metasync.ClampGroupOffset(committed, logStart, logEnd)
}

// NewKafkaSourceAdmin is metasync.NewKafkaSourceAdmin.
func NewKafkaSourceAdmin(mc controller.MirrorConfig) (*KafkaSourceAdmin, error) {
	return metasync.NewKafkaSourceAdmin(mc)
}

// NewKafkaSourceAdminConn is metasync.NewKafkaSourceAdminConn: the source admin over
// the cluster reached by c.
func NewKafkaSourceAdminConn(c Connection, mc controller.MirrorConfig, extra ...kgo.Opt) (*KafkaSourceAdmin, error) {
	return metasync.NewKafkaSourceAdminConn(c, mc, extra...)
}

// NewLocalSourceAdmin is metasync.NewLocalSourceAdmin.
func NewLocalSourceAdmin(d dest.Destination, groups func() []string) *LocalSourceAdmin {
	return metasync.NewLocalSourceAdmin(d, groups)
}
