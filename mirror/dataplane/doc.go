// Package dataplane serves a mirror.Destination over the Kafka protocol, so
// that ordinary Kafka clients (kgo, sarama, the Java client) and kmirror's own
// fetcher.KafkaSource can read a site's partitions, produce to its writable
// ones and read the consumer-group offsets kmirror syncs.
//
// A DataPlane is mounted on the admin server's listener: APIs returns the
// admin.ExtraAPI list to put in admin.ServerConfig.Extra, so one port serves
// the mirror RPCs and the data plane with the same TLS and limits.
//
// It serves, as a one-broker Kafka cluster whose broker leads every partition:
//   - Metadata: topic ids, this node as leader, the log's leader epoch;
//   - Fetch (v4-v16): a partition leader's rules from fetcher.LocalSource
//     (CurrentLeaderEpoch fencing, DivergingEpoch, OFFSET_OUT_OF_RANGE, HW /
//     LSO bounds), read_committed with the AbortedTransactions list, byte
//     limits, MaxWait long-polls woken by appends, and incremental fetch
//     sessions (KIP-227) from a bounded cache (Config.FetchSessionCacheSlots,
//     FetchSessionMaxPartitions; fetchsession.go);
//   - ListOffsets (earliest, latest, by timestamp with a header scan) and
//     OffsetForLeaderEpoch;
//   - Produce (acks 0, 1, all) through a Writer, which refuses read-only
//     partitions (answered to clients as below), with every client batch
//     validated first (see Client batches), idempotent-producer sequence
//     checks against the producer state the log keeps
//     (fetcher.ProducerStateReader: nothing is scanned at the first produce
//     after a failover or a restart), and InitProducerId;
//   - transactional producers as kgo and the Java client use them by
//     default (transaction version 1: explicit AddPartitionsToTxn), with
//     ListTransactions and DescribeTransactions: see Transactions below;
//   - CreateTopics for plain topics;
//   - FindCoordinator (groups and transactions), OffsetCommit, OffsetFetch,
//     ListGroups, DescribeGroups over mirror.GroupOffsets, the classic
//     group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) and the
//     KIP-848 consumer protocol (ConsumerGroupHeartbeat,
//     ConsumerGroupDescribe): see Groups below;
//   - CreatePartitions, DeleteTopics and DeleteRecords over a Destination
//     implementing mirror.ClientAdmin (left out of ApiVersions otherwise): a
//     mirror topic that is not STOPPED is refused per topic (per partition
//     for DeleteRecords) and keeps its partitions and records; other topics
//     of the same request are served.
//
// # Client batches
//
// Produce validates a partition's records as a Kafka leader does before it
// appends (ProduceRequest's checks, the log's append analysis and
// LogValidator for a client origin; records.ValidateClientBatch), and
// refuses the whole partition, appending nothing, with Kafka's code and,
// from Produce v8, an error message: exactly one v2 batch (INVALID_RECORD;
// another magic is INVALID_RECORD too); at most the topic's
// max.message.bytes, else Config.MaxMessageBytes (MESSAGE_TOO_LARGE); a
// valid CRC (CORRUPT_MESSAGE); base offset 0, a record count that equals the
// last offset delta + 1 and the records inside, offset deltas 0..n-1, record
// lengths that cover exactly their fields, nothing after the last record, no
// control batch, a sequence with a producer id, a key on a compacted topic
// (INVALID_RECORD); codec none, gzip, snappy, lz4 or zstd
// (UNSUPPORTED_COMPRESSION_TYPE, also zstd before Produce v7), a payload that
// decodes (INVALID_RECORD) within max(64 MiB, 64 × max.message.bytes), at
// most 256 MiB (MESSAGE_TOO_LARGE: a decompression bomb; Kafka bounds only
// the compressed size and its producers keep a batch's uncompressed bytes
// near max.message.bytes); no LogAppendTime attribute from the client and,
// under message.timestamp.type=CreateTime, every record timestamp within
// message.timestamp.before.max.ms / after.max.ms of the broker's clock
// (INVALID_TIMESTAMP; both default to no bound, as in Kafka 4). The leader
// then stamps the header as Kafka does, on a copy with the CRC recomputed:
// the records' largest timestamp, or under LogAppendTime the attribute and
// its clock (answered as the response's LogAppendTime). Mirrored batches
// never pass here: the fetcher's appends are CRC-checked only and stay
// byte-exact.
//
// # Mirror refusals and Kafka clients
//
// No Kafka client knows kmirror's error codes: kgo and the Java client take
// READ_ONLY_TOPIC or INVALID_CLUSTER_MIRROR_STATES for UNKNOWN_SERVER_ERROR
// (kgo dropped the record with no cause, kafka-delete-records printed
// none). forClient is the one mapping: a mirror code answered to Produce
// (plain or transactional), DeleteRecords, CreatePartitions or DeleteTopics
// is sent as INVALID_TOPIC_EXCEPTION, the code a Kafka broker answers a
// client write to an internal topic. Every version of these keys knows it,
// and kgo and the Java client do not retry it: the write fails at once (a
// transaction must abort). The message, where the version carries one
// (Produce v8+, CreatePartitions, DeleteTopics v5+; DeleteRecords never),
// starts with the mirror code's name, "READ_ONLY_TOPIC: orders-0 is a
// mirror partition and accepts writes only once STOPPED"; the Java client
// shows it, kgo builds its produce error from the code alone
// (kerr.InvalidTopicException). The Go API keeps kmirror's codes
// (mirror.Destination.Produce: errors.Is(err, admin.CodeReadOnlyTopic.Err())),
// as do the mirror RPCs.
//
// # Authorization
//
// With Config.EnforceACLs every served key checks the request's principal
// against the ACLs the Destination holds (mirror.ACLStore: the site's own,
// created with CreateAcls, and those the mirrors sync with acls.include), as
// a Kafka broker with
// StandardAuthorizer does: Decide is the decision (super users, DENY over
// ALLOW, LITERAL, "*" and PREFIXED patterns, the "User:*" principal, hosts,
// DESCRIBE implied by READ/WRITE/DELETE/ALTER), authzRules the one table of
// what each RPC needs and which code it answers (TOPIC_, GROUP_, CLUSTER_ and
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED; Metadata of all topics leaves out
// the topics the principal may not describe). A refused topic is never read
// or changed. The principal is the connection's (admin.RequestContext:
// "User:" + the TLS client certificate's subject with admin.DefaultPrincipal,
// else User:ANONYMOUS). The ACLs are read once per request (cached by
// ACLGeneration), so a sync or an ACL RPC takes effect at the next request.
// Authorizer gives the KIP's mirror RPCs on the same listener the same
// decision (CLUSTER_MIRROR bindings name mirrors), and Allowed the keys a
// host serves itself; AuthorizesKey says whether a key has a rule.
//
// # ACL RPCs
//
// With a Destination that is a LocalACLStore (mirror.LocalDestination),
// CreateAcls, DeleteAcls and DescribeAcls (v1-v3) are served as Kafka's
// AclApis and AclControlManager do: ALTER on the cluster for create and
// delete, DESCRIBE for describe (else CLUSTER_AUTHORIZATION_FAILED, per item
// or at top level, and nothing changes); an invalid binding or a filter with
// an UNKNOWN field is INVALID_REQUEST alone; filters take ANY and MATCH
// pattern types; creating an existing ACL succeeds once. Created ACLs are the
// site's own, durable, and never touched by a mirror's ACL sync. DescribeAcls
// lists the effective ACLs, the site's own and every mirror's synced ones
// without duplicates (what is enforced; the wire has no field for the
// origin). DeleteAcls removes only the site's own and returns each; a
// matching synced ACL is listed with POLICY_VIOLATION and stays (it is the
// source's: remove it there or narrow acls.include). Without EnforceACLs
// they answer SECURITY_DISABLED, as a broker without an authorizer.
//
// # Transactions
//
// The node is the transaction coordinator of every transactional id.
// InitProducerId with an id hands out a producer id at epoch 0, then the
// next epoch on every call, which fences older producers of the id
// (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH on Produce); an open transaction
// is aborted at the bumped epoch first. AddPartitionsToTxn (v0-v3, and v4+
// batched with VerifyOnly), AddOffsetsToTxn and TxnOffsetCommit build the
// transaction; a transactional Produce must come from the id's current
// producer and epoch, to a partition added to its Ongoing transaction, and
// passes the idempotent sequence checks. EndTxn writes a COMMIT or ABORT
// marker (fetcher.WriteTxnMarker) into every partition the transaction
// wrote to, then commits the staged group offsets through
// mirror.GroupOffsets (commit only), all before it answers; a write error
// leaves the id in PrepareCommit/PrepareAbort, answered
// CONCURRENT_TRANSACTIONS, and the client's retry or the check loop resumes
// it. A check loop (Config.TransactionCheckInterval) aborts, fencing the
// producer, every transaction open longer than its timeout.
//
// Mirror partitions: a transaction of this site never touches a partition
// that is read-only (a mirror topic that is not STOPPED): its open
// transactions are the source's. AddPartitionsToTxn, a transactional
// Produce and TxnOffsetCommit naming one answer READ_ONLY_TOPIC per
// partition and change nothing. EndTxn writes a marker only into the
// partitions this site appended the transaction's data to, closing only the
// transaction that started there at or after that append, and every marker
// goes through the log's read-only check atomically with the append
// (fetcher.TxnMarker.OnlyIfWritable). A COMMIT of a transaction one of whose
// partitions became a mirror partition since is turned into an abort and
// answered TRANSACTION_ABORTABLE (see endTxn).
//
// Producer ids come from durable blocks of 1000 (Config.ProducerIDs, by
// default the Destination's mirror.ProducerIDAllocator), as Kafka's
// ProducerIdManager takes them from its controller: a block is persisted
// before any of its ids is handed out, so no id is handed out twice, across
// restarts and kill -9 included. Clients never pick an id: an idempotent
// InitProducerId always gets a fresh one (as from Kafka), whatever id it
// passes. Mirrored producers keep the source's ids (spec §8.4), so ids of
// mirrored and local producers are kept apart twice. By state: no local
// producer writes data or markers into a mirror partition, and a mirror
// partition turns writable only after STOPPING aborted its open
// transactions and wrote MIRROR_PID_RESET, which expires the mirrored
// producers' state (an equal id after it is a new producer). By number:
// mirror.LocalDestination allocates from a range above 2^62 chosen by its
// cluster id (mirror.LocalProducerIDRange), out of reach of a Kafka
// source's ids (Kafka allocates from 0) and, but for a 1 in 65,536 slot
// clash, of another kmirror site's. Kafka's destination relies on the state
// separation alone: its own ids start at 0 like the source's.
//
// Durability: coordinator state is kept in memory only (producer-id blocks
// are durable, see above). After a restart a
// transaction left open in a writable log has no coordinator state and can
// never be ended by its producer (its every request is refused for want of
// the id's state), so the check loop aborts it, with its own producer id and
// epoch, once it has been seen open for Config.OrphanTransactionTimeout;
// read-only (mirror) partitions are skipped, their transactions are the
// source's. Config.OnTxnAbort reports every abort the site makes on its own.
// The cost of keeping no coordinator log: a crash in the middle of an
// EndTxn commit that spans several partitions leaves the partitions already
// marked committed and the others are aborted after the restart; and a
// crash between the markers and the offset commit loses the staged offsets
// (consumers then re-read, they never skip).
//
// # Groups
//
// Committed offsets live in the Destination (mirror.GroupOffsets, durable).
// Group membership lives in the data plane: a registry (groups_registry.go)
// gives each group id to one protocol, classic or consumer (KIP-848), and answers for both
// kinds which groups are active, what ListGroups and DescribeGroups show,
// and whether a member's OffsetCommit or TxnOffsetCommit is valid.
//
// The classic protocol follows Kafka's group coordinator (ClassicGroup):
// states Empty, PreparingRebalance, CompletingRebalance, Stable; a new
// member, a member that leaves or whose session times out, or a changed
// subscription starts a rebalance; the join phase ends once every member
// has rejoined or at the longest rebalance timeout (members that did not
// rejoin are removed), the sync phase at the rebalance timeout too (members
// that sent no SyncGroup are removed); the first rebalance of an empty
// group waits Config.InitialRebalanceDelay (Kafka's
// group.initial.rebalance.delay.ms, 3 s), extended per join up to the
// rebalance timeout. JoinGroup v4+ without a member id is answered
// MEMBER_ID_REQUIRED with one; a static member (group.instance.id) that
// rejoins without its member id replaces its old id (FENCED_INSTANCE_ID
// from then on) without a rebalance when nothing changed. The leader
// assigns (range, cooperative-sticky and any client-side assignor work); the
// protocol is the one every member supports that most prefer. Member
// commits are fenced as Kafka's: ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
// FENCED_INSTANCE_ID, REBALANCE_IN_PROGRESS while CompletingRebalance
// (OffsetCommit only); a memberless commit (generation -1, no member id) is
// accepted while the group is Empty and UNKNOWN_MEMBER_ID otherwise.
//
// Bounds a client cannot turn against the server: session timeouts within
// Config.MinSessionTimeout and MaxSessionTimeout (INVALID_SESSION_TIMEOUT);
// Config.MaxGroupSize members per group, pending member ids included
// (GROUP_MAX_SIZE_REACHED), which expire after the session timeout when
// never used; Config.MaxGroups groups with members (COORDINATOR_NOT_AVAILABLE
// beyond). A JoinGroup or SyncGroup waiting for a rebalance holds one of the
// admin server's request slots, as a Fetch long poll does, so at most
// Config.MaxHeldGroupRequests wait at once (COORDINATOR_LOAD_IN_PROGRESS for
// a JoinGroup beyond, REBALANCE_IN_PROGRESS for a follower's SyncGroup, both
// retried by clients); a held request ends with its context (the
// connection, the server's close) and at Close.
//
// Membership is not persisted (Kafka writes it to __consumer_offsets so a
// coordinator failover keeps the generation): after a restart every member
// learns at its next heartbeat (UNKNOWN_MEMBER_ID) that it must rejoin, and
// resumes from its committed offsets, at the cost of one rebalance per
// restart and no write per rebalance. Meanwhile the metadata sync must not
// take the group for an empty one, so for Config.GroupRejoinGrace (45 s,
// consumers' default session timeout) after New every group counts as
// active for it.
//
// The consumer protocol (KIP-848: ConsumerGroupHeartbeat and
// ConsumerGroupDescribe, groups_consumer.go) runs the pure state machine of
// internal/consumergroup per group: group, target-assignment and member
// epochs; the server-side assignors "uniform" (the default) and "range",
// chosen by the members' ServerAssignor; subscriptions by topic names or a
// regular expression (re-matched every 10 s); a partition moves to another
// member only once a heartbeat of its old owner no longer lists it; a
// member is removed when its session (Config.ConsumerSessionTimeout, Kafka's
// group.consumer.session.timeout.ms, 45 s) or its rebalance timeout (while it
// still holds partitions to revoke) runs out, checked every second. Leave is
// epoch -1; a static member leaves with -2 and keeps its partitions until its
// session runs out or a member with its instance id takes its place
// (UNRELEASED_INSTANCE_ID while it is active). A grown subscribed topic, or one
// created after the subscription, bumps the group epoch and is assigned. A
// member's OffsetCommit needs v9 and its current epoch (STALE_MEMBER_EPOCH), as
// does its OffsetFetch v9 (epoch -1 is an admin client). A heartbeat for a
// group the classic protocol holds is GROUP_ID_NOT_FOUND, a JoinGroup for a
// consumer group INCONSISTENT_GROUP_PROTOCOL (Kafka without group migration);
// DescribeGroups answers a consumer group Dead (Kafka's answer before v6) and
// ConsumerGroupDescribe describes it; ListGroups shows it with type
// "consumer". As membership is not persisted, a heartbeat at an epoch above
// 0 for a group the site does not hold is UNKNOWN_MEMBER_ID (Kafka answers
// GROUP_ID_NOT_FOUND, which the Java client takes as fatal), so the member
// rejoins. Bounds: Config.MaxConsumerGroupSize members per group
// (GROUP_MAX_SIZE_REACHED), Config.MaxConsumerGroups groups
// (COORDINATOR_NOT_AVAILABLE beyond), and per member at most 10000 subscribed
// topic names of at most 249 bytes, a regular expression of at most 1024
// bytes and ids of at most 255 (INVALID_REQUEST). An empty consumer group is
// dropped and its id released; its offsets stay.
//
// DeleteGroups (over a Destination implementing GroupDeleter) deletes an
// empty group's offsets, refuses a group with members (NON_EMPTY_GROUP) and
// answers GROUP_ID_NOT_FOUND for a group with neither.
//
// Groups and mirroring: the metadata sync (metasync.GroupGuard, which the
// DataPlane implements with GroupActive and CommitIfInactive) never writes
// the offsets of a group that has members here, and writes those of an
// empty group while holding its joins off, so a consumer joining at that
// moment reads the synced offsets, not a mix; the sync resumes once the
// group empties.
//
// # Concurrency
//
// A DataPlane is safe for concurrent use; the admin server calls it from one
// goroutine per connection. Produce serializes per partition (sequence check
// and append are one step); reads take no data-plane lock. Each
// transactional id serializes its coordinator requests. New starts the
// transaction check loop; Close stops it.
package dataplane
