package benchmem

import (
	"os/exec"
	"testing"
	"time"
)

func TestParseStatusSplitsAnonFromFileBacked(t *testing.T) {
	status := []byte("Name:\tcharter\nVmHWM:\t   91000 kB\nVmRSS:\t   90000 kB\nRssAnon:\t    7000 kB\nRssFile:\t   80000 kB\nRssShmem:\t    3000 kB\nThreads:\t5\n")
	got := parseStatus(status)
	if want := (ProcessMemory{Anon: 7000, File: 83000}); got != want {
		t.Fatalf("parseStatus = %+v, want %+v (RssShmem counts as file-backed)", got, want)
	}
	if got.Total() != 90000 {
		t.Fatalf("Total = %d, want 90000", got.Total())
	}
}

func TestSampleProcessSeesAChildsMemory(t *testing.T) {
	cmd := exec.Command("sleep", "0.2")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := SampleProcess(cmd.Process.Pid, time.Millisecond)
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	peak := stop()
	if peak.Anon <= 0 || peak.File <= 0 {
		t.Fatalf("peak = %+v, want resident anonymous and file-backed memory of a running sleep", peak)
	}
}
