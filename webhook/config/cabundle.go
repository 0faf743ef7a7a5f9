package config

import (
	"bytes"
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CABundles reads and writes the caBundle of every webhook in the
// configurations charter manages, apart from the rest of their content.
// The certificate Renewer uses it to make the API server trust a new CA
// before any replica serves a certificate signed by it; the Controller
// writes the same bundle (the CA Secret's) with everything else.
type CABundles struct {
	// Client writes the configurations.
	Client client.Client
	// Reader lists them; nil means Client. An uncached reader sees a
	// publication at once.
	Reader client.Reader
}

func (b CABundles) reader() client.Reader {
	if b.Reader != nil {
		return b.Reader
	}
	return b.Client
}

// Published returns the caBundle of every webhook of charter's
// configurations, one entry per webhook. None (no configuration yet) is
// not an error: nothing calls charter then.
func (b CABundles) Published(ctx context.Context) ([][]byte, error) {
	v, m, err := b.list(ctx)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, cfg := range v.Items {
		for _, w := range cfg.Webhooks {
			out = append(out, w.ClientConfig.CABundle)
		}
	}
	for _, cfg := range m.Items {
		for _, w := range cfg.Webhooks {
			out = append(out, w.ClientConfig.CABundle)
		}
	}
	return out, nil
}

// Publish sets the caBundle of every webhook of charter's configurations
// to bundle, updating only the configurations that differ. A conflicting
// write (the Controller updated one meanwhile) is returned; the caller
// retries.
func (b CABundles) Publish(ctx context.Context, bundle []byte) error {
	v, m, err := b.list(ctx)
	if err != nil {
		return err
	}
	for i := range v.Items {
		cfg := &v.Items[i]
		stale := false
		for j := range cfg.Webhooks {
			stale = setCABundle(&cfg.Webhooks[j].ClientConfig, bundle) || stale
		}
		if stale {
			if err := b.Client.Update(ctx, cfg); err != nil {
				return fmt.Errorf("publishing the CA bundle to ValidatingWebhookConfiguration %s: %w", cfg.Name, err)
			}
		}
	}
	for i := range m.Items {
		cfg := &m.Items[i]
		stale := false
		for j := range cfg.Webhooks {
			stale = setCABundle(&cfg.Webhooks[j].ClientConfig, bundle) || stale
		}
		if stale {
			if err := b.Client.Update(ctx, cfg); err != nil {
				return fmt.Errorf("publishing the CA bundle to MutatingWebhookConfiguration %s: %w", cfg.Name, err)
			}
		}
	}
	return nil
}

// setCABundle sets the bundle and reports whether it changed.
func setCABundle(cc *admissionregistrationv1.WebhookClientConfig, bundle []byte) bool {
	if bytes.Equal(cc.CABundle, bundle) {
		return false
	}
	cc.CABundle = bytes.Clone(bundle)
	return true
}

func (b CABundles) list(ctx context.Context) (*admissionregistrationv1.ValidatingWebhookConfigurationList, *admissionregistrationv1.MutatingWebhookConfigurationList, error) {
	sel := client.MatchingLabels{ManagedByLabel: ManagedByValue}
	var v admissionregistrationv1.ValidatingWebhookConfigurationList
	if err := b.reader().List(ctx, &v, sel); err != nil {
		return nil, nil, fmt.Errorf("listing ValidatingWebhookConfigurations: %w", err)
	}
	var m admissionregistrationv1.MutatingWebhookConfigurationList
	if err := b.reader().List(ctx, &m, sel); err != nil {
		return nil, nil, fmt.Errorf("listing MutatingWebhookConfigurations: %w", err)
	}
	return &v, &m, nil
}
