package config

import (
	"context"
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func TestCABundlesPublish(t *testing.T) {
	managed := map[string]string{ManagedByLabel: ManagedByValue}
	validating := func(name string, labels map[string]string, bundles ...string) *admissionregistrationv1.ValidatingWebhookConfiguration {
		c := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		for i, b := range bundles {
			c.Webhooks = append(c.Webhooks, admissionregistrationv1.ValidatingWebhook{Name: name + string(rune('a'+i)),
				ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: []byte(b)}})
		}
		return c
	}
	mutating := func(name string, bundles ...string) *admissionregistrationv1.MutatingWebhookConfiguration {
		c := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: managed}}
		for i, b := range bundles {
			c.Webhooks = append(c.Webhooks, admissionregistrationv1.MutatingWebhook{Name: name + string(rune('a'+i)),
				ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: []byte(b)}})
		}
		return c
	}

	tests := []struct {
		name          string
		objects       []client.Object
		wantPublished []string // before, sorted
		wantUpdated   []string
	}{{
		name:    "no configuration yet",
		objects: nil,
	}, {
		name:          "every webhook of a stale configuration",
		objects:       []client.Object{validating("v", managed, "old", "new"), mutating("m", "new")},
		wantPublished: []string{"new", "new", "old"},
		wantUpdated:   []string{"v"},
	}, {
		name:          "nothing when all carry it",
		objects:       []client.Object{validating("v", managed, "new"), mutating("m", "new", "new")},
		wantPublished: []string{"new", "new", "new"},
	}, {
		name:          "someone else's configuration is neither read nor written",
		objects:       []client.Object{validating("theirs", nil, "theirs"), mutating("m", "")},
		wantPublished: []string{""},
		wantUpdated:   []string{"m"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var updated []string
			cl := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(tt.objects...).
				WithInterceptorFuncs(interceptor.Funcs{Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
					updated = append(updated, obj.GetName())
					return c.Update(ctx, obj, opts...)
				}}).Build()
			b := CABundles{Client: cl}
			ctx := context.Background()
			published, err := b.Published(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := sortedStrings(published); !slices.Equal(got, tt.wantPublished) {
				t.Errorf("Published = %q, want %q", got, tt.wantPublished)
			}
			if err := b.Publish(ctx, []byte("new")); err != nil {
				t.Fatal(err)
			}
			slices.Sort(updated)
			if !slices.Equal(updated, tt.wantUpdated) {
				t.Errorf("updated %q, want %q", updated, tt.wantUpdated)
			}
			after, err := b.Published(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, got := range after {
				if string(got) != "new" {
					t.Errorf("after Publish a webhook carries %q", got)
				}
			}
			var theirs admissionregistrationv1.ValidatingWebhookConfiguration
			if err := cl.Get(ctx, client.ObjectKey{Name: "theirs"}, &theirs); err == nil && string(theirs.Webhooks[0].ClientConfig.CABundle) != "theirs" {
				t.Error("someone else's configuration was rewritten")
			}
		})
	}
}

func sortedStrings(bs [][]byte) []string {
	var out []string
	for _, b := range bs {
		out = append(out, string(b))
	}
	slices.Sort(out)
	return out
}
