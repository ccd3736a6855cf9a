package mirror

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/internal/kafkaclient"
	"github.com/kmirror/kmirror/mirror/metasync"
	"github.com/kmirror/kmirror/statemachine"
)

// *Mirror is the Peer of an in-process site.
var _ Peer = (*Mirror)(nil)

// KgoOptions returns the franz-go client options that reach the source cluster of cfg's
// properties (LoadConnection, then kafkaclient.KgoOptions): seed brokers, TLS and SASL
// (PLAIN, SCRAM-SHA-256/512), the socket receive buffer (socket.receive.buffer.bytes)
// and the retry timeout of requests (socket.timeout.ms).
func KgoOptions(cfg MirrorConfig) ([]kgo.Opt, error) { return kafkaclient.ConfigOptions(cfg) }

// ConnectionKgoOptions returns the franz-go client options that reach the cluster of c,
// with the timeouts and receive buffer of cfg.
func ConnectionKgoOptions(c Connection, cfg MirrorConfig) ([]kgo.Opt, error) {
	return kafkaclient.KgoOptions(c, cfg)
}

// DefaultSourceFactory builds a fetcher.KafkaSource (read_uncommitted, fetch tuning from
// the mirror configs) and a metasync.KafkaSourceAdmin for the source cluster of cfg's properties
// (LoadConnection). It is SourceFactoryFor(nil).
func DefaultSourceFactory(name string, cfg MirrorConfig) (fetcher.Source, SourceAdmin, error) {
	return SourceFactoryFor(nil)(name, cfg)
}

// SourceFactoryFor returns the default source factory over conns (nil: the properties
// form): the fetch source and the source admin of a mirror share its Connection.
func SourceFactoryFor(conns ConnectionFunc) SourceFactory {
	return func(name string, cfg MirrorConfig) (fetcher.Source, SourceAdmin, error) {
		c, err := resolveConnection(conns, name, cfg)
		if err != nil {
			return nil, nil, err
		}
		opts, err := kafkaclient.KgoOptions(c, cfg)
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, kgo.ClientID("kmirror-"+name))
		src, err := fetcher.NewKafkaSource(fetcher.KafkaSourceConfig{
			SeedBrokers: c.Seeds, ClientOptions: opts, IsolationLevel: fetcher.ReadUncommitted,
			MaxWait: cfg.FetchMaxWait, MinBytes: cfg.FetchMinBytes, MaxBytes: cfg.FetchResponseMaxBytes,
		})
		if err != nil {
			return nil, nil, err
		}
		sa, err := metasync.NewKafkaSourceAdminConn(c, cfg)
		if err != nil {
			_ = src.Close()
			return nil, nil, err
		}
		return src, sa, nil
	}
}

// DefaultPeerFactory builds a Peer that sends the KIP's admin RPCs to the source cluster
// of cfg's properties (NewKafkaPeer). It is PeerFactoryFor(nil).
func DefaultPeerFactory(name string, cfg MirrorConfig) (Peer, error) {
	return PeerFactoryFor(nil)(name, cfg)
}

// PeerFactoryFor returns the default peer factory over conns (nil: the properties
// form): an AdminPeer over the mirror's Connection.
func PeerFactoryFor(conns ConnectionFunc) PeerFactory {
	return func(name string, cfg MirrorConfig) (Peer, error) {
		c, err := resolveConnection(conns, name, cfg)
		if err != nil {
			return nil, err
		}
		return NewKafkaPeerConn(c, cfg, kgo.ClientID("kmirror-peer-"+name))
	}
}

// AdminPeer is a Peer over an admin.Client: ListClusterMirrors and
// DescribeClusterMirrors sent over the Kafka protocol. A cluster that does not serve
// these APIs (a plain Kafka cluster, kfake) answers as if it had no mirror, so the LME
// lookup yields -1 (mirror from scratch, spec §6.3 step 5): kgo refuses to send a key
// the broker does not advertise, so such clusters never see the request. Safe for
// concurrent use.
type AdminPeer struct {
	cl    *admin.Client
	close func()
}

// NewAdminPeer returns a Peer over cl (built with admin.ClientOpts). Close does not
// close cl's kgo client.
func NewAdminPeer(cl *admin.Client) *AdminPeer { return &AdminPeer{cl: cl} }

// NewKafkaPeer connects a kgo client (with admin.ClientOpts) to the source cluster of
// cfg's properties (LoadConnection); Close closes it.
func NewKafkaPeer(cfg MirrorConfig, extra ...kgo.Opt) (*AdminPeer, error) {
	c, err := LoadConnection(cfg)
	if err != nil {
		return nil, err
	}
	return NewKafkaPeerConn(c, cfg, extra...)
}

// NewKafkaPeerConn connects a kgo client (with admin.ClientOpts) to the cluster of c,
// with the timeouts of cfg; Close closes it.
func NewKafkaPeerConn(c Connection, cfg MirrorConfig, extra ...kgo.Opt) (*AdminPeer, error) {
	opts, err := kafkaclient.KgoOptions(c, cfg)
	if err != nil {
		return nil, err
	}
	opts = append(opts, admin.ClientOpts()...)
	opts = append(opts, extra...)
	kcl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("mirror: peer client: %w", err)
	}
	return &AdminPeer{cl: admin.NewClient(kcl), close: kcl.Close}, nil
}

// Close releases the client made by NewKafkaPeer.
func (p *AdminPeer) Close() error {
	if p.close != nil {
		p.close()
	}
	return nil
}

// unsupported reports whether err, the error of a mirror RPC with request key key,
// means the peer does not serve the mirror APIs: UNSUPPORTED_VERSION from the peer, or
// a client-side refusal (no *admin.Error: kgo refuses a key the broker does not
// advertise) for a key the peer's ApiVersions indeed lacks. Otherwise err is returned
// as the error to report (also when ApiVersions cannot be asked).
func (p *AdminPeer) unsupported(ctx context.Context, key int16, err error) (bool, error) {
	if err == nil {
		return false, nil
	}
	var ae *admin.Error
	if errors.As(err, &ae) {
		return ae.Code == admin.CodeUnsupportedVersion, err
	}
	if ctx.Err() != nil {
		return false, err
	}
	serves, verr := p.cl.Serves(ctx, key)
	if verr != nil {
		return false, err // the peer cannot be asked either: report the RPC's error
	}
	return !serves, err
}

// ListClusterMirrors implements Peer.
func (p *AdminPeer) ListClusterMirrors(ctx context.Context, f ListFilter) ([]MirrorListing, error) {
	req := admin.NewPtrListClusterMirrorsRequest()
	req.SourceClusterIdFilter = f.SourceClusterIDs
	req.MirrorNameFilter = f.MirrorNames
	for _, d := range f.DesiredStates {
		req.DesiredMirrorStateFilter = append(req.DesiredMirrorStateFilter, d.String())
	}
	req.IncludeTopicNames = f.IncludeTopicNames
	resp, err := p.cl.ListClusterMirrors(ctx, req)
	if no, err := p.unsupported(ctx, req.Key(), err); no {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	out := make([]MirrorListing, 0, len(resp.Mirrors))
	for _, m := range resp.Mirrors {
		out = append(out, MirrorListing{Name: m.MirrorName, SourceBootstrap: m.SourceBootstrap,
			SourceClusterID: m.SourceClusterId, TopicCount: int(m.TopicCount), TopicNames: m.TopicNames})
	}
	return out, nil
}

// DescribeClusterMirrors implements Peer.
func (p *AdminPeer) DescribeClusterMirrors(ctx context.Context, names []string, o DescribeOptions) ([]MirrorDescription, error) {
	req := admin.NewPtrDescribeClusterMirrorsRequest()
	req.MirrorNames = names
	for topic, parts := range o.TopicPartitions {
		tp := admin.NewDescribeClusterMirrorsRequestTopicPartitions()
		tp.Topic, tp.Partitions = topic, parts
		req.TopicPartitions = append(req.TopicPartitions, tp)
	}
	req.IncludeMirrorStates, req.IncludeMirrorLags = o.IncludeStates, o.IncludeLags
	if o.ClusterID != "" {
		id := o.ClusterID
		req.ClusterId = &id
	}
	resp, err := p.cl.DescribeClusterMirrors(ctx, req)
	if no, err := p.unsupported(ctx, req.Key(), err); no {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	out := make([]MirrorDescription, 0, len(resp.Mirrors))
	var errs []error
	for _, m := range resp.Mirrors {
		if err := admin.ErrorFromResponse(m.ErrorCode, m.ErrorMessage); err != nil {
			errs = append(errs, fmt.Errorf("mirror %q: %w", m.MirrorName, err))
			continue
		}
		d := MirrorDescription{Name: m.MirrorName}
		if m.SourceBootstrap != nil {
			d.SourceBootstrap = *m.SourceBootstrap
		}
		if m.SourceClusterId != nil {
			d.SourceClusterID = *m.SourceClusterId
		}
		for _, t := range m.Topics {
			td := TopicDescription{Topic: t.TopicName}
			for _, pp := range t.Partitions {
				pd := PartitionDescription{Partition: pp.PartitionIndex, State: statemachine.State(pp.State),
					LastMirrorEpoch: pp.LastMirrorEpoch, LastMirrorOffset: pp.LastMirrorOffset,
					SourceOffset: pp.SourceOffset, DestinationOffset: pp.DestinationOffset, ErrorCode: admin.Code(pp.ErrorCode)}
				if pp.ErrorMessage != nil {
					pd.ErrorMessage = *pp.ErrorMessage
				}
				healthFromWire(&pd, pp)
				td.Partitions = append(td.Partitions, pd)
			}
			d.Topics = append(d.Topics, td)
		}
		out = append(out, d)
	}
	return out, errors.Join(errs...)
}
