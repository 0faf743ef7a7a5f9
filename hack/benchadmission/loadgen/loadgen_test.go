package loadgen

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestPercentile(t *testing.T) {
	oneToN := func(n int) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = ms(i + 1)
		}
		return out
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"none", nil, 99, 0},
		{"one", []time.Duration{ms(7)}, 50, ms(7)},
		{"one, p99", []time.Duration{ms(7)}, 99, ms(7)},
		{"100 p50", oneToN(100), 50, ms(50)},
		{"100 p95", oneToN(100), 95, ms(95)},
		{"100 p99 is exact, not rounded up", oneToN(100), 99, ms(99)},
		{"100 p100", oneToN(100), 100, ms(100)},
		{"10 p99 is the max", oneToN(10), 99, ms(10)},
		{"10 p50", oneToN(10), 50, ms(5)},
		{"200 p99", oneToN(200), 99, ms(198)},
		{"1000 p99.9", oneToN(1000), 99.9, ms(999)},
		{"3 p50 rounds up", oneToN(3), 50, ms(2)},
		{"tiny p picks the min", oneToN(100), 0.001, ms(1)},
	}
	for _, tt := range tests {
		if got := Percentile(tt.sorted, tt.p); got != tt.want {
			t.Errorf("%s: Percentile(p%v) = %v, want %v", tt.name, tt.p, got, tt.want)
		}
	}
}

func TestSummarizeSortsAndAverages(t *testing.T) {
	lat := make([]time.Duration, 0, 100)
	for i := 1; i <= 100; i++ {
		lat = append(lat, ms(i))
	}
	rand.Shuffle(len(lat), func(i, j int) { lat[i], lat[j] = lat[j], lat[i] })
	got := Summarize(lat)
	want := Summary{Count: 100, P50: ms(50), P95: ms(95), P99: ms(99), Max: ms(100), Mean: 50500 * time.Microsecond}
	if got != want {
		t.Errorf("Summarize = %+v, want %+v", got, want)
	}
	if (Summarize(nil) != Summary{}) {
		t.Error("Summarize(nil) is not zero")
	}
}

func TestRunSendsEveryScheduledRequestOnce(t *testing.T) {
	cfg := Config{Rate: 400, Duration: 250 * time.Millisecond, Workers: 4, Offset: 1000}
	var mu sync.Mutex
	seen := map[int]int{}
	res, err := Run(context.Background(), cfg, func(_ context.Context, i int) error {
		mu.Lock()
		seen[i]++
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Requests() != 100 || len(seen) != 100 || res.Requests() != 100 || len(res.Latencies) != 100 {
		t.Fatalf("scheduled %d, sent %d distinct, accounted %d", cfg.Requests(), len(seen), res.Requests())
	}
	for i := 1000; i < 1100; i++ {
		if seen[i] != 1 {
			t.Errorf("request %d sent %d times", i, seen[i])
		}
	}
	if len(res.Errors) != 0 {
		t.Errorf("errors: %v", res.Errors)
	}
	// 100 requests due over 250 ms: the achieved rate is near 400/s.
	if r := res.Rate(); r < 300 || r > 450 {
		t.Errorf("achieved rate %.0f/s, want about 400/s (span %v)", r, res.Span)
	}
}

func TestRunNeverSendsEarly(t *testing.T) {
	cfg := Config{Rate: 200, Duration: 200 * time.Millisecond, Workers: 8}
	var mu sync.Mutex
	sent := map[int]time.Time{}
	if _, err := Run(context.Background(), cfg, func(_ context.Context, i int) error {
		mu.Lock()
		sent[i] = time.Now()
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for k := 1; k < cfg.Requests(); k++ {
		// Request 0 goes at once, so k's send time after it is at least
		// its due offset, less the clock's granularity.
		if gap := sent[k].Sub(sent[0]); gap < dueOffset(k, cfg.Rate)-time.Millisecond {
			t.Errorf("request %d sent %v after request 0, due %v after it", k, gap, dueOffset(k, cfg.Rate))
		}
	}
}

// TestRunCountsQueueingFromTheDueTime is the open-loop property: one slow
// answer holds up the requests behind it, and each of them is charged the
// time it waited, as a closed-loop generator would not.
func TestRunCountsQueueingFromTheDueTime(t *testing.T) {
	cfg := Config{Rate: 100, Duration: 500 * time.Millisecond, Workers: 1}
	res, err := Run(context.Background(), cfg, func(_ context.Context, i int) error {
		if i == 0 {
			time.Sleep(200 * time.Millisecond)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Requests 1..19 fall due every 10 ms while request 0 holds the only
	// worker for 200 ms: request k waits about 200-10k ms.
	slow := 0
	for _, l := range res.Latencies {
		if l >= 50*time.Millisecond {
			slow++
		}
	}
	if slow < 14 {
		t.Errorf("%d requests took 50 ms or more, want at least 14 (queued behind the slow one)", slow)
	}
	if s := Summarize(res.Latencies); s.Max < 190*time.Millisecond {
		t.Errorf("max latency %v, want the 200 ms stall", s.Max)
	}
}

func TestRunCollectsErrors(t *testing.T) {
	boom := errors.New("boom")
	cfg := Config{Rate: 1000, Duration: 50 * time.Millisecond, Workers: 2}
	res, err := Run(context.Background(), cfg, func(_ context.Context, i int) error {
		if i%2 == 1 {
			return boom
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Latencies) != 50 || len(res.Errors) != 25 {
		t.Fatalf("%d answered, %d errors; want 50 and 25", len(res.Latencies), len(res.Errors))
	}
	for _, e := range res.Errors {
		if !errors.Is(e, boom) {
			t.Errorf("error %v", e)
		}
	}
}

func TestRunDrainCancelsWhatIsLeft(t *testing.T) {
	cfg := Config{Rate: 100, Duration: 50 * time.Millisecond, Workers: 1, Drain: 50 * time.Millisecond}
	start := time.Now()
	res, err := Run(context.Background(), cfg, func(ctx context.Context, i int) error {
		if i == 0 {
			<-ctx.Done() // a request that never answers
			return ctx.Err()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Run took %v with a 50 ms drain", took)
	}
	if res.Requests() != cfg.Requests() {
		t.Errorf("accounted %d of %d requests", res.Requests(), cfg.Requests())
	}
	// The stuck request and every one queued behind the single worker.
	if len(res.Errors) != cfg.Requests() || !errors.Is(res.Errors[0], ErrDrain) {
		t.Errorf("errors %v, want all %d drained", res.Errors, cfg.Requests())
	}
}

func TestRunStopsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := Run(ctx, Config{Rate: 10, Duration: time.Minute, Workers: 1}, func(context.Context, int) error { return nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the context's", err)
	}
}

func TestRunRefusesBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Rate: 0, Duration: time.Second, Workers: 1},
		{Rate: 10, Duration: 0, Workers: 1},
		{Rate: 10, Duration: time.Second, Workers: 0},
		{Rate: 1, Duration: 10 * time.Millisecond, Workers: 1},
	} {
		if _, err := Run(context.Background(), cfg, func(context.Context, int) error { return nil }); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
}

func TestMerge(t *testing.T) {
	a := &Results{Latencies: []time.Duration{ms(1)}, Span: time.Second}
	a.Merge(&Results{Latencies: []time.Duration{ms(2), ms(3)}, Errors: []error{ErrDrain}, Span: time.Second})
	if a.Requests() != 4 || a.Rate() != 1.5 {
		t.Errorf("merged: %d requests at %v/s, want 4 at 1.5/s", a.Requests(), a.Rate())
	}
}

func TestRunClosedKeepsEveryWorkerBusy(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]bool{}
	inFlight, maxInFlight := 0, 0
	res, err := RunClosed(context.Background(), 2, 200*time.Millisecond, 0, 500, func(_ context.Context, i int) error {
		mu.Lock()
		seen[i] = true
		inFlight++
		maxInFlight = max(maxInFlight, inFlight)
		mu.Unlock()
		time.Sleep(10 * time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Both workers send at once, and never more than the two: counted by the
	// requests themselves, not by how many a loaded machine managed in 200 ms.
	if maxInFlight != 2 {
		t.Errorf("at most %d requests in flight, want the 2 workers", maxInFlight)
	}
	// Two workers at 10 ms a request cannot answer more than 2×(200/10) in
	// 200 ms, plus the two that may finish after the deadline.
	if n := len(res.Latencies); n < 2 || n > 42 {
		t.Errorf("%d requests answered, want between 2 and 42", n)
	}
	if len(seen) != len(res.Latencies) {
		t.Errorf("%d distinct requests for %d answers", len(seen), len(res.Latencies))
	}
	for i := 500; i < 500+len(seen); i++ {
		if !seen[i] {
			t.Errorf("request %d never sent: numbering must run on from the offset", i)
		}
	}
	for _, l := range res.Latencies {
		if l < 10*time.Millisecond {
			t.Errorf("latency %v below the 10 ms the request took", l)
		}
	}
}

// TestRunClosedDoesNotChargeTheStall is the contrast with
// TestRunCountsQueueingFromTheDueTime: a closed loop simply waits.
func TestRunClosedDoesNotChargeTheStall(t *testing.T) {
	res, err := RunClosed(context.Background(), 1, 300*time.Millisecond, 0, 0, func(_ context.Context, i int) error {
		if i == 0 {
			time.Sleep(200 * time.Millisecond)
		} else {
			time.Sleep(time.Millisecond)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// An open loop would charge the 200 ms stall to the requests queued
	// behind it; a closed loop charges it to the stalled request alone. The
	// bar sits well under 200 ms and far above a 1 ms request on a busy machine.
	slow := 0
	for _, l := range res.Latencies {
		if l >= 150*time.Millisecond {
			slow++
		}
	}
	if slow != 1 {
		t.Errorf("%d requests took 150 ms or more, want only the stalled one", slow)
	}
}

func TestRunClosedRefusesBadConfig(t *testing.T) {
	nop := func(context.Context, int) error { return nil }
	if _, err := RunClosed(context.Background(), 0, time.Second, 0, 0, nop); err == nil {
		t.Error("0 workers accepted")
	}
	if _, err := RunClosed(context.Background(), 1, 0, 0, 0, nop); err == nil {
		t.Error("0 duration accepted")
	}
}

// TestAnsweredSeesEveryAnswerWithItsLatency: the hook gets each answered
// request once, failed ones included, with the latency Results holds.
func TestAnsweredSeesEveryAnswerWithItsLatency(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]time.Duration{}
	var latencies []time.Duration
	cfg := Config{Rate: 400, Duration: 100 * time.Millisecond, Workers: 3, Offset: 7,
		Answered: func(i int, due time.Time, latency time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			if _, dup := seen[i]; dup {
				t.Errorf("request %d reported twice", i)
			}
			if due.IsZero() || latency < 0 {
				t.Errorf("request %d: due %v, latency %v", i, due, latency)
			}
			seen[i] = latency
			latencies = append(latencies, latency)
		}}
	res, err := Run(context.Background(), cfg, func(_ context.Context, i int) error {
		if i%10 == 0 {
			return errors.New("refused")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != cfg.Requests() || len(res.Latencies) != len(seen) {
		t.Fatalf("answered %d, reported %d, scheduled %d", len(res.Latencies), len(seen), cfg.Requests())
	}
	for i := 7; i < 7+cfg.Requests(); i++ {
		if _, ok := seen[i]; !ok {
			t.Errorf("request %d not reported", i)
		}
	}
	slices.Sort(latencies)
	got := slices.Clone(res.Latencies)
	slices.Sort(got)
	if !slices.Equal(latencies, got) {
		t.Errorf("reported latencies differ from the results'")
	}
}
