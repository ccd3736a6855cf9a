package kmprom

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/mirror/metasync"
)

var _ metasync.ConditionObserver = (*Metrics)(nil)

func TestSyncConditionSeries(t *testing.T) {
	mt := New("test")
	c := metasync.ConditionACLsSecurityDisabled
	for i := int64(1); i <= 3; i++ {
		mt.SyncCondition("m", c, true, i)
	}
	require.Equal(t, 1.0, testutil.ToFloat64(mt.condActive.WithLabelValues("m", c)))
	require.Equal(t, 3.0, testutil.ToFloat64(mt.condCycles.WithLabelValues("m", c)))
	mt.SyncCondition("m", c, false, 3)
	require.Equal(t, 0.0, testutil.ToFloat64(mt.condActive.WithLabelValues("m", c)))
	require.Equal(t, 3.0, testutil.ToFloat64(mt.condCycles.WithLabelValues("m", c)))
}
