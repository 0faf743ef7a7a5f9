package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestServeGCSettings(t *testing.T) {
	const limit = 512 << 20
	for _, tc := range []struct {
		name        string
		flag        int
		flagSet     bool
		noAdmission bool
		env         map[string]string
		cgroup      int64 // 0: no cgroup limit
		wantPercent int
		wantSet     bool
		wantLimit   int64
	}{
		{name: "defaults without a container limit", wantPercent: serveGCPercent, wantSet: true},
		{name: "defaults in a container", cgroup: limit, wantPercent: serveGCPercent, wantSet: true, wantLimit: share(limit)},
		{name: "GOGC from the environment stays", env: map[string]string{"GOGC": "150"}, cgroup: limit, wantLimit: share(limit)},
		{name: "the flag beats GOGC", flag: 200, flagSet: true, env: map[string]string{"GOGC": "150"}, wantPercent: 200, wantSet: true},
		{name: "the flag can switch the collector off", flag: -1, flagSet: true, wantPercent: -1, wantSet: true},
		{name: "without admission Go's default stays", noAdmission: true, cgroup: limit, wantLimit: share(limit)},
		{name: "without admission the flag still applies", noAdmission: true, flag: 300, flagSet: true, wantPercent: 300, wantSet: true},
		{name: "GOMEMLIMIT from the environment stays", env: map[string]string{"GOMEMLIMIT": "300MiB"}, cgroup: limit, wantPercent: serveGCPercent, wantSet: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string { return tc.env[k] }
			cgroup := func() (int64, bool) { return tc.cgroup, tc.cgroup > 0 }
			got := serveGCSettings(tc.flag, tc.flagSet, !tc.noAdmission, getenv, cgroup)
			if got.setPercent != tc.wantSet || (tc.wantSet && got.percent != tc.wantPercent) {
				t.Errorf("GOGC: got %d (set %v), want %d (set %v)", got.percent, got.setPercent, tc.wantPercent, tc.wantSet)
			}
			if got.memoryLimit != tc.wantLimit {
				t.Errorf("memory limit: got %d, want %d", got.memoryLimit, tc.wantLimit)
			}
			if got.why == "" {
				t.Error("no explanation for the log")
			}
		})
	}
}

func TestCgroupMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		v2, v1  string // file contents; "" leaves the file out
		want    int64
		wantHas bool
	}{
		{name: "cgroup v2 limit", v2: "536870912\n", want: 536870912, wantHas: true},
		{name: "cgroup v2 without limit", v2: "max\n"},
		{name: "cgroup v1 limit", v1: "268435456\n", want: 268435456, wantHas: true},
		{name: "cgroup v1 without limit", v1: "9223372036854771712\n"},
		{name: "v2 is read before v1", v2: "max\n", v1: "268435456\n"},
		{name: "no cgroup files"},
		{name: "garbage", v2: "lots\n"},
		{name: "zero", v2: "0\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			files := []string{filepath.Join(dir, "memory.max"), filepath.Join(dir, "memory.limit_in_bytes")}
			for i, content := range []string{tc.v2, tc.v1} {
				if content != "" {
					if err := os.WriteFile(files[i], []byte(content), 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			saved := cgroupMemoryLimitFiles
			cgroupMemoryLimitFiles = files
			t.Cleanup(func() { cgroupMemoryLimitFiles = saved })
			got, has := cgroupMemoryLimit()
			if got != tc.want || has != tc.wantHas {
				t.Errorf("got %d, %v; want %d, %v", got, has, tc.want, tc.wantHas)
			}
		})
	}
}

// share is memoryLimitShare of n, computed at run time as serve does.
func share(n int64) int64 { return int64(float64(n) * memoryLimitShare) }
