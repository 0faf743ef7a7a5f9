package server

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/charter-dev/charter/webhook/metrics"
)

// The admission paths are split as controller-runtime splits a webhook:
// the transport here (decoding and size limits, the request timeout,
// request metrics, encoding, panics) wraps a decider per path that only
// decides (validator, mutator in handlers.go).

// decider decides one admission request; the transport has decoded it and
// encodes and measures what it answers.
type decider interface {
	Handle(ctx context.Context, rr reviewRequest) *admissionv1.AdmissionResponse
}

// reviewRequest is a decoded admission request as a decider reads it.
type reviewRequest struct {
	ar *admissionRequest[map[string]any]
	// path is the URL path it came on: a fine-grained path names the
	// policy it serves.
	path string
	// received is when the transport began reading it.
	received time.Time
	// metrics labels the request's metrics.
	metrics metrics.Request
}

// serveAdmission is the transport of an admission path of one webhook
// (metrics.Validating or metrics.Mutating): a malformed or oversized review
// is refused with an HTTP error, any other gets d's decision, encoded and
// counted with its latency.
func (h *handlers) serveAdmission(webhook string, d decider) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		var review unstructuredReview
		if err := decodeReview(r, h.opts.MaxRequestBytes, &review); err != nil {
			writeError(w, err)
			return
		}
		rr := reviewRequest{ar: review.Request, path: r.URL.Path, received: start, metrics: metricsRequest(review.Request, webhook)}
		ctx, cancel := h.requestContext(r)
		defer cancel()
		out := d.Handle(ctx, rr)
		writeResponse(w, out)
		h.opts.Metrics.ObserveRequest(rr.metrics, out.Allowed, time.Since(start))
	}
}

func metricsRequest(ar *admissionRequest[map[string]any], webhook string) metrics.Request {
	return metrics.Request{Kind: ar.Kind.Kind, Namespace: ar.Namespace, Operation: string(ar.Operation), Webhook: webhook, DryRun: ar.dryRun()}
}

// recoverPanics turns a panic in a handler into a 500 naming it, so one bad
// request never takes the connection (or the process) down with it.
func recoverPanics(next http.Handler, log logr.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.Error(fmt.Errorf("%v", v), "panic while handling admission request", "path", r.URL.Path)
				writeError(w, &httpError{code: http.StatusInternalServerError, reason: fmt.Sprintf("internal error handling %s: %v", r.URL.Path, v)})
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// requestContext bounds the evaluation by the server's timeout and the API
// server's ?timeout=, whichever is shorter.
func (h *handlers) requestContext(r *http.Request) (context.Context, context.CancelFunc) {
	timeout := h.opts.RequestTimeout
	if q := r.URL.RawQuery; q != "" {
		if d, err := time.ParseDuration(queryValue(q, "timeout")); err == nil && d > 0 && d < timeout {
			timeout = d
		}
	}
	return context.WithTimeout(r.Context(), timeout)
}

// queryValue is url.ParseQuery(rawQuery).Get(key) without building the
// map of every parameter (the API server sends ?timeout=10s on every
// review): the first value of the first well-formed pair whose unescaped
// key is key, unescaped; "" when there is none. Like ParseQuery, it skips
// pairs holding a semicolon and pairs whose key or value does not
// unescape. A query of many parameters goes to ParseQuery itself, which
// refuses more than its limit (GODEBUG urlmaxqueryparams).
func queryValue(rawQuery, key string) string {
	if strings.Count(rawQuery, "&") >= 64 {
		v, _ := url.ParseQuery(rawQuery)
		return v.Get(key)
	}
	for rawQuery != "" {
		var pair string
		pair, rawQuery, _ = strings.Cut(rawQuery, "&")
		if pair == "" || strings.Contains(pair, ";") {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		k, err := url.QueryUnescape(k)
		if err != nil || k != key {
			continue
		}
		if v, err = url.QueryUnescape(v); err != nil {
			continue
		}
		return v
	}
	return ""
}

// null allows every request without evaluating anything.
func (h *handlers) null(w http.ResponseWriter, r *http.Request) {
	var review rawReview
	if err := decodeReview(r, h.opts.MaxRequestBytes, &review); err != nil {
		writeError(w, err)
		return
	}
	writeResponse(w, allowed(review.Request.UID, nil))
}
