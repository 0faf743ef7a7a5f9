package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/clusterstate/policycheck"
	"github.com/charter-dev/charter/engine/convert"
	"github.com/charter-dev/charter/internal/clitest"
	"github.com/charter-dev/charter/internal/clitest/manifest"
	"github.com/charter-dev/charter/internal/convertverify"
	"github.com/charter-dev/charter/internal/printer"
)

func newConvertCommand() *cobra.Command {
	var (
		output   string
		partial  bool
		verify   bool
		check    bool
		fileName string
		registry string
	)
	cmd := &cobra.Command{
		Use:   "convert FILE|DIR...",
		Short: "Convert ClusterPolicies and Policies to Kyverno's CEL policy kinds, and prove the result equal",
		Long: `Convert kyverno.io ClusterPolicies and Policies into policies.kyverno.io
kinds: validate rules become a ValidatingPolicy (a Policy becomes a
NamespacedValidatingPolicy), mutate rules a MutatingPolicy, generate rules
a GeneratingPolicy, verifyImages rules an ImageValidatingPolicy each.
Rules that share match, preconditions and failure action become one
policy; others one policy each, named <policy>-<rule>.

Directories are read recursively (hidden folders such as .kyverno-test
skipped). What cannot convert is listed per rule with the reason, and that
policy is not written unless --partial.

Output: a table (policy, rules, converted, reasons) by default; -o yaml or
-o json prints the converted policies; -o DIR writes them to DIR, each
source file's policies to the same relative path.

--verify finds the kyverno-test.yaml suites under the arguments and, for
each converted policy a suite names, runs the suite's resources (with its
values, user info and cluster resources) through the original and through
the conversion, and requires the same verdict for every resource and
operation. A policy's verdict is its first failing or erroring rule, else
pass if a rule passed, else skip (not matching at all counts as skip). The
table gains a VERDICTS EQUAL column and the mismatches are listed.

A verifyImages rule becomes an ImageValidatingPolicy; --verify verifies
the suite's images against their registries (or --registry) for both
forms, each image pinned to its digest as admission pins it.

--check exits 1 when a policy does not convert cleanly (or, with
--verify, when a verdict differs): for CI.`,
		Example: `  charter convert policies/
  charter convert --verify policies/
  charter convert --verify -o converted/ policies/
  charter convert -o yaml policies/best-practices/disallow-latest-tag/disallow-latest-tag.yaml`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, paths []string) error {
			files, err := manifest.Files(paths)
			if err != nil {
				return err
			}
			var sources []convertSource
			var exceptions []exceptionSource
			for _, f := range files {
				docs, err := manifest.ReadFile(f)
				if err != nil {
					return err
				}
				pf, err := manifest.DecodePolicies(kubernetesObjects(docs))
				if err != nil {
					return fmt.Errorf("%s: %w", f, err)
				}
				for _, p := range pf.Policies {
					if k := p.GetKind(); k == "ClusterPolicy" || k == "Policy" {
						r := convert.Convert(p)
						r.File = f
						sources = append(sources, convertSource{file: f, result: r})
					}
				}
				for _, ex := range pf.Exceptions {
					exceptions = append(exceptions, exceptionSource{file: f, exception: ex})
				}
				cleanups, err := cleanupPolicies(docs)
				if err != nil {
					return err
				}
				for _, c := range cleanups {
					r := convert.ConvertCleanup(c)
					r.File = f
					sources = append(sources, convertSource{file: f, result: r})
				}
			}
			if len(sources) == 0 && len(exceptions) == 0 {
				return fmt.Errorf("no ClusterPolicy, Policy, cleanup policy or kyverno.io PolicyException found under %s", strings.Join(paths, ", "))
			}
			// Exceptions name the converted policies that hold their rules.
			converted := map[string]*convert.Result{}
			for _, s := range sources {
				converted[s.result.Key()] = s.result
			}
			for _, e := range exceptions {
				r := convert.ConvertException(e.exception, converted)
				r.File = e.file
				sources = append(sources, convertSource{file: e.file, result: r})
			}
			var verifications map[string]*convertverify.Verification
			if verify {
				results := map[string]*convert.Result{}
				for _, s := range sources {
					if (s.result.Clean() || partial) && s.result.Source != nil {
						results[s.result.SourceKey()] = s.result
					}
				}
				// Images are pinned to their digest as admission pins them
				// for an ImageValidatingPolicy (its mutating webhook) and
				// for a verifyImages rule.
				runner := clitest.NewRunner(clitest.Options{FileName: fileName, ImageVerifier: cliImageVerifier(registry), ImageDigestPins: true})
				v := &convertverify.Verifier{Runner: runner, FileName: fileName}
				verifications, err = v.Verify(cmd.Context(), paths, results)
				if err != nil {
					return err
				}
			}
			out := cmd.OutOrStdout()
			switch output {
			case "":
				if err := convertTable(out, sources, verifications, verify); err != nil {
					return err
				}
			case "json", "yaml":
				if err := printConverted(out, cmd.ErrOrStderr(), output, sources, partial); err != nil {
					return err
				}
			default:
				if err := writeConverted(output, paths, sources, partial); err != nil {
					return err
				}
				if err := convertTable(out, sources, verifications, verify); err != nil {
					return err
				}
			}
			if check && !allClean(sources, verifications, verify) {
				return exitError{code: 1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&output, "output", "o", "", "json|yaml to print the converted policies, or a directory to write them to (default: a table)")
	f.BoolVar(&partial, "partial", false, "write a policy's converted rules even when some did not convert")
	f.BoolVar(&verify, "verify", false, "run the kyverno-test.yaml suites found under the arguments on both forms and compare verdicts")
	f.BoolVar(&check, "check", false, "exit 1 when a policy does not convert cleanly (with --verify: or a verdict differs)")
	f.StringVarP(&fileName, "file-name", "f", clitest.DefaultFileName, "name of the test files --verify looks for")
	f.StringVar(&registry, "registry", "", "with --verify: "+registryFlagHelp)
	return cmd
}

type convertSource struct {
	file   string
	result *convert.Result
}

type exceptionSource struct {
	file      string
	exception *kyvernov2.PolicyException
}

func allClean(sources []convertSource, verifications map[string]*convertverify.Verification, verify bool) bool {
	for _, s := range sources {
		if !s.result.Clean() {
			return false
		}
		if v := verifications[s.result.SourceKey()]; verify && v != nil && !v.Equal() {
			return false
		}
	}
	return true
}

func convertTable(w io.Writer, sources []convertSource, verifications map[string]*convertverify.Verification, verify bool) error {
	headers := []string{"POLICY", "RULES", "CONVERTED", "OUTPUT"}
	if verify {
		headers = append(headers, "VERDICTS EQUAL")
	}
	headers = append(headers, "REASON")
	t := printer.NewTable(headers...)
	clean, equal, verified := 0, 0, 0
	var mismatches []convertverify.Mismatch
	for _, s := range sources {
		r := s.result
		rules := r.Rules()
		failed := map[string]bool{}
		for _, p := range r.Problems {
			if p.Rule != "" {
				failed[p.Rule] = true
			}
		}
		converted := rules - len(failed)
		if !r.Clean() && len(failed) == 0 {
			converted = 0
		}
		kinds := outputSummary(r.Outputs)
		if r.Clean() {
			clean++
		}
		row := []string{policyName(r), strconv.Itoa(rules), strconv.Itoa(converted), kinds}
		if verify {
			cell := "-"
			if v := verifications[r.SourceKey()]; v != nil {
				verified++
				switch {
				case v.Equal():
					equal++
					cell = fmt.Sprintf("yes (%d)", v.Compared)
				case len(v.Errors) > 0:
					cell = "error: " + v.Errors[0]
				default:
					cell = fmt.Sprintf("no (%d of %d differ)", len(v.Mismatches), v.Compared)
				}
				mismatches = append(mismatches, v.Mismatches...)
			} else if r.Clean() && r.Source != nil {
				cell = "no test"
			}
			row = append(row, cell)
		}
		var reasons []string
		for _, p := range r.Problems {
			reasons = append(reasons, p.String())
		}
		row = append(row, strings.Join(reasons, "; "))
		t.Add(row...)
	}
	if err := t.Write(w, false); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nConverted cleanly: %d of %d policies", clean, len(sources))
	if verify {
		fmt.Fprintf(w, "; verdicts equal: %d of %d verified", equal, verified)
	}
	fmt.Fprintln(w)
	for _, m := range mismatches {
		fmt.Fprintf(w, "DIFFERS %s %s %s (%s): original %s, converted %s [%s]\n", m.Suite, m.Policy, m.Resource, m.Operation, m.Original, m.Converted, m.Detail)
	}
	return nil
}

func policyName(r *convert.Result) string { return r.Name() }

func printConverted(w, errw io.Writer, format string, sources []convertSource, partial bool) error {
	var objs []map[string]any
	var written []*convert.Result
	for _, s := range sources {
		r := s.result
		for _, p := range r.Problems {
			fmt.Fprintf(errw, "%s: %s: %s\n", s.file, policyName(r), p)
		}
		if !r.Clean() && !partial {
			continue
		}
		written = append(written, r)
		for _, o := range r.Outputs {
			m, err := convert.ObjectMap(o.Object)
			if err != nil {
				return err
			}
			objs = append(objs, m)
		}
	}
	if format == "yaml" {
		b, err := yamlStream(written)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	if len(objs) == 1 {
		return printer.WriteObject(w, "json", objs[0])
	}
	return printer.WriteObject(w, "json", map[string]any{"apiVersion": "v1", "kind": "List", "items": objs})
}

// yamlStream renders the results' policies as one YAML stream.
func yamlStream(results []*convert.Result) ([]byte, error) {
	var out []byte
	for _, r := range results {
		b, err := r.YAML()
		if err != nil {
			return nil, err
		}
		if len(out) > 0 && len(b) > 0 {
			out = append(out, "---\n"...)
		}
		out = append(out, b...)
	}
	return out, nil
}

// writeConverted writes each source file's converted policies to the same
// path relative to the argument it was found under, in dir.
func writeConverted(dir string, roots []string, sources []convertSource, partial bool) error {
	byFile := map[string][]*convert.Result{}
	var order []string
	for _, s := range sources {
		if !s.result.Clean() && !partial || len(s.result.Outputs) == 0 {
			continue
		}
		if _, ok := byFile[s.file]; !ok {
			order = append(order, s.file)
		}
		byFile[s.file] = append(byFile[s.file], s.result)
	}
	for _, f := range order {
		b, err := yamlStream(byFile[f])
		if err != nil {
			return err
		}
		target := filepath.Join(dir, relativeTo(roots, f))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(target, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func relativeTo(roots []string, file string) string {
	for _, r := range roots {
		if info, err := os.Stat(r); err == nil && info.IsDir() {
			if rel, err := filepath.Rel(r, file); err == nil && !strings.HasPrefix(rel, "..") {
				return rel
			}
		}
	}
	return filepath.Base(file)
}

// kubernetesObjects drops documents that are not Kubernetes objects (no
// apiVersion or kind), such as the artifacthub-pkg.yml files policy
// libraries keep beside their policies.
func kubernetesObjects(docs []manifest.Document) []manifest.Document {
	var out []manifest.Document
	for _, d := range docs {
		if apiVersion, kind := d.TypeMeta(); apiVersion != "" && kind != "" {
			out = append(out, d)
		}
	}
	return out
}

// outputSummary names the kinds written and how many of each:
// "ValidatingPolicy", "2 ValidatingPolicy".
func outputSummary(outputs []convert.Output) string {
	count := map[string]int{}
	var kinds []string
	for _, o := range outputs {
		if count[o.Kind] == 0 {
			kinds = append(kinds, o.Kind)
		}
		count[o.Kind]++
	}
	for i, k := range kinds {
		if count[k] > 1 {
			kinds[i] = strconv.Itoa(count[k]) + " " + k
		}
	}
	return strings.Join(kinds, ", ")
}

// cleanupPolicies decodes the kyverno.io cleanup policies among docs
// (ClusterCleanupPolicies and CleanupPolicies: the kind table's
// cleanup kinds of that group).
func cleanupPolicies(docs []manifest.Document) ([]kyvernov2.CleanupPolicyInterface, error) {
	var out []kyvernov2.CleanupPolicyInterface
	for _, d := range docs {
		apiVersion, kind := d.TypeMeta()
		group, _, _ := strings.Cut(apiVersion, "/")
		if group != kyvernov2.GroupVersion.Group {
			continue
		}
		k, ok := policycheck.Lookup(group, kind)
		if !ok || k.Role != policycheck.RoleCleanup {
			continue
		}
		p, ok := k.New().(kyvernov2.CleanupPolicyInterface)
		if !ok {
			continue
		}
		if err := manifest.DecodeDocument(d, p); err != nil {
			return nil, err
		}
		if k.Namespaced && p.GetNamespace() == "" {
			p.SetNamespace("default")
		}
		out = append(out, p)
	}
	return out, nil
}
