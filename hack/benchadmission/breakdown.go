package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"

	"github.com/charter-dev/charter/webhook/config"
	"github.com/charter-dev/charter/webhook/metrics"
)

// The histograms that split the time charter adds through the API server:
// the API server's wait on charter's webhook (building the AdmissionReview,
// the HTTP round trip, reading the answer) and charter's own handling,
// from the start of HTTP handling to its answer.
const (
	apiserverWebhookDuration = "apiserver_admission_webhook_admission_duration_seconds"
)

// histogramTotal is a histogram's running sum and count, added over the
// series chosen.
type histogramTotal struct {
	sum   float64 // seconds
	count uint64
}

func (h histogramTotal) since(before histogramTotal) histogramTotal {
	return histogramTotal{sum: h.sum - before.sum, count: h.count - before.count}
}

// mean is the average observation; 0 without observations.
func (h histogramTotal) mean() time.Duration {
	if h.count == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.count) * float64(time.Second))
}

// histogramIn adds the sum and count of the series of family name whose
// labels include every pair of match, in a Prometheus text exposition.
func histogramIn(exposition io.Reader, name string, match map[string]string) (histogramTotal, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(exposition)
	if err != nil {
		return histogramTotal{}, fmt.Errorf("reading metrics: %w", err)
	}
	var total histogramTotal
	fam, ok := families[name]
	if !ok {
		return total, nil // nothing observed yet
	}
	for _, m := range fam.GetMetric() {
		if !labelsInclude(m.GetLabel(), match) || m.GetHistogram() == nil {
			continue
		}
		total.sum += m.GetHistogram().GetSampleSum()
		total.count += m.GetHistogram().GetSampleCount()
	}
	return total, nil
}

func labelsInclude(labels []*dto.LabelPair, match map[string]string) bool {
	found := 0
	for _, l := range labels {
		if v, ok := match[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			found++
		}
	}
	return found == len(match)
}

// latencySplit samples both sides' histograms.
type latencySplit struct {
	cs         kubernetes.Interface
	charterURL string // charter's /metrics
	client     *http.Client
}

// sample is one reading of both histograms.
type splitSample struct {
	apiserver, charter histogramTotal
}

func (s *latencySplit) sample(ctx context.Context) (splitSample, error) {
	var out splitSample
	raw, err := s.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return out, fmt.Errorf("kube-apiserver /metrics: %w", err)
	}
	if out.apiserver, err = histogramIn(strings.NewReader(string(raw)), apiserverWebhookDuration,
		map[string]string{"name": config.ValidateWebhookFail}); err != nil {
		return out, fmt.Errorf("kube-apiserver /metrics: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.charterURL, nil)
	if err != nil {
		return out, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return out, fmt.Errorf("charter /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("charter /metrics: HTTP %d", resp.StatusCode)
	}
	if out.charter, err = histogramIn(resp.Body, metrics.AdmissionReviewDuration,
		map[string]string{"resource_kind": "Pod"}); err != nil {
		return out, fmt.Errorf("charter /metrics: %w", err)
	}
	return out, nil
}

// printSplit says where the mean time of a call to charter went between
// two samples.
func printSplit(p *printer, before, after splitSample, conns connCount) {
	api, ch := after.apiserver.since(before.apiserver), after.charter.since(before.charter)
	p.printf("Where a call to charter goes (means over the measured rounds):\n")
	p.printf("  kube-apiserver waited on charter's webhook   %s over %d calls (%s)\n", ms(api.mean()), api.count, apiserverWebhookDuration)
	p.printf("  charter answered, from its HTTP handler      %s over %d reviews (%s)\n", ms(ch.mean()), ch.count, metrics.AdmissionReviewDuration)
	p.printf("  the rest: encoding the review, TLS + HTTP over loopback, decoding the answer   %s\n", ms(api.mean()-ch.mean()))
	p.printf("  connections to charter's port at the end: %s\n\n", conns)
}

// connCount is how many TCP connections a local port had, by state.
type connCount struct {
	established, timeWait int
}

func (c connCount) String() string {
	return fmt.Sprintf("%d established, %d in TIME_WAIT (closed within the last minute)", c.established, c.timeWait)
}

// connectionsTo counts the TCP connections whose local port is port, from
// /proc/net/tcp and tcp6: the API server reusing one HTTP/2 connection
// shows as 1 established and none closed.
func connectionsTo(port int) (connCount, error) {
	var c connCount
	hexPort := fmt.Sprintf("%04X", port)
	for _, path := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(path)
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return c, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			// sl local_address rem_address st ...: charter's side of a
			// connection has the port as its local one; TIME_WAIT stays
			// with whichever side closed first.
			if len(fields) < 4 {
				continue
			}
			local, remote := strings.HasSuffix(fields[1], ":"+hexPort), strings.HasSuffix(fields[2], ":"+hexPort)
			switch st, _ := strconv.ParseUint(fields[3], 16, 8); {
			case st == 0x01 && local:
				c.established++
			case st == 0x06 && (local || remote):
				c.timeWait++
			}
		}
		_ = f.Close()
		if err := sc.Err(); err != nil {
			return c, err
		}
	}
	return c, nil
}
