package review

import (
	"time"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/loader"
)

// Options are what one evaluation was asked for (the engine's EvalOptions).
type Options struct {
	Loaders loader.Loaders
	Values  Values
	// MutateExisting runs mutate.targets rules (see WithMutateExisting).
	MutateExisting bool
	// CLIGeneration generates for skipped foreach rules (see
	// WithCLIGeneration).
	CLIGeneration bool
	// ImagesVerifiedSince refuses cached image verifications older than
	// it (see WithImagesVerifiedSince).
	ImagesVerifiedSince time.Time
	// ImageDigestPins makes Mutate pin ImageValidatingPolicies' images
	// (see WithImageDigestPins).
	ImageDigestPins bool
	// DeferRequiredImages leaves `required` to SettleRequiredImages (see
	// WithDeferredRequiredImages).
	DeferRequiredImages bool
	// BackgroundChecks stops generate and mutate-existing rules after
	// their match and preconditions (see WithBackgroundChecks).
	BackgroundChecks bool
	// WebhookConditionsMet skips the policies' webhook matchConditions
	// (see WithWebhookConditionsMet).
	WebhookConditionsMet bool
	// MutationScan makes Validate report MutatingPolicies (see
	// WithMutationScan).
	MutationScan bool
}

// Values pins variables to fixed values instead of computing or loading
// them, the way Kyverno's CLI values file does (test-format.md "Values
// file"). Any method may return nil.
//
// Keys are dotted variable paths ("request.operation",
// "podprioritydict.data.default", "imageData.configData.created"): each
// value is set at its path, merged into what is there. A context entry
// named by a key (or by the first segment of one) is not loaded, so values
// stand in for configMap, apiCall, imageRegistry and globalReference
// entries and may build only part of one; variable entries are still
// evaluated after the values and overwrite them, as in Kyverno's CLI.
type Values interface {
	// Variables returns variables to set in the context document before the
	// policy's rules run for this resource: the values file's globalValues
	// overlaid with policies[].resources[].values. Kyverno's CLI matches
	// resources by name only.
	Variables(policy kyvernov1.PolicyInterface, resource ResourceRef) map[string]any
	// ContextEntries returns the variables to set before the rule's context
	// entries load (policies[].rules[].values). rule is the rule's own
	// name; for an autogen rule ("autogen-x", "autogen-cronjob-x") an
	// implementation may fall back to the values of its source rule, as
	// values files name the rules written in the policy.
	ContextEntries(policy kyvernov1.PolicyInterface, rule string) map[string]any
	// ForeachElements returns per-element variables of the rule's foreach
	// entries (policies[].rules[].foreachValues): for the element at index
	// i of any foreach list of the rule (validate, mutate or generate, at
	// any nesting depth), each key is set to its i-th value after the
	// element's context entries load. The lists being iterated are not
	// replaced. A list with no i-th value makes the element an error.
	ForeachElements(policy kyvernov1.PolicyInterface, rule string) map[string][]any
}
