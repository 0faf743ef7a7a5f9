package figures

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestWriteRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "points.json")
	want := []Point{
		{Curve: "reports", Size: 1000, Figures: map[string]float64{"seconds": 4.5}},
		{Curve: "reports", Size: 10000, Figures: map[string]float64{"seconds": 41}},
	}
	if err := Write(path, want...); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read %+v, want %+v", got, want)
	}
}

func TestWriteNowhere(t *testing.T) {
	if err := Write("", Point{Curve: "x", Size: 1}); err != nil {
		t.Fatal(err)
	}
}

func TestReadRefuses(t *testing.T) {
	for _, tc := range []struct{ name, content, want string }{
		{"not JSON", "{", "point file"},
		{"no curve", `[{"size": 3}]`, "point 0: want a curve name"},
		{"no size", `[{"curve": "gitops"}]`, "point 0: want a curve name and a size above 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "p.json")
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Read(path); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestReadEtcdDB serves etcd's exposition format (testdata) and wants the
// two database gauges, not a metric whose name merely starts like one.
func TestReadEtcdDB(t *testing.T) {
	data, err := os.ReadFile("testdata/etcd-metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
	}))
	defer srv.Close()
	got, err := ReadEtcdDB(context.Background(), srv.URL+"/")
	if err != nil {
		t.Fatal(err)
	}
	if want := (EtcdDB{Total: 24576000, InUse: 16384000}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestReadEtcdDBMissingGauge(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("etcd_mvcc_db_total_size_in_bytes 10\n"))
	}))
	defer srv.Close()
	_, err := ReadEtcdDB(context.Background(), srv.URL)
	if err == nil || !strings.Contains(err.Error(), "etcd_mvcc_db_total_size_in_use_in_bytes not among the metrics") {
		t.Fatalf("err = %v, want one naming the missing gauge", err)
	}
	if _, err := ReadEtcdDB(context.Background(), ""); err == nil {
		t.Fatal("no address: want an error")
	}
}
