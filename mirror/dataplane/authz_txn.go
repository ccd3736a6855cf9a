package dataplane

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// authzInitProducerID: with a transactional id, WRITE on it
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); without, IDEMPOTENT_WRITE on the
// cluster or WRITE on some topic (CLUSTER_AUTHORIZATION_FAILED), as Kafka
// since KIP-679. A refused request allocates no producer id.
func authzInitProducerID(_ *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error) {
	r := req.(*kmsg.InitProducerIDRequest)
	var code int16
	switch {
	case r.TransactionalID != nil:
		if !z.allowed(OpWrite, ResourceTransactional, *r.TransactionalID) {
			code = codeTxnIDAuthorizationFailed
		}
	case !z.allowed(OpIdempotentWrite, ResourceCluster, ClusterName) && !z.allowedAny(OpWrite, ResourceTopic):
		code = codeClusterAuthorizationFailed
	}
	if code == 0 {
		return next(r)
	}
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
	return resp, nil
}

// authzAddPartitionsToTxn: v0-v3 (clients) need WRITE on the transactional
// id (every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on every
// topic; if a topic is refused (TOPIC_AUTHORIZATION_FAILED) nothing is added
// and the other partitions answer OPERATION_NOT_ATTEMPTED, as Kafka does.
// v4+ (broker to coordinator) needs CLUSTER_ACTION on the cluster
// (CLUSTER_AUTHORIZATION_FAILED at top level).
func authzAddPartitionsToTxn(_ *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error) {
	r := req.(*kmsg.AddPartitionsToTxnRequest)
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if r.Version >= 4 {
		if z.allowed(OpClusterAction, ResourceCluster, ClusterName) {
			return next(r)
		}
		resp.ErrorCode = codeClusterAuthorizationFailed
		return resp, nil
	}
	txnOK := z.allowed(OpWrite, ResourceTransactional, r.TransactionalID)
	topicOK := map[string]bool{}
	anyDenied := !txnOK
	for _, rt := range r.Topics {
		topicOK[rt.Topic] = z.allowed(OpWrite, ResourceTopic, rt.Topic)
		anyDenied = anyDenied || !topicOK[rt.Topic]
	}
	if !anyDenied {
		return next(r)
	}
	for _, rt := range r.Topics {
		code := codeOperationNotAttempted
		switch {
		case !txnOK:
			code = codeTxnIDAuthorizationFailed
		case !topicOK[rt.Topic]:
			code = codeTopicAuthorizationFailed
		}
		t := kmsg.NewAddPartitionsToTxnResponseTopic()
		t.Topic = rt.Topic
		for _, p := range rt.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			t.Partitions = append(t.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

// authzAddOffsetsToTxn: WRITE on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on the group
// (GROUP_AUTHORIZATION_FAILED).
func authzAddOffsetsToTxn(_ *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error) {
	r := req.(*kmsg.AddOffsetsToTxnRequest)
	resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	switch {
	case !z.allowed(OpWrite, ResourceTransactional, r.TransactionalID):
		resp.ErrorCode = codeTxnIDAuthorizationFailed
	case !z.allowed(OpRead, ResourceGroup, r.Group):
		resp.ErrorCode = codeGroupAuthorizationFailed
	default:
		return next(r)
	}
	return resp, nil
}

// authzEndTxn: WRITE on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED; the transaction stays open).
func authzEndTxn(_ *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error) {
	r := req.(*kmsg.EndTxnRequest)
	if z.allowed(OpWrite, ResourceTransactional, r.TransactionalID) {
		return next(r)
	}
	resp := r.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ErrorCode = codeTxnIDAuthorizationFailed
	return resp, nil
}

// authzTxnOffsetCommit: WRITE on the transactional id, then READ on the group
// (every partition gets the code, nothing is staged), then READ on each
// topic (TOPIC_AUTHORIZATION_FAILED for its partitions, not staged).
func authzTxnOffsetCommit(_ *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error) {
	r := req.(*kmsg.TxnOffsetCommitRequest)
	var all int16
	switch {
	case !z.allowed(OpWrite, ResourceTransactional, r.TransactionalID):
		all = codeTxnIDAuthorizationFailed
	case !z.allowed(OpRead, ResourceGroup, r.Group):
		all = codeGroupAuthorizationFailed
	}
	kept, denied := split(r.Topics, func(rt kmsg.TxnOffsetCommitRequestTopic) bool {
		return all == 0 && z.allowed(OpRead, ResourceTopic, rt.Topic)
	})
	if len(denied) == 0 && all == 0 {
		return next(r)
	}
	r.Topics = kept
	out, err := serveKept(r, len(kept) > 0, next)
	if err != nil {
		return out, err
	}
	resp := out.(*kmsg.TxnOffsetCommitResponse)
	code := all
	if code == 0 {
		code = codeTopicAuthorizationFailed
	}
	for _, rt := range denied {
		t := kmsg.NewTxnOffsetCommitResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, code
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

// authzDescribeTransactions: DESCRIBE on each transactional id, else only
// the id and TRANSACTIONAL_ID_AUTHORIZATION_FAILED; a described
// transaction lists only the topics the principal may DESCRIBE.
func authzDescribeTransactions(_ *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error) {
	out, err := next(req)
	if err != nil {
		return out, err
	}
	resp := out.(*kmsg.DescribeTransactionsResponse)
	for i := range resp.TransactionStates {
		s := &resp.TransactionStates[i]
		if !z.allowed(OpDescribe, ResourceTransactional, s.TransactionalID) {
			d := kmsg.NewDescribeTransactionsResponseTransactionState()
			d.TransactionalID, d.ErrorCode = s.TransactionalID, codeTxnIDAuthorizationFailed
			*s = d
			continue
		}
		kept := s.Topics[:0]
		for _, t := range s.Topics {
			if z.allowed(OpDescribe, ResourceTopic, t.Topic) {
				kept = append(kept, t)
			}
		}
		s.Topics = kept
	}
	return resp, nil
}

// authzListTransactions lists only the transactional ids the principal may
// DESCRIBE.
func authzListTransactions(_ *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error) {
	out, err := next(req)
	if err != nil {
		return out, err
	}
	resp := out.(*kmsg.ListTransactionsResponse)
	kept := resp.TransactionStates[:0]
	for _, s := range resp.TransactionStates {
		if z.allowed(OpDescribe, ResourceTransactional, s.TransactionalID) {
			kept = append(kept, s)
		}
	}
	resp.TransactionStates = kept
	return resp, nil
}
