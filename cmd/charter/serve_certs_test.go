package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/charter-dev/charter/webhook/certs"
)

func TestCertFlags(t *testing.T) {
	for _, tc := range []struct {
		name             string
		args             []string
		wantDelay        time.Duration
		wantGrace        time.Duration
		wantErrSubstring string // empty: parsing succeeds
	}{
		{name: "defaults are the renewer's", wantDelay: certs.DefaultPropagationDelay, wantGrace: certs.DefaultTrimGrace},
		{name: "both set", args: []string{"--cert-propagation-delay=30s", "--cert-trim-grace=1h"}, wantDelay: 30 * time.Second, wantGrace: time.Hour},
		{name: "one set, the other default", args: []string{"--cert-trim-grace", "90s"}, wantDelay: certs.DefaultPropagationDelay, wantGrace: 90 * time.Second},
		{name: "negative delay", args: []string{"--cert-propagation-delay=-5s"}, wantErrSubstring: `"--cert-propagation-delay" flag: must be positive, got -5s`},
		{name: "negative grace", args: []string{"--cert-trim-grace=-1m"}, wantErrSubstring: `"--cert-trim-grace" flag: must be positive, got -1m0s`},
		// The renewer reads zero as its default: refused rather than
		// silently replaced.
		{name: "zero grace", args: []string{"--cert-trim-grace=0s"}, wantErrSubstring: `"--cert-trim-grace" flag: must be positive, got 0s`},
		{name: "not a duration", args: []string{"--cert-propagation-delay=soon"}, wantErrSubstring: `"--cert-propagation-delay" flag`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := pflag.NewFlagSet("serve", pflag.ContinueOnError)
			f.SetOutput(io.Discard)
			var o serveOptions
			addCertFlags(f, &o)
			err := f.Parse(tc.args)
			if tc.wantErrSubstring != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrSubstring) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErrSubstring)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.certPropagationDelay != tc.wantDelay || o.certTrimGrace != tc.wantGrace {
				t.Errorf("propagation delay %s, trim grace %s; want %s, %s", o.certPropagationDelay, o.certTrimGrace, tc.wantDelay, tc.wantGrace)
			}
		})
	}
}

// charter serve has the flags, shows the defaults in its help, and
// refuses a negative value before it contacts any cluster.
func TestServeCertFlags(t *testing.T) {
	serve := newServeCommand()
	for name, want := range map[string]string{"cert-propagation-delay": "5s", "cert-trim-grace": "5m0s"} {
		fl := serve.Flags().Lookup(name)
		if fl == nil {
			t.Fatalf("serve has no --%s", name)
		}
		if fl.DefValue != want {
			t.Errorf("--%s defaults to %s, want %s", name, fl.DefValue, want)
		}
	}

	root := newRootCommand()
	root.SetArgs([]string{"serve", "--kubeconfig=/nonexistent", "--cert-trim-grace=-1s"})
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), "--cert-trim-grace") {
		t.Errorf("charter serve --cert-trim-grace=-1s: %v, want an error naming the flag", err)
	}
}
