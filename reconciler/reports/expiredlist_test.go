package reports

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/charter-dev/charter/internal/controlplane"
)

// compactOnContinue compacts etcd to its current revision before it
// forwards the first continuation of a Pod list, as etcd's compaction
// (every 5 minutes) does to a list that outlives it, and counts the 410
// answers.
type compactOnContinue struct {
	next      http.RoundTripper
	etcd      *clientv3.Client
	compacted atomic.Bool
	expired   atomic.Int64
}

func (c *compactOnContinue) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/pods") && req.URL.Query().Get("continue") != "" &&
		c.compacted.CompareAndSwap(false, true) {
		// A write after the list's first page, so that compacting to
		// the current revision drops the one the list was read at.
		put, err := c.etcd.Put(req.Context(), "/charter-test/after-the-first-page", "")
		if err != nil {
			return nil, err
		}
		if _, err := c.etcd.Compact(req.Context(), put.Header.Revision); err != nil {
			return nil, err
		}
	}
	resp, err := c.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusGone {
		c.expired.Add(1)
	}
	return resp, err
}

// TestFirstScanOutlivesAnExpiredList (issue #33: a scan of 50,000 Pods
// took longer than etcd's compaction interval, its list expired after
// 37,500, and the controller reported its first scan done with a quarter
// of the Pods never evaluated): the API server's watch cache is off, so
// every page comes from etcd, and etcd is compacted before the scan's
// first continuation. The list goes on from the API server's token for
// the remainder, and once the controller says its first scan is done,
// every Pod has its report.
func TestFirstScanOutlivesAnExpiredList(t *testing.T) {
	e := startEnv(t, controlplane.WithAPIServerFlag("watch-cache", "false"))
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{e.etcdURL}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = etcd.Close() })
	const namespace, pods = "expired-list", 12
	if _, err := e.cs.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range pods {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("pod-%02d", i)},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
		}
		if _, err := e.cs.CoreV1().Pods(namespace).Create(e.ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.apply("require-team.yaml")
	hook := &compactOnContinue{etcd: etcd}
	e.wrap = func(rt http.RoundTripper) http.RoundTripper { hook.next = rt; return hook }

	e.startController(Options{Admission: NewAdmissionQueue(10), PageSize: 5})

	if !hook.compacted.Load() || hook.expired.Load() == 0 {
		t.Fatalf("etcd compacted before a continuation: %t, 410 answers: %d; the test did not expire the scan's list", hook.compacted.Load(), hook.expired.Load())
	}
	list, err := e.cs.CoreV1().Pods(namespace).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, pod := range list.Items {
		if results, _, err := e.results(namespace, string(pod.UID)); err != nil || len(results) == 0 {
			missing = append(missing, pod.Name)
		}
	}
	if len(missing) > 0 {
		t.Errorf("first scan done, but %d of %d Pods have no report: %v", len(missing), pods, missing)
	}
}
