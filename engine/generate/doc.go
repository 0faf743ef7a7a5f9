// Package generate computes the downstream objects of Kyverno generate rules
// (shared/spec/mutate-generate-semantics.md §8): what a rule wants to exist
// for one trigger, as complete objects, with the labels that tie each one to
// its policy, rule, trigger and clone source, and with the rule's
// synchronize and orphan settings. Creating, updating, deleting and watching
// them is a controller's job (reconciler/background); the package is pure:
// no clients, no goroutines. Cluster objects it copies come through
// ClusterObjects.
//
// # Calling it from the engine
//
// Generate is the rule handler for generate rules. The engine core runs its
// shared pipeline first (match/exclude → rule context entries →
// preconditions → exceptions) and, for a rule that passes, calls
//
//	objs, err := generate.Generate(ctx,
//		generate.PolicyRef{Name: policy.GetName(), Namespace: policy.GetNamespace()},
//		rule.src,                     // *kyvernov1.Rule, with Generation set
//		generate.RefOf(triggerObject), // uid "" in the CLI
//		doc,                          // the rule's *jsoncontext.Document
//		generate.Env{Objects: clusterObjects, Elements: elements})
//
// where elements is an Elements that loads a foreach entry's context
// entries with the engine's loaders and evaluates its preconditions with
// the engine's conditions (BasicElements when nil: variable entries only).
// Generate does not evaluate match, exclude, exceptions or the rule's own
// preconditions. Only spec.rules are generate rules: autogen never applies
// to a policy with a generate rule (§7.1).
//
// At compile time, the engine calls Check(rule, CheckOptions{PolicyNamespace:
// ...}) for every generate rule and reports each Fault with the rule's path
// in front ("spec.rules[0]." + fault.Field); Warnings lists what Kyverno
// accepts with a warning.
//
// kyverno test compatibility: Kyverno's CLI calls the generator even for
// rules whose preconditions failed, and then only foreach patterns still
// generate (§9.4, row 50). GeneratesWhenSkipped says which rules do; the
// engine acts on it under engine.WithCLIGeneration, which `charter test`
// sets. A missing clone source is an error for which
// apierrors.IsNotFound is true; the CLI turns it into "no generated
// resource" (§9.4). Objects implements ClusterObjects over a suite's
// cloneSourceResource documents.
//
// # What Generate produces
//
// Variables are substituted in the whole pattern (target apiVersion, kind,
// name and namespace, data, clone, cloneList); then:
//
//   - data: the data body, with metadata.name and metadata.namespace set from
//     the rule (namespace removed for cluster-scoped targets), apiVersion from
//     the rule, kind from the rule only when data has none (row 51), empty
//     maps kept;
//   - clone: a copy of {apiVersion, kind of the target, clone.namespace,
//     clone.name} without uid, selfLink, creationTimestamp, managedFields and
//     resourceVersion, and without ownerReferences when it moves to another
//     namespace; a clone of the target itself is skipped;
//   - cloneList: a copy of every object of the listed kinds in
//     cloneList.namespace matching the selector, each under its own name in
//     the target namespace, sources already there skipped;
//   - foreach: each entry's list is evaluated, elements ascending with
//     element/elementIndex (and element0/elementIndex0), the entry's context
//     and preconditions through Elements, then the entry's own pattern as
//     above. Element errors are joined; successful elements are returned
//     with them.
//
// Every object gets Kyverno's v1.19 labels (labels.go), overwriting labels
// of the same name: managed-by, policy-name/namespace, rule-name, and
// trigger-group/version/kind/namespace/uid (no trigger-name); clones also
// get source-group/version/kind/namespace/uid and clone-source "". The
// source-uid label holds the source's real uid, so a controller can find the
// clones of a source. No object carries a resourceVersion.
//
// # What a controller does with them (§8.5)
//
// Create missing objects (AlreadyExists is fine). For an existing object:
// leave it alone unless Synchronize; with Synchronize, update it when it
// differs. Label the DesiredObject.Source of clones with LabelCloneSource.
// When the trigger goes away (or the rule stops applying), delete
// synchronized downstream objects found by DownstreamLabels; when the
// policy or rule is deleted, delete them unless
// OrphanDownstreamOnPolicyDelete. CloneLabels finds the clones of a source
// that changed or went away.
package generate
