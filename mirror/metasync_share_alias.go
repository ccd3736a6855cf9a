package mirror

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/mirror/metasync"
)

// The share-group source of the metadata sync (package mirror/metasync).
type (
	// ShareGroupSource is metasync.ShareGroupSource: a SourceAdmin that reads share
	// groups.
	ShareGroupSource = metasync.ShareGroupSource
	// KafkaShareSource is metasync.KafkaShareSource: share-group reads over kgo.
	KafkaShareSource = metasync.KafkaShareSource
	// KafkaSourceAdminWithShares is metasync.KafkaSourceAdminWithShares: the
	// SourceAdmin of DefaultSourceFactory.
	KafkaSourceAdminWithShares = metasync.KafkaSourceAdminWithShares
)

// ErrShareGroupsUnsupported is metasync.ErrShareGroupsUnsupported.
var ErrShareGroupsUnsupported = metasync.ErrShareGroupsUnsupported

// NewKafkaShareSource is metasync.NewKafkaShareSource.
func NewKafkaShareSource(opts ...kgo.Opt) (*KafkaShareSource, error) {
	return metasync.NewKafkaShareSource(opts...)
}
