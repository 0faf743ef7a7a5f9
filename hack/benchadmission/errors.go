package main

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/charter-dev/charter/hack/benchadmission/loadgen"
)

// errorKind sorts failed requests for the report.
type errorKind string

const (
	// kindTransport: the request never got an HTTP answer.
	kindTransport errorKind = "transport"
	// kindHTTP: an answer other than 200 with an AdmissionReview.
	kindHTTP errorKind = "non-200"
	// kindAPI: the API server failed the request for another reason than
	// charter's decision.
	kindAPI errorKind = "API error"
	// kindWrong: a non-compliant Pod allowed or a compliant Pod denied.
	kindWrong errorKind = "wrong decision"
	// kindUnanswered: still queued or in flight when the run ended.
	kindUnanswered errorKind = "unanswered"
)

// requestError is one failed request.
type requestError struct {
	kind errorKind
	msg  string
}

func (e *requestError) Error() string { return string(e.kind) + ": " + e.msg }

func failed(kind errorKind, format string, a ...any) error {
	return &requestError{kind: kind, msg: fmt.Sprintf(format, a...)}
}

// errorBreakdown counts errors by kind and keeps the first message of
// each, e.g. "2 wrong decision (first: compliant Pod restricted denied)".
func errorBreakdown(errs []error) string {
	counts := map[errorKind]int{}
	first := map[errorKind]string{}
	for _, err := range errs {
		kind, msg := kindTransport, err.Error()
		var re *requestError
		switch {
		case errors.Is(err, loadgen.ErrDrain):
			kind = kindUnanswered
		case errors.As(err, &re):
			kind, msg = re.kind, re.msg
		}
		if counts[kind] == 0 {
			first[kind] = msg
		}
		counts[kind]++
	}
	kinds := make([]string, 0, len(counts))
	for k := range counts {
		kinds = append(kinds, string(k))
	}
	sort.Strings(kinds)
	parts := make([]string, 0, len(kinds))
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%d %s (first: %s)", counts[errorKind(k)], k, oneLine(first[errorKind(k)], 160)))
	}
	return strings.Join(parts, "; ")
}

// oneLine flattens a message and cuts it to at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
