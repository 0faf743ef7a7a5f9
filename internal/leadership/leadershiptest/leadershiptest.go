// Package leadershiptest takes a Lease from its holder, as another
// replica would once the holder stopped renewing it: the tests of a
// process that must live through a lost Lease.
package leadershiptest

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Thief is the holder TakeLease writes.
const Thief = "thief"

// TakeLease makes Thief hold the Lease namespace/name for an hour: its
// holder fails its next renewals and loses it within its renew deadline,
// and campaigns in vain until the Lease is deleted.
func TakeLease(ctx context.Context, t testing.TB, cs kubernetes.Interface, namespace, name string) {
	t.Helper()
	lease, err := cs.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	thief, hour := Thief, int32(time.Hour/time.Second)
	now := metav1.NowMicro()
	lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds, lease.Spec.AcquireTime, lease.Spec.RenewTime = &thief, &hour, &now, &now
	if _, err := cs.CoordinationV1().Leases(namespace).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("taking the Lease %s/%s: %v", namespace, name, err)
	}
}
