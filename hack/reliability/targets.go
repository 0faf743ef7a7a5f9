package main

// fuzzTarget is one fuzz function of the repository. The quick target is
// the one the short mode fuzzes: its package is small, so the fuzzer's
// instrumented build and its executions are fast.
type fuzzTarget struct {
	pkg, name string
	quick     bool
}

// fuzzTargets is every fuzz function in the repository
// (TestEveryFuzzTargetIsListed keeps it so), by what it feeds.
var fuzzTargets = []fuzzTarget{
	// AdmissionReview decoding and every admission path.
	{pkg: "./webhook/server", name: "FuzzDecodeReview"},
	{pkg: "./webhook/server", name: "FuzzHandlers"},
	{pkg: "./webhook/server", name: "FuzzAppendJSONString"},
	// Policy decoding and Compile, every kind: the GitOps check (the one
	// policy admission makes) and the CLI's decoding.
	{pkg: "./reconciler/gitsync/check", name: "FuzzObjects"},
	{pkg: "./internal/clitest", name: "FuzzDecodePolicies"},
	// kyverno-test.yaml decoding.
	{pkg: "./internal/clitest", name: "FuzzDecodeTest"},
	// Kustomize input of a revision.
	{pkg: "./reconciler/gitsync/build", name: "FuzzBuild"},
	// CEL evaluation with hostile objects and cost limits.
	{pkg: "./engine", name: "FuzzCELValidation"},
	// Patterns and anchors.
	{pkg: "./engine/pattern", name: "FuzzValidate", quick: true},
	{pkg: "./engine/pattern", name: "FuzzStringPattern"},
	{pkg: "./engine/mutate", name: "FuzzStrategicMerge"},
	{pkg: "./engine/wildcard", name: "FuzzMatch"},
	{pkg: "./engine/conditions", name: "FuzzEvaluate"},
	{pkg: "./engine/conditions", name: "FuzzMayBeDuration"},
	// JMESPath and variable substitution.
	{pkg: "./engine/jmespath", name: "FuzzSearch"},
	{pkg: "./engine/jmespath", name: "FuzzFastMatchesLibrary"},
	{pkg: "./engine/variables", name: "FuzzSubstitute"},
}

// part is a set of tests that report figures (internal/reliability).
// short parts run in the short mode too, each of their tests in a process
// of its own, all at once.
type part struct {
	name    string
	pkg     string
	tests   []string
	target  string
	timeout string
	short   bool
}

// parts are the bad input, fault and overload measurements. Each test
// reports its figures through internal/reliability; the target here is
// the row printed when a test fails before it reports one.
var parts = []part{
	// Bad input corpus (internal/reliability/testdata/badinput), and the
	// faults cheap enough for the short mode (CI's minute). Each test
	// starts a control plane of its own.
	{name: "bad input: admission; fault: charter absent", pkg: "./webhook/admission",
		tests: []string{"TestReliabilityBadInputAdmission", "TestReliabilityCharterAbsent"}, target: "every error clear, 0 changes; all admitted, elsewhere refused",
		timeout: "10m", short: true},
	// With the faults that run charter serve as a child process: in
	// the short mode a kill of each kind at N=50 (the two at once) and a
	// restart at 100 reviews/s, in the full mode N=1,000 and 500
	// reviews/s.
	{name: "bad input: CLI files; faults: charter killed, kube-apiserver restarted", pkg: "./cmd/charter",
		tests:  []string{"TestReliabilityBadCLIFiles", "TestReliabilityCharterKilled", "TestReliabilityAPIServerRestart"},
		target: "every error clear, 0 changes; each done once, none missed; 0 failed, reports converge", timeout: "30m", short: true},
	// Full mode only, from here: each takes a minute or more.
	{name: "bad input: Git revisions; fault: Git server down", pkg: "./reconciler/gitsync",
		tests: []string{"TestReliabilityBadRevisions", "TestReliabilityGitServerDown"}, target: "every error clear, 0 changes; kept, said, recovered within 1 interval",
		timeout: "10m"},
	// A minute of load on the API server.
	{name: "fault: serving certificate rotated under load", pkg: "./webhook/admission", tests: []string{"TestReliabilityCertificateRotation"},
		target: "0 failed", timeout: "10m"},
	// Its figures are the machine's load as much as charter's (a CI
	// machine runs other jobs).
	{name: "overload", pkg: "./webhook/server", tests: []string{"TestReliabilityOverload"},
		target: "load shed, 0 failed, recovered", timeout: "5m"},
	// $SOAK minutes (default 10).
	{name: "soak", pkg: "./webhook/server", tests: []string{"TestReliabilitySoak"},
		target: "RSS and goroutines flat, p99 drift ≤ 20%, 0 errors", timeout: "3h"},
	// $SOAK minutes through the API server, charter serve with every
	// policy kind.
	{name: "soak through the API server, every kind", pkg: "./cmd/charter", tests: []string{"TestReliabilitySoakAPIServer"},
		target: "etcd keys, reports and RSS flat, 0 errors", timeout: "3h"},
}
