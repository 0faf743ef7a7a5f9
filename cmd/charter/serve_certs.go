package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/charter-dev/charter/webhook/certs"
)

// addCertFlags registers the certificate rotation timings of the
// admission controller (certs.Renewer, whose rotation order bundle.go
// explains).
func addCertFlags(f *pflag.FlagSet, o *serveOptions) {
	o.certPropagationDelay = certs.DefaultPropagationDelay
	f.Var(positiveDuration{&o.certPropagationDelay}, "cert-propagation-delay",
		"how long the API server is given to trust a newly published CA before the serving certificate it signed is written; "+
			"raise it if admission calls fail with an unknown authority right after a rotation")
	o.certTrimGrace = certs.DefaultTrimGrace
	f.Var(positiveDuration{&o.certTrimGrace}, "cert-trim-grace",
		"how long after a new serving certificate is issued the webhooks' CA bundle keeps the older CAs, "+
			"so replicas still serving the previous certificate stay trusted; must exceed the time replicas take to load a new one")
}

// positiveDuration is a duration flag that refuses zero and negative
// values. A negative timing means nothing, and the settings it fills read
// zero as "use the default", so a zero given on the command line would
// silently not mean what it says.
type positiveDuration struct{ d *time.Duration }

func (p positiveDuration) String() string {
	if p.d == nil {
		return ""
	}
	return p.d.String()
}

// Set parses s; pflag puts the flag's name in front of the error.
func (p positiveDuration) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if d <= 0 {
		return fmt.Errorf("must be positive, got %s", d)
	}
	*p.d = d
	return nil
}

func (positiveDuration) Type() string { return "duration" }
