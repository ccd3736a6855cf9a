// Package compactedtest holds the test helpers of the Kafka state logs (package
// internal/compacted and its users coordinator.KafkaStore and
// controller.KafkaControllerLog): unique topics on a real or fake cluster, topics
// created with a given cleanup.policy, and aborted transactions written by a producer
// of their own.
package compactedtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/kmirror/kmirror/internal/kafkatest"
)

func saramaConfig() *sarama.Config {
	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	return sc
}

// Topic returns a topic name made of prefix and a random suffix, and deletes the topic
// (if it was created) when the test ends.
func Topic(t testing.TB, brokers []string, prefix string) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	topic := prefix + "-" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		if adm, err := sarama.NewClusterAdmin(brokers, saramaConfig()); err == nil {
			_ = adm.DeleteTopic(topic)
			_ = adm.Close()
		}
	})
	return topic
}

// CreateTopic creates topic with replication factor 1 and the given cleanup.policy.
func CreateTopic(t testing.TB, brokers []string, topic string, partitions int32, policy string) {
	t.Helper()
	adm, err := sarama.NewClusterAdmin(brokers, saramaConfig())
	if err != nil {
		t.Fatalf("compactedtest: admin client: %v", err)
	}
	defer adm.Close()
	err = adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"cleanup.policy": &policy}}, false)
	if err != nil {
		t.Fatalf("compactedtest: create topic %s: %v", topic, err)
	}
}

// AbortedTxn writes key=value to topic/partition in a transaction of its own
// transactional id txnID and aborts it.
func AbortedTxn(t testing.TB, brokers []string, txnID, topic string, partition int32, key, value string) {
	t.Helper()
	pc := saramaConfig()
	pc.Producer.Idempotent = true
	pc.Producer.RequiredAcks = sarama.WaitForAll
	pc.Producer.Return.Successes = true
	pc.Producer.Partitioner = sarama.NewManualPartitioner
	pc.Producer.Transaction.ID = txnID
	pc.Net.MaxOpenRequests = 1
	p, err := sarama.NewSyncProducer(brokers, pc)
	if err != nil {
		t.Fatalf("compactedtest: transactional producer %s: %v", txnID, err)
	}
	defer p.Close()
	if err := p.BeginTxn(); err != nil {
		t.Fatalf("compactedtest: begin: %v", err)
	}
	m := &sarama.ProducerMessage{Topic: topic, Partition: partition, Key: sarama.StringEncoder(key), Value: sarama.StringEncoder(value)}
	if _, _, err := p.SendMessage(m); err != nil {
		t.Fatalf("compactedtest: produce: %v", err)
	}
	if err := p.AbortTxn(); err != nil {
		t.Fatalf("compactedtest: abort: %v", err)
	}
}

// ClusterB returns the brokers of the real cluster B and a context that ends with the
// test (at most two minutes); it skips the test when real Kafka is not running (and fails
// it when CI requires real Kafka).
func ClusterB(t *testing.T) ([]string, context.Context) {
	t.Helper()
	kafkatest.RequireCI(t)
	brokers := kafkatest.ClusterB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return brokers, ctx
}
