package dataplane

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/internal/consumergroup"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
)

// Defaults of Config.
const (
	// DefaultMaxMessageBytes is Kafka's message.max.bytes default: the
	// largest record batch Produce accepts.
	DefaultMaxMessageBytes = 1048588
	// DefaultFetchMaxBytes is Kafka's fetch.max.bytes default: the most a
	// Fetch response carries whatever the request asks.
	DefaultFetchMaxBytes = 55 << 20
	// DefaultPollInterval is how often a long-polling Fetch re-reads logs
	// that something other than this data plane appends to (the mirror's
	// fetcher). Appends through Produce wake waiting fetches at once.
	DefaultPollInterval = 20 * time.Millisecond
	// DefaultMaxWait bounds a Fetch's MaxWaitMillis (Kafka's
	// replica.fetch.wait.max.ms order of magnitude).
	DefaultMaxWait = 30 * time.Second
)

// ErrConfig is wrapped by New's error for an invalid Config.
var ErrConfig = errors.New("dataplane: invalid config")

// Writer is the client write path a Produce goes through. It appends the
// client's record batches to a partition as its leader (stamping base offset
// and leader epoch) and returns the first batch's base offset; a partition
// that is not writable returns an error whose admin.CodeOf is
// admin.CodeReadOnlyTopic, and nothing is appended.
type Writer interface {
	Produce(ctx context.Context, topic string, partition int32, batches []byte) (baseOffset int64, err error)
}

// GroupLister is optionally implemented by a Destination that can list the
// groups it holds offsets for (mirror.LocalDestination does); ListGroups
// answers an empty list without it.
type GroupLister interface {
	Groups() []string
}

// GroupDeleter is optionally implemented by a Destination that can delete a
// group's committed offsets (mirror.LocalDestination does); DeleteGroups is
// served only with it. DeleteGroupOffsets reports whether the group had
// offsets.
type GroupDeleter interface {
	DeleteGroupOffsets(group string) (bool, error)
}

// Config configures a DataPlane.
type Config struct {
	// Destination is the site served. Required.
	Destination mirror.Destination
	// Writer is the client write path; nil uses DestinationWriter(Destination).
	Writer Writer
	// NodeID is this broker's id in Metadata (default 0).
	NodeID int32
	// AdvertisedHost and AdvertisedPort are the address clients reach this
	// listener at (Metadata's broker). Required.
	AdvertisedHost string
	AdvertisedPort int32
	// MaxMessageBytes bounds one Produce partition's records of a topic
	// that sets no max.message.bytes (the topic's config wins, as in
	// Kafka); 0 means DefaultMaxMessageBytes. It also scales the
	// decompression bound (see the package doc, Client batches).
	MaxMessageBytes int
	// FetchMaxBytes caps a Fetch response; 0 means DefaultFetchMaxBytes.
	FetchMaxBytes int
	// PollInterval: see DefaultPollInterval; 0 means the default.
	PollInterval time.Duration
	// MaxWait caps a Fetch's MaxWaitMillis; 0 means DefaultMaxWait.
	MaxWait time.Duration
	// DefaultPartitions is the partition count of CreateTopics with -1
	// (default 1).
	DefaultPartitions int32
	// ProducerIDs reserves the durable blocks the producer ids of
	// InitProducerId come from; nil uses the Destination, which must then
	// implement mirror.ProducerIDAllocator (mirror.LocalDestination does).
	// Ids are never handed out twice, across restarts and crashes included,
	// and lie in the allocator's local range, apart from the ids of
	// mirrored producers (see Transactions in the package documentation).
	ProducerIDs mirror.ProducerIDAllocator
	// NewTopicID returns the id of a topic CreateTopics makes; nil uses a
	// random UUID.
	NewTopicID func() records.UUID
	// MaxTransactionTimeout bounds the timeout a transactional producer may
	// ask for; 0 means DefaultMaxTransactionTimeout.
	MaxTransactionTimeout time.Duration
	// TransactionCheckInterval: see DefaultTransactionCheckInterval; 0
	// means the default.
	TransactionCheckInterval time.Duration
	// OrphanTransactionTimeout: see DefaultOrphanTransactionTimeout; 0
	// means the default.
	OrphanTransactionTimeout time.Duration
	// OnTxnAbort, when set, is called for every ABORT marker the site
	// writes on its own initiative (a fenced, timed-out or orphaned
	// transaction), from the goroutine that wrote it; it must not block.
	OnTxnAbort func(TxnAbort)
	// EnforceACLs makes every served RPC check the ACLs the Destination
	// holds (it must implement mirror.ACLStore; mirror.LocalDestination
	// keeps the ACLs the mirrors synced there) with Kafka's semantics
	// (Decide) and answer Kafka's authorization codes per RPC. The
	// principal is the connection's (admin.ServerConfig.Principal: the TLS
	// client certificate's subject, else User:ANONYMOUS; the admin listener
	// has no SASL); a request given to Serve is User:ANONYMOUS from an
	// unknown host. Off (the default), everything is allowed, as in a
	// Kafka broker without an authorizer.
	EnforceACLs bool
	// ACLPolicy holds the super users and what a resource no ACL refers to
	// allows; used only with EnforceACLs.
	ACLPolicy ACLPolicy

	// The classic group protocol (JoinGroup, SyncGroup, Heartbeat,
	// LeaveGroup); see Groups in the package documentation.

	// InitialRebalanceDelay is Kafka's group.initial.rebalance.delay.ms; 0
	// means DefaultInitialRebalanceDelay, negative no delay.
	InitialRebalanceDelay time.Duration
	// MinSessionTimeout and MaxSessionTimeout bound the session timeout a
	// member may ask for (INVALID_SESSION_TIMEOUT outside); 0 means
	// DefaultMinSessionTimeout and DefaultMaxSessionTimeout.
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration
	// MaxGroupSize bounds the members of one group, pending ones (handed a
	// member id with MEMBER_ID_REQUIRED) included: GROUP_MAX_SIZE_REACHED
	// beyond. 0 means DefaultMaxGroupSize.
	MaxGroupSize int
	// MaxGroups bounds the classic groups that have members: a JoinGroup
	// creating one more is answered COORDINATOR_NOT_AVAILABLE. 0 means
	// DefaultMaxGroups.
	MaxGroups int
	// GroupRejoinGrace is how long after New every group counts as active
	// for the metadata sync (GroupActive, CommitIfInactive): group
	// membership is not persisted, so after a site restart the members of
	// a group rejoin at their next heartbeat, and until then the sync must
	// not take their group for an empty one. 0 means
	// DefaultGroupRejoinGrace; negative none.
	GroupRejoinGrace time.Duration
	// MaxHeldGroupRequests bounds the JoinGroup and SyncGroup requests held
	// open at once while their group rebalances (each holds one of the admin
	// server's MaxInFlightRequests slots); beyond it a JoinGroup is answered
	// COORDINATOR_LOAD_IN_PROGRESS and a follower's SyncGroup
	// REBALANCE_IN_PROGRESS, which clients retry. Keep it below the server's
	// MaxInFlightRequests. 0 means DefaultMaxHeldGroupRequests.
	MaxHeldGroupRequests int

	// The KIP-848 consumer group protocol (ConsumerGroupHeartbeat,
	// ConsumerGroupDescribe); see Groups in the package documentation.

	// ConsumerSessionTimeout is Kafka's group.consumer.session.timeout.ms:
	// a member not heard from for this long is removed; 0 means
	// DefaultConsumerSessionTimeout.
	ConsumerSessionTimeout time.Duration
	// ConsumerHeartbeatInterval is Kafka's
	// group.consumer.heartbeat.interval.ms, told to every member; 0 means
	// DefaultConsumerHeartbeatInterval.
	ConsumerHeartbeatInterval time.Duration
	// MaxConsumerGroupSize bounds the members of one consumer group
	// (GROUP_MAX_SIZE_REACHED beyond); 0 means DefaultMaxConsumerGroupSize.
	MaxConsumerGroupSize int
	// MaxConsumerGroups bounds the consumer groups with members: a heartbeat
	// creating one more is answered COORDINATOR_NOT_AVAILABLE. 0 means
	// DefaultMaxConsumerGroups.
	MaxConsumerGroups int
	// FetchSessionCacheSlots bounds the incremental fetch sessions
	// (KIP-227) held at once, Kafka's
	// max.incremental.fetch.session.cache.slots; 0 means
	// DefaultFetchSessionCacheSlots, negative turns sessions off (every
	// full fetch is answered with SessionID 0). See fetchsession.go.
	FetchSessionCacheSlots int
	// FetchSessionMaxPartitions bounds the partitions of one session; 0
	// means DefaultFetchSessionMaxPartitions. A fetch needing more is
	// served without a session.
	FetchSessionMaxPartitions int
	// FetchSessionCachePartitions bounds the partitions of all sessions; 0
	// means DefaultFetchSessionCachePartitions.
	FetchSessionCachePartitions int
}

// DataPlane serves a Destination over the Kafka protocol; see the package
// documentation.
type DataPlane struct {
	cfg    Config
	dst    mirror.Destination
	writer Writer
	pids   *pidAllocator

	sessions *fetchSessions

	wakeMu sync.Mutex
	wake   chan struct{} // closed and replaced on every append through Produce

	partsMu sync.Mutex
	parts   map[mirror.TopicPartition]*partProducers

	aclStore  mirror.ACLStore // nil unless Config.EnforceACLs
	aclCache  aclCache
	coord     *coordinator
	groupReg  *groupRegistry          // which protocol owns each group id
	classic   *classicGroups          // the classic group protocol
	consumer  *consumerGroups         // the KIP-848 consumer group protocol
	started   time.Time               // New's time (Config.GroupRejoinGrace)
	checkMu   sync.Mutex              // serializes checkTransactions
	orphans   map[orphanKey]time.Time // guarded by checkMu: open transactions no entry owns, first seen
	closing   chan struct{}
	checkDone chan struct{}
	closeOnce sync.Once
}

// New returns a DataPlane over cfg.Destination.
func New(cfg Config) (*DataPlane, error) {
	switch {
	case cfg.Destination == nil:
		return nil, fmt.Errorf("%w: nil Destination", ErrConfig)
	case cfg.AdvertisedHost == "" || cfg.AdvertisedPort <= 0:
		return nil, fmt.Errorf("%w: advertised address %q:%d", ErrConfig, cfg.AdvertisedHost, cfg.AdvertisedPort)
	case cfg.FetchSessionMaxPartitions < 0 || cfg.FetchSessionCachePartitions < 0:
		return nil, fmt.Errorf("%w: negative fetch session bound", ErrConfig)
	case cfg.MaxMessageBytes < 0 || cfg.FetchMaxBytes < 0 || cfg.PollInterval < 0 || cfg.MaxWait < 0 || cfg.DefaultPartitions < 0,
		cfg.MaxTransactionTimeout < 0 || cfg.TransactionCheckInterval < 0 || cfg.OrphanTransactionTimeout < 0,
		cfg.MinSessionTimeout < 0 || cfg.MaxSessionTimeout < 0 || cfg.MaxGroupSize < 0 || cfg.MaxGroups < 0 || cfg.MaxHeldGroupRequests < 0,
		cfg.ConsumerSessionTimeout < 0 || cfg.ConsumerHeartbeatInterval < 0 || cfg.MaxConsumerGroupSize < 0 || cfg.MaxConsumerGroups < 0:
		return nil, fmt.Errorf("%w: negative limit", ErrConfig)
	}
	if cfg.ProducerIDs == nil {
		pa, ok := cfg.Destination.(mirror.ProducerIDAllocator)
		if !ok {
			return nil, fmt.Errorf("%w: no ProducerIDs, and the Destination (%T) allocates no producer ids (mirror.ProducerIDAllocator)", ErrConfig, cfg.Destination)
		}
		cfg.ProducerIDs = pa
	}
	var acls mirror.ACLStore
	if cfg.EnforceACLs {
		var ok bool
		if acls, ok = cfg.Destination.(mirror.ACLStore); !ok {
			return nil, fmt.Errorf("%w: EnforceACLs with a Destination (%T) that keeps no ACLs (mirror.ACLStore)", ErrConfig, cfg.Destination)
		}
	}
	cfg.MaxTransactionTimeout = orDefault(cfg.MaxTransactionTimeout, DefaultMaxTransactionTimeout)
	cfg.TransactionCheckInterval = orDefault(cfg.TransactionCheckInterval, DefaultTransactionCheckInterval)
	cfg.OrphanTransactionTimeout = orDefault(cfg.OrphanTransactionTimeout, DefaultOrphanTransactionTimeout)
	if cfg.MaxMessageBytes == 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.FetchMaxBytes == 0 {
		cfg.FetchMaxBytes = DefaultFetchMaxBytes
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	if cfg.FetchSessionCacheSlots == 0 {
		cfg.FetchSessionCacheSlots = DefaultFetchSessionCacheSlots
	}
	if cfg.FetchSessionMaxPartitions == 0 {
		cfg.FetchSessionMaxPartitions = DefaultFetchSessionMaxPartitions
	}
	if cfg.FetchSessionCachePartitions == 0 {
		cfg.FetchSessionCachePartitions = DefaultFetchSessionCachePartitions
	}
	if cfg.DefaultPartitions == 0 {
		cfg.DefaultPartitions = 1
	}
	cfg.MinSessionTimeout = orDefault(cfg.MinSessionTimeout, DefaultMinSessionTimeout)
	cfg.MaxSessionTimeout = orDefault(cfg.MaxSessionTimeout, DefaultMaxSessionTimeout)
	if cfg.MinSessionTimeout > cfg.MaxSessionTimeout {
		return nil, fmt.Errorf("%w: MinSessionTimeout %v over MaxSessionTimeout %v", ErrConfig, cfg.MinSessionTimeout, cfg.MaxSessionTimeout)
	}
	cfg.GroupRejoinGrace = max(orDefault(cfg.GroupRejoinGrace, DefaultGroupRejoinGrace), 0)
	cfg.InitialRebalanceDelay = orDefault(cfg.InitialRebalanceDelay, DefaultInitialRebalanceDelay)
	cfg.InitialRebalanceDelay = max(cfg.InitialRebalanceDelay, 0)
	cfg.MaxGroupSize = orDefaultInt(cfg.MaxGroupSize, DefaultMaxGroupSize)
	cfg.MaxGroups = orDefaultInt(cfg.MaxGroups, DefaultMaxGroups)
	cfg.MaxHeldGroupRequests = orDefaultInt(cfg.MaxHeldGroupRequests, DefaultMaxHeldGroupRequests)
	if cfg.NewTopicID == nil {
		cfg.NewTopicID = randomTopicID
	}
	w := cfg.Writer
	if w == nil {
		w = DestinationWriter(cfg.Destination)
	}
	cfg.ConsumerSessionTimeout = orDefault(cfg.ConsumerSessionTimeout, DefaultConsumerSessionTimeout)
	cfg.ConsumerHeartbeatInterval = orDefault(cfg.ConsumerHeartbeatInterval, DefaultConsumerHeartbeatInterval)
	if cfg.ConsumerHeartbeatInterval >= cfg.ConsumerSessionTimeout {
		return nil, fmt.Errorf("%w: ConsumerHeartbeatInterval %v not below ConsumerSessionTimeout %v", ErrConfig, cfg.ConsumerHeartbeatInterval, cfg.ConsumerSessionTimeout)
	}
	cfg.MaxConsumerGroupSize = orDefaultInt(cfg.MaxConsumerGroupSize, DefaultMaxConsumerGroupSize)
	cfg.MaxConsumerGroups = orDefaultInt(cfg.MaxConsumerGroups, DefaultMaxConsumerGroups)
	dp := &DataPlane{cfg: cfg, dst: cfg.Destination, sessions: newFetchSessions(cfg.FetchSessionCacheSlots, cfg.FetchSessionMaxPartitions, cfg.FetchSessionCachePartitions), writer: w, pids: &pidAllocator{src: cfg.ProducerIDs}, wake: make(chan struct{}), aclStore: acls,
		parts: map[mirror.TopicPartition]*partProducers{}, coord: newCoordinator(), groupReg: newGroupRegistry(), started: time.Now(),
		orphans: map[orphanKey]time.Time{}, closing: make(chan struct{}), checkDone: make(chan struct{})}
	dp.classic = newClassicGroups(classicConfig{initialDelay: cfg.InitialRebalanceDelay, minSession: cfg.MinSessionTimeout,
		maxSession: cfg.MaxSessionTimeout, maxGroupSize: cfg.MaxGroupSize, maxGroups: cfg.MaxGroups, maxHeld: cfg.MaxHeldGroupRequests},
		dp.groupReg, dp.closing)
	dp.consumer = newConsumerGroups(consumerConfig{group: consumergroup.Config{SessionTimeout: cfg.ConsumerSessionTimeout,
		HeartbeatInterval: cfg.ConsumerHeartbeatInterval, MaxMembers: cfg.MaxConsumerGroupSize}, maxGroups: cfg.MaxConsumerGroups},
		dp.groupReg, dp.dst)
	go dp.consumer.run(dp.closing)
	go dp.checkLoop()
	return dp, nil
}

func orDefaultInt(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Close stops the transaction check loop (timeouts and orphans are no
// longer aborted) and waits for it. The DataPlane must not serve requests
// afterwards; the Destination stays open (it is the host's). Calling Close
// again returns nil.
func (dp *DataPlane) Close() error {
	dp.closeOnce.Do(func() {
		close(dp.closing)
		dp.classic.close()
	})
	<-dp.checkDone
	<-dp.consumer.done
	return nil
}

func randomTopicID() records.UUID {
	var u records.UUID
	for u == (records.UUID{}) {
		_, _ = rand.Read(u[:])
	}
	return u
}

// api is one served key: versions and handler.
type api struct {
	key      kmsg.Key
	min, max int16
	serve    func(dp *DataPlane, ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// apis is the one table of the keys the data plane serves.
var apis = []api{
	{kmsg.Produce, 3, 12, (*DataPlane).produce},
	{kmsg.Fetch, 4, 16, (*DataPlane).fetch},
	{kmsg.ListOffsets, 1, 9, (*DataPlane).listOffsets},
	{kmsg.Metadata, 1, 12, (*DataPlane).metadata},
	{kmsg.OffsetCommit, 2, 9, (*DataPlane).offsetCommit},
	{kmsg.OffsetFetch, 1, 9, (*DataPlane).offsetFetch},
	{kmsg.FindCoordinator, 0, 5, (*DataPlane).findCoordinator},
	{kmsg.DescribeGroups, 0, 5, (*DataPlane).describeGroups},
	{kmsg.ListGroups, 0, 5, (*DataPlane).listGroups},
	{kmsg.JoinGroup, 2, 9, (*DataPlane).joinGroup},
	{kmsg.SyncGroup, 0, 5, (*DataPlane).syncGroup},
	{kmsg.Heartbeat, 0, 4, (*DataPlane).heartbeat},
	{kmsg.LeaveGroup, 0, 5, (*DataPlane).leaveGroup},
	{kmsg.ConsumerGroupHeartbeat, 0, 1, (*DataPlane).consumerGroupHeartbeat},
	{kmsg.ConsumerGroupDescribe, 0, 1, (*DataPlane).consumerGroupDescribe},
	{kmsg.DeleteGroups, 0, 2, (*DataPlane).deleteGroups},
	{kmsg.CreateTopics, 2, 7, (*DataPlane).createTopics},
	{kmsg.InitProducerID, 0, 4, (*DataPlane).initProducerID},
	{kmsg.AddPartitionsToTxn, 0, 5, (*DataPlane).addPartitionsToTxn},
	{kmsg.AddOffsetsToTxn, 0, 4, (*DataPlane).addOffsetsToTxn},
	{kmsg.EndTxn, 0, 4, (*DataPlane).endTxn},
	{kmsg.TxnOffsetCommit, 0, 4, (*DataPlane).txnOffsetCommit},
	{kmsg.DescribeTransactions, 0, 0, (*DataPlane).describeTransactions},
	{kmsg.ListTransactions, 0, 1, (*DataPlane).listTransactions},
	{kmsg.OffsetForLeaderEpoch, 2, 4, (*DataPlane).offsetForLeaderEpoch},
	{kmsg.CreatePartitions, 0, 3, (*DataPlane).createPartitions},
	{kmsg.DeleteTopics, 0, 6, (*DataPlane).deleteTopics},
	{kmsg.DeleteRecords, 0, 2, (*DataPlane).deleteRecords},
	{kmsg.DescribeACLs, 1, 3, (*DataPlane).describeACLs},
	{kmsg.CreateACLs, 1, 3, (*DataPlane).createACLs},
	{kmsg.DeleteACLs, 1, 3, (*DataPlane).deleteACLs},
}

// served reports whether the data plane serves a: CreatePartitions,
// DeleteTopics and DeleteRecords need a Destination implementing
// mirror.ClientAdmin; DescribeAcls, CreateAcls and DeleteAcls one implementing
// LocalACLStore; DeleteGroups one implementing GroupDeleter.
func (dp *DataPlane) served(a api) bool {
	switch {
	case clientAdminKeys[a.key]:
		return dp.clientAdmin() != nil
	case aclKeys[a.key]:
		return dp.localACLs() != nil
	case a.key == kmsg.DeleteGroups:
		_, ok := dp.dst.(GroupDeleter)
		return ok && dp.groups() != nil
	}
	return true
}

// APIs returns the keys the data plane serves, for admin.ServerConfig.Extra
// (and so ApiVersions).
func (dp *DataPlane) APIs() []admin.ExtraAPI {
	out := make([]admin.ExtraAPI, 0, len(apis))
	for _, a := range apis {
		a := a
		if !dp.served(a) {
			continue
		}
		out = append(out, admin.ExtraAPI{Key: int16(a.key), MinVersion: a.min, MaxVersion: a.max,
			Serve: func(ctx context.Context, _ *admin.RequestContext, req kmsg.Request) (kmsg.Response, error) {
				return dp.call(ctx, a, req)
			}})
	}
	return out
}

// Serve answers one decoded request (any key of APIs), for hosts and tests
// that carry requests by other means. With Config.EnforceACLs it is
// authorized as User:ANONYMOUS from an unknown host unless ctx carries an
// admin.RequestContext.
func (dp *DataPlane) Serve(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	for _, a := range apis {
		if int16(a.key) == req.Key() && dp.served(a) {
			if v := req.GetVersion(); v < a.min || v > a.max {
				return nil, fmt.Errorf("dataplane: key %d version %d not served", req.Key(), v)
			}
			return dp.call(ctx, a, req)
		}
	}
	return nil, fmt.Errorf("dataplane: key %d not served", req.Key())
}

// waitChan returns a channel closed by the next append through Produce.
func (dp *DataPlane) waitChan() <-chan struct{} {
	dp.wakeMu.Lock()
	defer dp.wakeMu.Unlock()
	return dp.wake
}

// appended wakes every waiting Fetch.
func (dp *DataPlane) appended() {
	dp.wakeMu.Lock()
	defer dp.wakeMu.Unlock()
	close(dp.wake)
	dp.wake = make(chan struct{})
}
