package admin

import "github.com/twmb/franz-go/pkg/kmsg"

// extraSchemas is the one table of the wire layouts the pre-scan knows
// (request bodies, after the header), written from the Kafka protocol for
// every version a site serves (the data plane's keys, DescribeConfigs, and
// the SASL, ACL and SCRAM keys); TestExtraSchemasMatchKmsg checks each entry
// against kmsg's encoding. A key or version without an entry decodes under
// the fallback bound (fallbackDecodeFactor). To add a key: list its fields in
// order with the versions that carry them (fv(kind, first, last); -1 is
// open), arrays with their element's kmsg type, and the first flexible
// version.
var extraSchemas = map[int16]*schema{
	int16(kmsg.Produce): {minVersion: 3, maxVersion: 12, flexibleFrom: 9, fields: []sfield{
		fv(kNullString, 3, -1), // TransactionalID
		f(kInt16), f(kInt32),   // Acks, TimeoutMillis
		arr[kmsg.ProduceRequestTopic](0, -1,
			fv(kString, 0, 12), fv(kUUID, 13, -1),
			arr[kmsg.ProduceRequestTopicPartition](0, -1, f(kInt32), f(kNullBytes))),
	}},
	int16(kmsg.Fetch): {minVersion: 4, maxVersion: 16, flexibleFrom: 12, fields: []sfield{
		fv(kInt32, 0, 14),    // ReplicaID
		f(kInt32), f(kInt32), // MaxWaitMillis, MinBytes
		fv(kInt32, 3, -1),                    // MaxBytes
		fv(kInt8, 4, -1),                     // IsolationLevel
		fv(kInt32, 7, -1), fv(kInt32, 7, -1), // SessionID, SessionEpoch
		arr[kmsg.FetchRequestTopic](0, -1,
			fv(kString, 0, 12), fv(kUUID, 13, -1),
			arr[kmsg.FetchRequestTopicPartition](0, -1,
				f(kInt32), fv(kInt32, 9, -1), f(kInt64), fv(kInt32, 12, -1), fv(kInt64, 5, -1), f(kInt32),
			).withTags(stag{id: 0, fields: []sfield{f(kUUID)}}, stag{id: 1, fields: []sfield{f(kInt64)}})),
		arr[kmsg.FetchRequestForgottenTopic](7, -1,
			fv(kString, 7, 12), fv(kUUID, 13, -1), parr(kInt32, 0, -1)),
		fv(kString, 11, -1), // Rack
	}, rootTags: []stag{
		{id: 0, fields: []sfield{f(kNullString)}},                       // ClusterID
		{id: 1, fields: []sfield{f(kInt32), f(kInt64)}, withTags: true}, // ReplicaState
	}},
	int16(kmsg.ListOffsets): {minVersion: 1, maxVersion: 9, flexibleFrom: 6, fields: []sfield{
		f(kInt32), fv(kInt8, 2, -1), // ReplicaID, IsolationLevel
		arr[kmsg.ListOffsetsRequestTopic](0, -1, f(kString),
			arr[kmsg.ListOffsetsRequestTopicPartition](0, -1, f(kInt32), fv(kInt32, 4, -1), f(kInt64), fv(kInt32, 0, 0))),
		fv(kInt32, 10, -1), // TimeoutMillis
	}},
	int16(kmsg.Metadata): {minVersion: 1, maxVersion: 12, flexibleFrom: 9, fields: []sfield{
		// The topic name is a string before v10 and nullable after; kmsg
		// allocates a *string either way.
		arr[kmsg.MetadataRequestTopic](0, -1, fv(kUUID, 10, -1), f(kNullString)),
		fv(kInt8, 4, -1), fv(kInt8, 8, 10), fv(kInt8, 8, -1),
	}},
	int16(kmsg.OffsetCommit): {minVersion: 2, maxVersion: 9, flexibleFrom: 8, fields: []sfield{
		f(kString), fv(kInt32, 1, -1), fv(kString, 1, -1), fv(kNullString, 7, -1), fv(kInt64, 2, 4),
		arr[kmsg.OffsetCommitRequestTopic](0, -1, fv(kString, 0, 9), fv(kUUID, 10, -1),
			arr[kmsg.OffsetCommitRequestTopicPartition](0, -1,
				f(kInt32), f(kInt64), fv(kInt64, 1, 1), fv(kInt32, 6, -1), f(kNullString))),
	}},
	int16(kmsg.OffsetFetch): {minVersion: 1, maxVersion: 9, flexibleFrom: 6, fields: []sfield{
		fv(kString, 0, 7),
		arr[kmsg.OffsetFetchRequestTopic](0, 7, f(kString), parr(kInt32, 0, -1)),
		arr[kmsg.OffsetFetchRequestGroup](8, -1, f(kString), fv(kNullString, 9, -1), fv(kInt32, 9, -1),
			arr[kmsg.OffsetFetchRequestGroupTopic](0, -1, fv(kString, 8, 9), fv(kUUID, 10, -1), parr(kInt32, 0, -1))),
		fv(kInt8, 7, -1), // RequireStable
	}},
	int16(kmsg.FindCoordinator): {minVersion: 0, maxVersion: 5, flexibleFrom: 3, fields: []sfield{
		fv(kString, 0, 3), fv(kInt8, 1, -1), parr(kString, 4, -1),
	}},
	int16(kmsg.ConsumerGroupHeartbeat): {minVersion: 0, maxVersion: 1, flexibleFrom: 0, fields: []sfield{
		f(kString), f(kString), f(kInt32), // Group, MemberID, MemberEpoch
		f(kNullString), f(kNullString), f(kInt32), // InstanceID, RackID, RebalanceTimeoutMillis
		parr(kString, 0, -1),                   // SubscribedTopicNames (nullable)
		fv(kNullString, 1, -1), f(kNullString), // SubscribedTopicRegex, ServerAssignor
		arr[kmsg.ConsumerGroupHeartbeatRequestTopic](0, -1, f(kUUID), parr(kInt32, 0, -1)),
	}},
	int16(kmsg.ConsumerGroupDescribe): {minVersion: 0, maxVersion: 1, flexibleFrom: 0, fields: []sfield{
		parr(kString, 0, -1), f(kInt8), // Groups, IncludeAuthorizedOperations
	}},
	int16(kmsg.DescribeGroups): {minVersion: 0, maxVersion: 5, flexibleFrom: 5, fields: []sfield{
		parr(kString, 0, -1), fv(kInt8, 3, -1),
	}},
	int16(kmsg.ListGroups): {minVersion: 0, maxVersion: 5, flexibleFrom: 3, fields: []sfield{
		parr(kString, 4, -1), parr(kString, 5, -1),
	}},
	int16(kmsg.CreateTopics): {minVersion: 2, maxVersion: 7, flexibleFrom: 5, fields: []sfield{
		arr[kmsg.CreateTopicsRequestTopic](0, -1, f(kString), f(kInt32), f(kInt16),
			arr[kmsg.CreateTopicsRequestTopicReplicaAssignment](0, -1, f(kInt32), parr(kInt32, 0, -1)),
			arr[kmsg.CreateTopicsRequestTopicConfig](0, -1, f(kString), f(kNullString))),
		f(kInt32), fv(kInt8, 1, -1),
	}},
	int16(kmsg.InitProducerID): {minVersion: 0, maxVersion: 4, flexibleFrom: 2, fields: []sfield{
		f(kNullString), f(kInt32), fv(kInt64, 3, -1), fv(kInt16, 3, -1),
	}},
	int16(kmsg.AddPartitionsToTxn): {minVersion: 0, maxVersion: 5, flexibleFrom: 3, fields: []sfield{
		fv(kString, 0, 3), fv(kInt64, 0, 3), fv(kInt16, 0, 3),
		arr[kmsg.AddPartitionsToTxnRequestTopic](0, 3, f(kString), parr(kInt32, 0, -1)),
		arr[kmsg.AddPartitionsToTxnRequestTransaction](4, -1, f(kString), f(kInt64), f(kInt16), f(kInt8),
			arr[kmsg.AddPartitionsToTxnRequestTransactionTopic](0, -1, f(kString), parr(kInt32, 0, -1))),
	}},
	int16(kmsg.AddOffsetsToTxn): {minVersion: 0, maxVersion: 4, flexibleFrom: 3, fields: []sfield{
		f(kString), f(kInt64), f(kInt16), f(kString),
	}},
	int16(kmsg.EndTxn): {minVersion: 0, maxVersion: 4, flexibleFrom: 3, fields: []sfield{
		f(kString), f(kInt64), f(kInt16), f(kInt8),
	}},
	int16(kmsg.TxnOffsetCommit): {minVersion: 0, maxVersion: 4, flexibleFrom: 3, fields: []sfield{
		f(kString), f(kString), f(kInt64), f(kInt16), fv(kInt32, 3, -1), fv(kString, 3, -1), fv(kNullString, 3, -1),
		arr[kmsg.TxnOffsetCommitRequestTopic](0, -1, fv(kString, 0, 5), fv(kUUID, 6, -1),
			arr[kmsg.TxnOffsetCommitRequestTopicPartition](0, -1, f(kInt32), f(kInt64), fv(kInt32, 2, -1), f(kNullString))),
	}},
	int16(kmsg.DescribeTransactions): {minVersion: 0, maxVersion: 0, flexibleFrom: 0, fields: []sfield{
		parr(kString, 0, -1),
	}},
	int16(kmsg.ListTransactions): {minVersion: 0, maxVersion: 1, flexibleFrom: 0, fields: []sfield{
		parr(kString, 0, -1), parr(kInt64, 0, -1), fv(kInt64, 1, -1), fv(kNullString, 2, -1),
	}},
	int16(kmsg.OffsetForLeaderEpoch): {minVersion: 2, maxVersion: 4, flexibleFrom: 4, fields: []sfield{
		fv(kInt32, 3, -1),
		arr[kmsg.OffsetForLeaderEpochRequestTopic](0, -1, f(kString),
			arr[kmsg.OffsetForLeaderEpochRequestTopicPartition](0, -1, f(kInt32), fv(kInt32, 2, -1), f(kInt32))),
	}},
	int16(kmsg.CreatePartitions): {minVersion: 0, maxVersion: 3, flexibleFrom: 2, fields: []sfield{
		arr[kmsg.CreatePartitionsRequestTopic](0, -1, f(kString), f(kInt32),
			arr[kmsg.CreatePartitionsRequestTopicAssignment](0, -1, parr(kInt32, 0, -1))),
		f(kInt32), f(kInt8),
	}},
	int16(kmsg.DeleteTopics): {minVersion: 0, maxVersion: 6, flexibleFrom: 4, fields: []sfield{
		parr(kString, 0, 5),
		arr[kmsg.DeleteTopicsRequestTopic](6, -1, f(kNullString), f(kUUID)),
		f(kInt32),
	}},
	int16(kmsg.DeleteRecords): {minVersion: 0, maxVersion: 2, flexibleFrom: 2, fields: []sfield{
		arr[kmsg.DeleteRecordsRequestTopic](0, -1, f(kString),
			arr[kmsg.DeleteRecordsRequestTopicPartition](0, -1, f(kInt32), f(kInt64))),
		f(kInt32),
	}},
	int16(kmsg.DescribeConfigs): {minVersion: 0, maxVersion: 4, flexibleFrom: 4, fields: []sfield{
		arr[kmsg.DescribeConfigsRequestResource](0, -1, f(kInt8), f(kString), parr(kString, 0, -1)),
		fv(kInt8, 1, -1), fv(kInt8, 3, -1),
	}},
	// Keys other parts of a site mount next to the data plane.
	int16(kmsg.SASLHandshake): {minVersion: 0, maxVersion: 1, flexibleFrom: -1, fields: []sfield{
		f(kString), // Mechanism
	}},
	int16(kmsg.SASLAuthenticate): {minVersion: 0, maxVersion: 2, flexibleFrom: 2, fields: []sfield{
		f(kBytes), // SASLAuthBytes
	}},
	int16(kmsg.DescribeACLs): {minVersion: 0, maxVersion: 3, flexibleFrom: 2, fields: []sfield{
		f(kInt8), f(kNullString), fv(kInt8, 1, -1), f(kNullString), f(kNullString), f(kInt8), f(kInt8),
	}},
	int16(kmsg.CreateACLs): {minVersion: 0, maxVersion: 3, flexibleFrom: 2, fields: []sfield{
		arr[kmsg.CreateACLsRequestCreation](0, -1,
			f(kInt8), f(kString), fv(kInt8, 1, -1), f(kString), f(kString), f(kInt8), f(kInt8)),
	}},
	int16(kmsg.DeleteACLs): {minVersion: 0, maxVersion: 3, flexibleFrom: 2, fields: []sfield{
		arr[kmsg.DeleteACLsRequestFilter](0, -1,
			f(kInt8), f(kNullString), fv(kInt8, 1, -1), f(kNullString), f(kNullString), f(kInt8), f(kInt8)),
	}},
	int16(kmsg.DescribeUserSCRAMCredentials): {minVersion: 0, maxVersion: 0, flexibleFrom: 0, fields: []sfield{
		arr[kmsg.DescribeUserSCRAMCredentialsRequestUser](0, -1, f(kString)), // nullable: all users
	}},
	int16(kmsg.AlterUserSCRAMCredentials): {minVersion: 0, maxVersion: 0, flexibleFrom: 0, fields: []sfield{
		arr[kmsg.AlterUserSCRAMCredentialsRequestDeletion](0, -1, f(kString), f(kInt8)),
		arr[kmsg.AlterUserSCRAMCredentialsRequestUpsertion](0, -1, f(kString), f(kInt8), f(kInt32), f(kBytes), f(kBytes)),
	}},
}
