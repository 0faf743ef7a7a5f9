package main

import (
	"os"
	"testing"
	"time"
)

func TestHistogramIn(t *testing.T) {
	for _, tc := range []struct {
		name, family string
		match        map[string]string
		want         histogramTotal
	}{
		{name: "every series of one webhook, allowed and rejected", family: apiserverWebhookDuration,
			match: map[string]string{"name": "validate.charter.svc-fail"}, want: histogramTotal{sum: 0.030, count: 10}},
		{name: "one series", family: apiserverWebhookDuration,
			match: map[string]string{"name": "validate.charter.svc-fail", "rejected": "true"}, want: histogramTotal{sum: 0.006, count: 2}},
		{name: "a label the series do not carry matches nothing", family: apiserverWebhookDuration,
			match: map[string]string{"name": "validate.charter.svc-fail", "resource": "pods"}},
		{name: "a family not exposed yet", family: "kyverno_admission_review_duration_seconds"},
		{name: "a counter is no histogram", family: "apiserver_request_total"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := os.Open("testdata/apiserver-metrics.txt")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := histogramIn(f, tc.family, tc.match)
			if err != nil {
				t.Fatal(err)
			}
			if got.count != tc.want.count || got.sum-tc.want.sum > 1e-9 || tc.want.sum-got.sum > 1e-9 {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestHistogramTotalMean(t *testing.T) {
	later, earlier := histogramTotal{sum: 0.5, count: 10}, histogramTotal{sum: 0.25, count: 5}
	if got, want := later.since(earlier).mean(), 50*time.Millisecond; got != want {
		t.Errorf("mean of the difference: got %s, want %s", got, want)
	}
	if got := (histogramTotal{}).mean(); got != 0 {
		t.Errorf("mean without observations: got %s, want 0", got)
	}
}
