package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

type fixedDrops struct{ dropped, queueDropped uint64 }

func (d fixedDrops) Dropped() uint64      { return d.dropped }
func (d fixedDrops) QueueDropped() uint64 { return d.queueDropped }

func TestEventDrops(t *testing.T) {
	tests := []struct {
		name   string
		drops  EventDrops
		want   string
		series int
	}{
		{name: "events disabled: no series"},
		{
			name:  "the sink's counts, Kyverno's with its scope",
			drops: fixedDrops{dropped: 2, queueDropped: 5},
			want: `
# HELP charter_events_queue_dropped_total Event batches dropped because the event queue was full.
# TYPE charter_events_queue_dropped_total counter
charter_events_queue_dropped_total 5
# HELP kyverno_events_dropped_total Events dropped after their creation failed.
# TYPE kyverno_events_dropped_total counter
kyverno_events_dropped_total{otel_scope_name="kyverno",otel_scope_schema_url="",otel_scope_version=""} 2
`,
		},
		{
			name:  "none dropped yet: zeroes, so rates start at once",
			drops: fixedDrops{},
			want: `
# HELP charter_events_queue_dropped_total Event batches dropped because the event queue was full.
# TYPE charter_events_queue_dropped_total counter
charter_events_queue_dropped_total 0
# HELP kyverno_events_dropped_total Events dropped after their creation failed.
# TYPE kyverno_events_dropped_total counter
kyverno_events_dropped_total{otel_scope_name="kyverno",otel_scope_schema_url="",otel_scope_version=""} 0
`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			rec, err := New(reg, "test")
			if err != nil {
				t.Fatal(err)
			}
			if tc.drops != nil {
				rec.SetEventDrops(tc.drops)
			}
			if err := testutil.GatherAndCompare(reg, strings.NewReader(tc.want), EventsDroppedTotal, EventsQueueDroppedTotal); err != nil {
				t.Error(err)
			}
		})
	}
}

// A later sink replaces the earlier one: another Setup in the process.
func TestEventDropsReplaced(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec, err := New(reg, "test")
	if err != nil {
		t.Fatal(err)
	}
	rec.SetEventDrops(fixedDrops{dropped: 7})
	rec.SetEventDrops(fixedDrops{dropped: 1})
	want := `
# HELP kyverno_events_dropped_total Events dropped after their creation failed.
# TYPE kyverno_events_dropped_total counter
kyverno_events_dropped_total{otel_scope_name="kyverno",otel_scope_schema_url="",otel_scope_version=""} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), EventsDroppedTotal); err != nil {
		t.Error(err)
	}
}
