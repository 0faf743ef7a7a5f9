package events

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/charter-dev/charter/internal/controlplane"
)

// TestSeriesOnRealAPIServer: the API server takes the series PATCH the
// sink writes for repeats, and the event then reads count N.
func TestSeriesOnRealAPIServer(t *testing.T) {
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "bin", "kube-apiserver")); err != nil {
		t.Skipf("control plane binaries not built (make controlplane): %v", err)
	}
	cp, err := controlplane.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	w, err := NewWriter(cp.RESTConfig(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A loaded CI machine can make the API server slow to answer: more
	// attempts than the default keep the first create from being dropped,
	// and the log says what went wrong if it still is.
	s := NewSink(Options{Writer: w, Workers: 1, SeriesFlush: 50 * time.Millisecond, Attempts: 10,
		Log: testr.NewWithOptions(t, testr.Options{Verbosity: 1})})
	go func() { _ = s.Start(t.Context()) }()

	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	// The API server creates namespace default after it reports ready;
	// an event there before that is refused and its series dropped.
	waitFor(t, "namespace default", func() bool {
		_, err := cs.CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{})
		return err == nil
	})
	pod := corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "default", Name: "web", UID: "pod-uid"}
	ev := List{{Regarding: pod, Reason: ReasonPolicyViolation, Action: ActionNone, Note: "policy p/r fail: m"}}
	for range 5 {
		s.Offer(ev)
	}
	var seen []string
	waitFor(t, "one event with a series of 5", func() bool {
		list, err := cs.EventsV1().Events("default").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		seen = seen[:0]
		for _, e := range list.Items {
			count := int32(1)
			if e.Series != nil {
				count = e.Series.Count
			}
			seen = append(seen, fmt.Sprintf("%s count %d", e.Name, count))
		}
		return len(list.Items) == 1 && list.Items[0].Series != nil && list.Items[0].Series.Count == 5
	}, func() string {
		return fmt.Sprintf("events %v, %d dropped, %d repeats counted", seen, s.Dropped(), s.Repeats())
	})
}
