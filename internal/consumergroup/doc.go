// Package consumergroup is the KIP-848 consumer group protocol as a pure state
// machine: one Group per group id, driven by the ConsumerGroupHeartbeat requests its
// members send (Heartbeat) and by the clock (Tick), both given the time and the topic
// metadata as parameters. It does no I/O, reads no clock and starts no goroutine; a
// Group is not safe for concurrent use (mirror/dataplane holds it under its lock).
//
// The epochs, as in Kafka's group coordinator: the group epoch is bumped whenever
// what the assignment depends on changes (a member joins, leaves or is fenced, a
// subscription or the preferred server assignor changes, a subscribed topic's
// partition count or id changes); the target assignment epoch catches up with it
// when the server-side assignor ("uniform", the default, or "range") computes the
// target assignment; each member's epoch catches up with the target epoch as it
// reconciles. A partition moving from one member to another is first revoked from
// its current owner, whose epoch stays behind until a heartbeat of that owner no
// longer lists the partition, and only then given to its new owner: no two members
// ever hold a partition at once.
//
// Members leave with epoch -1; a static member (with an instance id) leaves with
// epoch -2 and keeps its assignment until its session times out, so that a new
// member with the same instance id takes its place and partitions. A member whose
// session (Config.SessionTimeout) expires, or that does not revoke its partitions
// within its rebalance timeout, is removed. The error codes are Kafka's
// (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID,
// GROUP_MAX_SIZE_REACHED, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION,
// INVALID_REQUEST, STALE_MEMBER_EPOCH for offset commits and fetches).
//
// Bounds: Config.MaxMembers members per group, Config.MaxSubscribedTopics topic names
// per member, names of at most 249 bytes, ids and regular expressions of bounded
// length, so a client cannot make a group hold unbounded state.
package consumergroup
