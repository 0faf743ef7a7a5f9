package events

import (
	"testing"

	"k8s.io/client-go/rest"
)

// The events client creates at most DefaultQPS events a second unless
// told otherwise: every create is a write of the API server and etcd,
// which answers to admission share.
func TestNewWriterRateLimit(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	for _, tc := range []struct {
		qps   float32
		burst int
		want  float32
	}{{0, 0, DefaultQPS}, {25, 50, 25}} {
		w, err := NewWriter(cfg, tc.qps, tc.burst)
		if err != nil {
			t.Fatal(err)
		}
		limiter := w.(clientsetWriter).cs.EventsV1().RESTClient().GetRateLimiter()
		if limiter == nil || limiter.QPS() != tc.want {
			t.Errorf("NewWriter(%v, %d): rate limiter %v, want %v a second", tc.qps, tc.burst, limiter, tc.want)
		}
	}
	if cfg.QPS != 0 || cfg.Burst != 0 {
		t.Errorf("the caller's config changed: QPS %v, burst %d", cfg.QPS, cfg.Burst)
	}
}
