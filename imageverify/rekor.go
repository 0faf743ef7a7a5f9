package imageverify

import (
	"fmt"
	"net/http"
	"net/url"
	"sync"

	"github.com/go-openapi/runtime"
	httptransport "github.com/go-openapi/runtime/client"
	"github.com/go-openapi/strfmt"
	"github.com/hashicorp/go-retryablehttp"
	rekorgen "github.com/sigstore/rekor/pkg/generated/client"
	"github.com/sigstore/rekor/pkg/util"
)

// logReach records why a transparency log could not be asked: a
// connection that failed, or an answer that is no verdict (429, 5xx).
// cosign folds log errors into its "no matching signatures" text, which
// loses the error chain; without this record an unreachable log would
// read as a verdict on the image (fail) instead of a verification that
// could not run (error, decided by failurePolicy).
type logReach struct {
	inner http.RoundTripper
	mu    sync.Mutex
	err   error
}

func (l *logReach) RoundTrip(req *http.Request) (*http.Response, error) {
	req.Header.Set("User-Agent", "charter")
	resp, err := l.inner.RoundTrip(req)
	switch {
	case err != nil:
		l.record(err)
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		l.record(fmt.Errorf("%s %s: %s", req.Method, req.URL.Redacted(), resp.Status))
	}
	return resp, err
}

func (l *logReach) record(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = err
	}
}

// failure is the first recorded failure, or nil.
func (l *logReach) failure() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// rekorClient is rekor's GetRekorClient with the transport recorded by a
// logReach (rekor's options offer no transport of one's own).
func rekorClient(rekorURL string, transport http.RoundTripper) (*rekorgen.Rekor, *logReach, error) {
	u, err := url.Parse(rekorURL)
	if err != nil {
		return nil, nil, err
	}
	if u.Path == "" {
		u.Path = rekorgen.DefaultBasePath
	}
	reach := &logReach{inner: transport}
	retrying := retryablehttp.NewClient()
	retrying.HTTPClient = &http.Client{Transport: reach}
	// As rekor's client: three immediate retries, no log output.
	retrying.RetryMax, retrying.RetryWaitMin, retrying.RetryWaitMax, retrying.Logger = 3, 0, 0, nil
	rt := httptransport.NewWithClient(u.Host, u.Path, []string{u.Scheme}, retrying.StandardClient())
	rt.Consumers["application/json"] = runtime.JSONConsumer()
	rt.Consumers["application/x-pem-file"] = runtime.TextConsumer()
	rt.Producers["application/json"] = runtime.JSONProducer()
	formats := strfmt.Default
	formats.Add("signedCheckpoint", &util.SignedNote{}, util.SignedCheckpointValidator)
	return rekorgen.New(rt, formats), reach, nil
}
