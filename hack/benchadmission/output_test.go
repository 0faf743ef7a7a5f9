package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/charter-dev/charter/hack/benchadmission/loadgen"
)

func TestTableAlignsColumnsOnPlainText(t *testing.T) {
	for _, color := range []bool{false, true} {
		var buf bytes.Buffer
		p := &printer{w: &buf, color: color}
		p.table([]string{"WEBHOOK", "P99", "ERRORS"}, [][]string{
			{"null", "1.60ms", "0"},
			{"charter", "12.3ms", "12"},
		})
		out := buf.String()
		if color != strings.Contains(out, "\033[") {
			t.Errorf("color=%v but escape codes present=%v:\n%q", color, !color, out)
		}
		plain := strings.NewReplacer(bold, "", reset, "").Replace(out)
		want := "WEBHOOK   P99      ERRORS\n" +
			"null      1.60ms   0\n" +
			"charter   12.3ms   12\n"
		if plain != want {
			t.Errorf("color=%v: table\n%s\nwant\n%s", color, plain, want)
		}
	}
}

func TestVerdictColoursOnlyOnATerminal(t *testing.T) {
	var buf bytes.Buffer
	(&printer{w: &buf}).verdict("p99 ratio", "1.20x", "target ≤ 1.5x", true)
	(&printer{w: &buf}).verdict("errors", "3", "target 0", false)
	if out := buf.String(); strings.Contains(out, "\033[") || !strings.Contains(out, " met\n") || !strings.Contains(out, " MISSED\n") {
		t.Errorf("plain verdicts:\n%q", out)
	}
	buf.Reset()
	(&printer{w: &buf, color: true}).verdict("errors", "3", "target 0", false)
	if !strings.Contains(buf.String(), red+"MISSED"+reset) {
		t.Errorf("coloured verdict: %q", buf.String())
	}
}

func TestMS(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{1600 * time.Microsecond, "1.60ms"},
		{412 * time.Microsecond, "0.41ms"},
		{12345 * time.Microsecond, "12.3ms"},
		{2500 * time.Millisecond, "2.50s"},
		{0, "0.00ms"},
	}
	for _, tt := range tests {
		if got := ms(tt.d); got != tt.want {
			t.Errorf("ms(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
	if got := signedMS(-1500 * time.Microsecond); got != "-1.50ms" {
		t.Errorf("signedMS(-1.5ms) = %q", got)
	}
	if got := signedMS(300 * time.Microsecond); got != "+0.30ms" {
		t.Errorf("signedMS(0.3ms) = %q", got)
	}
}

func TestErrorBreakdown(t *testing.T) {
	errs := []error{
		failed(kindWrong, "compliant Pod restricted denied"),
		failed(kindHTTP, "HTTP 500: boom"),
		failed(kindWrong, "non-compliant Pod privileged allowed"),
		fmt.Errorf("%w: context canceled", loadgen.ErrDrain),
		errors.New("dial tcp: refused"),
	}
	got := errorBreakdown(errs)
	want := "1 non-200 (first: HTTP 500: boom); 1 transport (first: dial tcp: refused); " +
		"1 unanswered (first: still queued or in flight when the drain time ran out: context canceled); " +
		"2 wrong decision (first: compliant Pod restricted denied)"
	if got != want {
		t.Errorf("errorBreakdown =\n%s\nwant\n%s", got, want)
	}
}

func TestOneLine(t *testing.T) {
	if got := oneLine("a\n\n  b\tc", 10); got != "a b c" {
		t.Errorf("oneLine = %q", got)
	}
	if got := oneLine("abcdefghij", 5); got != "abcd…" {
		t.Errorf("oneLine cut = %q", got)
	}
}

func TestOptionsValidate(t *testing.T) {
	good := directOptions{rates: []float64{1000, 3000}, duration: 20 * time.Second, rounds: 4, workers: 64, noncompliant: 0.5}
	if err := good.validate(); err != nil {
		t.Errorf("good direct options: %v", err)
	}
	bad := good
	bad.rates, bad.rounds, bad.noncompliant = []float64{0}, 0, 2
	err := bad.validate()
	for _, flag := range []string{"-rate", "-rounds", "-noncompliant"} {
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("bad direct options: error %v does not name %s", err, flag)
		}
	}
	api := apiOptions{rate: 100, clients: 50, duration: 16 * time.Second, rounds: 4}
	if err := api.validate(); err != nil {
		t.Errorf("good apiserver options: %v", err)
	}
	closed := api
	closed.rate = 0
	if err := closed.validate(); err != nil {
		t.Errorf("-api-rate 0 (closed loop) refused: %v", err)
	}
	closed.rate = -1
	if err := closed.validate(); err == nil || !strings.Contains(err.Error(), "-api-rate") {
		t.Errorf("negative -api-rate: %v", err)
	}
	api.clients, api.rounds = 0, 0
	if err := api.validate(); err == nil || !strings.Contains(err.Error(), "-api-clients") || !strings.Contains(err.Error(), "-api-rounds") {
		t.Errorf("bad apiserver options: %v", err)
	}
}
