package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestInFlightLimitShedsBeyondSlotsAndWaitingRoom: with every slot taken,
// reviews wait for one until the waiting room is full, and the next is
// shed at once; a
// waiting review gets the slot that comes free, one that waits too long
// is shed; each shed review is a 429 naming the limit and its flag.
func TestInFlightLimitShedsBeyondSlotsAndWaitingRoom(t *testing.T) {
	release := make(chan struct{})
	limit := newInFlightLimit(2)
	limit.wait, limit.waitRoom = 2*time.Second, 2
	h := limit.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		w.WriteHeader(http.StatusOK)
	}))
	var wg sync.WaitGroup
	codes := make(chan int, 4)
	for range 4 { // 2 in flight, 2 waiting
		wg.Go(func() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/validate/fail", nil))
			codes <- w.Code
		})
	}
	waitFor(t, "2 in flight and 2 waiting", func() bool { return limit.inFlight() == 2 && limit.waiting.Load() == 2 })

	start := time.Now()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/validate/fail", nil))
	if w.Code != http.StatusTooManyRequests || time.Since(start) > time.Second {
		t.Fatalf("fifth review: HTTP %d after %s, want 429 at once", w.Code, time.Since(start))
	}
	for _, want := range []string{"overloaded", "all 2 review slots are busy", "--max-in-flight", "2 more already wait"} {
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("429 body %q lacks %q", w.Body.String(), want)
		}
	}
	if w.Header().Get("Retry-After") != "1" {
		t.Errorf("Retry-After = %q, want 1", w.Header().Get("Retry-After"))
	}
	close(release) // the waiting two get the freed slots
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != http.StatusOK {
			t.Errorf("an in-flight or waiting review got HTTP %d, want 200", code)
		}
	}
	if limit.inFlight() != 0 || limit.waiting.Load() != 0 {
		t.Errorf("after: %d in flight, %d waiting; want none", limit.inFlight(), limit.waiting.Load())
	}
}

func TestInFlightLimitShedsAReviewThatWaitsTooLong(t *testing.T) {
	limit := newInFlightLimit(1)
	limit.wait = 50 * time.Millisecond
	limit.slots <- struct{}{} // taken
	w := httptest.NewRecorder()
	limit.wrap(http.NotFoundHandler()).ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/validate/fail", nil))
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), "none came free within 50ms") {
		t.Fatalf("HTTP %d %q; want 429 saying none came free within 50ms", w.Code, w.Body.String())
	}
}

// TestHealthChecksAnswerWhileEverySlotIsBusy: the kubelet's probes are no
// reviews; a busy server is alive and ready.
func TestHealthChecksAnswerWhileEverySlotIsBusy(t *testing.T) {
	h, limit := newHandler(Options{Null: true, MaxInFlight: 3})
	limit.wait = 10 * time.Millisecond
	for range 3 {
		limit.slots <- struct{}{}
	}
	for _, path := range []string{PathLiveness, PathReadiness} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if w.Code != http.StatusOK {
			t.Errorf("GET %s with every slot busy: HTTP %d", path, w.Code)
		}
	}
	if w := post(h, PathValidateFail, compliant().review()); w.Code != http.StatusTooManyRequests {
		t.Errorf("a review with every slot busy: HTTP %d, want 429", w.Code)
	}
}

func TestInFlightLimitDefaultsAndOff(t *testing.T) {
	if l := newInFlightLimit(-1); l != nil {
		t.Errorf("MaxInFlight -1: a limit of %d, want none", cap(l.slots))
	}
	if l := newInFlightLimit(0); cap(l.slots) < DefaultMaxInFlightPerCPU || l.waitRoom != waitingPerSlot*int64(cap(l.slots)) {
		t.Errorf("MaxInFlight 0: a limit of %d, %d waiting; want %d per CPU, %d waiting a slot", cap(l.slots), l.waitRoom, DefaultMaxInFlightPerCPU, waitingPerSlot)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 10s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
