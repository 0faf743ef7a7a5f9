// Package figures carries one bench run's measurements to make
// bench-scale: each bench (bench-reports, bench-background, benchgitops,
// benchadmission -mode policies) writes the points it measured to the
// file named by its -point-file flag, and hack/benchscale reads them back
// to print the curves. It also reads the local control plane's etcd
// database size from etcd's own metrics.
package figures

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// Point is what one run measured at one size of one curve, e.g. curve
// "reports", size 10000 (Pods), figures {"seconds": 41.2, ...}.
type Point struct {
	Curve   string             `json:"curve"`
	Size    int                `json:"size"`
	Figures map[string]float64 `json:"figures"`
}

// Write writes points to path as JSON; an empty path writes nothing (the
// bench was run by hand).
func Write(path string, points ...Point) error {
	if path == "" {
		return nil
	}
	data, err := json.MarshalIndent(points, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("point file: %w", err)
	}
	return nil
}

// Read reads the points a bench wrote to path.
func Read(path string) ([]Point, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("point file: %w", err)
	}
	var points []Point
	if err := json.Unmarshal(data, &points); err != nil {
		return nil, fmt.Errorf("point file %s: %w", path, err)
	}
	for i, p := range points {
		if p.Curve == "" || p.Size <= 0 {
			return nil, fmt.Errorf("point file %s: point %d: want a curve name and a size above 0, got %q and %d", path, i, p.Curve, p.Size)
		}
	}
	return points, nil
}

// etcd's gauges of its database file: its size, and the part of it in
// use (the rest is free pages a defragmentation would return).
const (
	etcdDBTotal = "etcd_mvcc_db_total_size_in_bytes"
	etcdDBInUse = "etcd_mvcc_db_total_size_in_use_in_bytes"
)

// EtcdDB is the size of etcd's database as its metrics give it.
type EtcdDB struct{ Total, InUse float64 }

// ReadEtcdDB fetches etcdURL/metrics and returns the database size.
func ReadEtcdDB(ctx context.Context, etcdURL string) (EtcdDB, error) {
	if etcdURL == "" {
		return EtcdDB{}, fmt.Errorf("etcd metrics: no etcd address")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(etcdURL, "/")+"/metrics", nil)
	if err != nil {
		return EtcdDB{}, fmt.Errorf("etcd metrics: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return EtcdDB{}, fmt.Errorf("etcd metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return EtcdDB{}, fmt.Errorf("etcd metrics: HTTP %d", resp.StatusCode)
	}
	values, err := gauges(bufio.NewScanner(resp.Body), etcdDBTotal, etcdDBInUse)
	if err != nil {
		return EtcdDB{}, fmt.Errorf("etcd metrics: %w", err)
	}
	return EtcdDB{Total: values[etcdDBTotal], InUse: values[etcdDBInUse]}, nil
}

// gauges reads the unlabelled samples of the named metrics from a
// Prometheus text exposition; it fails when one of them is missing.
func gauges(sc *bufio.Scanner, names ...string) (map[string]float64, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !want[name] {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a number", name, value)
		}
		out[name] = v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return nil, fmt.Errorf("%s not among the metrics", n)
		}
	}
	return out, nil
}

// Issue 33's goal for reports in PostgreSQL against reports in etcd: the
// bytes the reports add to etcd's database at least 70% fewer (Kyverno's
// reports-server published 70.1%), the time to every report no longer.
const StoreEtcdBytesCut = 0.70

// StoreComparison reads a reports-store point's figures (bench-reports
// -stores etcd,postgres: each figure prefixed with its store) and returns
// how much less etcd the reports took in PostgreSQL (1 - postgres/etcd of
// reports_etcd_bytes; 0 when reports in etcd added nothing) and the time
// to every report in PostgreSQL over the time in etcd.
func StoreComparison(figs map[string]float64) (etcdBytesCut, timeRatio float64) {
	if etcd := figs["etcd_reports_etcd_bytes"]; etcd > 0 {
		etcdBytesCut = 1 - figs["postgres_reports_etcd_bytes"]/etcd
	}
	if etcd := figs["etcd_seconds"]; etcd > 0 {
		timeRatio = figs["postgres_seconds"] / etcd
	}
	return etcdBytesCut, timeRatio
}
