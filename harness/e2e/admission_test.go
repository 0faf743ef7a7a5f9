package e2e

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/harness/cluster"
)

// Names users and their tools see, as charter publishes them (Kyverno's,
// with charter for kyverno; admission-reports.md §3).
const (
	charterNamespace        = "charter"
	admissionNamespace      = "e2e-admission"
	resourceValidatingName  = "charter-resource-validating-webhook-cfg"
	resourceMutatingName    = "charter-resource-mutating-webhook-cfg"
	policyValidatingName    = "charter-policy-validating-webhook-cfg"
	validateWebhookFail     = "validate.charter.svc-fail"
	policyValidationWebhook = "validate-policy.charter.svc"
)

// allowedTeams reads its list from a ConfigMap twice over, through a
// configMap context entry and through an apiCall to the API server, so a
// Pod is judged by what the cluster holds at that moment.
const allowedTeams = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: allowed-teams
spec:
  validationFailureAction: Enforce
  background: false
  rules:
  - name: team-listed
    match:
      any:
      - resources: {kinds: [Pod], namespaces: [e2e-admission], names: ["ctx-*"]}
    context:
    - name: teams
      configMap: {name: allowed-teams, namespace: e2e-admission}
    - name: listed
      apiCall:
        urlPath: "/api/v1/namespaces/{{request.namespace}}/configmaps/allowed-teams"
        jmesPath: data.teams
    validate:
      message: "team {{request.object.metadata.labels.team}} is not one of {{teams.data.teams}}"
      deny:
        conditions:
          any:
          - {key: "{{request.object.metadata.labels.team}}", operator: AnyNotIn, value: "{{split(teams.data.teams, ',')}}"}
          - {key: "{{request.object.metadata.labels.team}}", operator: AnyNotIn, value: "{{split(listed, ',')}}"}
`

// Policies of the admission specs. require-name is enforced; require-owner
// audits; add-team sets the label require-team enforces, so a Pod without
// it is admitted only if mutation runs first.
const (
	requireName = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: require-name}
spec:
  validationFailureAction: Enforce
  rules:
  - name: check-name
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: "label 'app.kubernetes.io/name' is required"
      pattern: {metadata: {labels: {app.kubernetes.io/name: "?*"}}}
`
	requireOwner = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: require-owner}
spec:
  validationFailureAction: Audit
  rules:
  - name: check-owner
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: "label 'owner' is recommended"
      pattern: {metadata: {labels: {owner: "?*"}}}
`
	addTeam = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: add-team}
spec:
  rules:
  - name: default-team
    match: {any: [{resources: {kinds: [Pod], namespaces: [e2e-admission]}}]}
    mutate:
      patchStrategicMerge:
        metadata:
          labels:
            +(team): platform
`
	requireTeam = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: require-team}
spec:
  validationFailureAction: Enforce
  rules:
  - name: check-team
    match: {any: [{resources: {kinds: [Pod], namespaces: [e2e-admission]}}]}
    validate:
      message: "label 'team' is required"
      pattern: {metadata: {labels: {team: "?*"}}}
`
	invalidPolicy = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: bad-anchor}
spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {pattern: {spec: {containers: [{"~(x)": "y"}]}}}
`
	// nameException lives in charter's namespace, the only one charter
	// serve honours PolicyExceptions from unless --exception-namespaces
	// says otherwise; it exempts a Pod in another namespace, as Kyverno
	// lets a trusted namespace's exceptions do.
	nameException = `
apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: let-legacy-through, namespace: charter}
spec:
  exceptions:
  - policyName: require-name
    ruleNames: [check-name, autogen-check-name]
  match:
    any:
    - resources: {kinds: [Pod], namespaces: [e2e-admission], names: [legacy]}
`
)

var _ = Describe("Admission", Label("admission"), Ordered, inClusterPriority, func() {
	var cl client.Client

	BeforeAll(func(ctx SpecContext) {
		skipUnlessClusterReachesCharter()
		cl = suite.client
		for _, ns := range []string{charterNamespace, admissionNamespace} {
			Expect(client.IgnoreAlreadyExists(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		}
		waitDefaultServiceAccounts(ctx, admissionNamespace)
		// nameException lives in charterNamespace, the install's too.
		useCharter(ctx, charterNamespace, "admission")

		// The policy webhook is in place before any policy is written.
		Eventually(func() error {
			return cl.Get(ctx, client.ObjectKey{Name: policyValidatingName}, &admissionregistrationv1.ValidatingWebhookConfiguration{})
		}).WithTimeout(60 * time.Second).Should(Succeed())
	}, NodeTimeout(3*time.Minute))

	It("refuses an invalid policy at apply with its field path", func(ctx SpecContext) {
		// The API server may call the webhook before its certificate is
		// served; retry until the answer is charter's.
		Eventually(func(g Gomega) {
			err := cl.Create(ctx, clusterPolicy(invalidPolicy))
			g.Expect(err).To(HaveOccurred(), "invalid policy admitted")
			g.Expect(err.Error()).To(ContainSubstring(`admission webhook "` + policyValidationWebhook + `" denied the request`))
			g.Expect(err.Error()).To(ContainSubstring("spec.rules[0].validate.pattern.spec.containers[0]"))
		}).WithTimeout(60 * time.Second).Should(Succeed())
	}, SpecTimeout(90*time.Second))

	Context("with policies installed", func() {
		BeforeAll(func(ctx SpecContext) {
			for _, p := range []string{requireName, requireOwner, addTeam, requireTeam} {
				Expect(cl.Create(ctx, clusterPolicy(p))).To(Succeed())
			}
			// The suite's specs share one cluster and run in random order:
			// policies that match every Pod must not outlive these specs,
			// or they add results to the reports specs' Pods.
			DeferCleanup(func(ctx SpecContext) {
				for _, p := range []string{requireName, requireOwner, addTeam, requireTeam} {
					Expect(client.IgnoreNotFound(cl.Delete(ctx, clusterPolicy(p)))).To(Succeed())
				}
			})
			// Wait until the Enforce policy is served: a bad Pod is refused.
			Eventually(func() error {
				return refusedByCharter(ctx, newPod("probe", nil))
			}).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		}, NodeTimeout(90*time.Second))

		It("blocks a bad Pod with the policy's message", func(ctx SpecContext) {
			err := cl.Create(ctx, newPod("bad", map[string]string{"team": "web"}))
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(`admission webhook "` + validateWebhookFail + `" denied the request: ` +
				"\n\nresource Pod/" + admissionNamespace + "/bad was blocked due to the following policies \n\nrequire-name:\n" +
				"  check-name: 'validation error: label ''app.kubernetes.io/name'' is required. rule check-name failed at path /metadata/labels/app.kubernetes.io/name/'"))
		}, SpecTimeout(30*time.Second))

		It("admits a good Pod", func(ctx SpecContext) {
			Expect(cl.Create(ctx, newPod("good", map[string]string{"app.kubernetes.io/name": "web", "team": "web", "owner": "alice"}))).To(Succeed())
		}, SpecTimeout(30*time.Second))

		It("admits a Pod that fails only an Audit rule", func(ctx SpecContext) {
			Expect(cl.Create(ctx, newPod("no-owner", map[string]string{"app.kubernetes.io/name": "web", "team": "web"}))).To(Succeed())
		}, SpecTimeout(30*time.Second))

		It("mutates before it validates: the mutate rule supplies the label the validate rule requires", func(ctx SpecContext) {
			var mutating admissionregistrationv1.MutatingWebhookConfiguration
			Expect(cl.Get(ctx, client.ObjectKey{Name: resourceMutatingName}, &mutating)).To(Succeed())
			Expect(webhookResources(mutating.Webhooks)).To(ContainElement("pods"))

			p := newPod("no-team", map[string]string{"app.kubernetes.io/name": "web", "owner": "alice"})
			Expect(cl.Create(ctx, p)).To(Succeed())
			var got corev1.Pod
			Expect(cl.Get(ctx, client.ObjectKeyFromObject(p), &got)).To(Succeed())
			Expect(got.Labels).To(HaveKeyWithValue("team", "platform"))

			// The +() anchor leaves a label that is already there alone.
			own := newPod("own-team", map[string]string{"app.kubernetes.io/name": "web", "team": "web"})
			Expect(cl.Create(ctx, own)).To(Succeed())
			Expect(cl.Get(ctx, client.ObjectKeyFromObject(own), &got)).To(Succeed())
			Expect(got.Labels).To(HaveKeyWithValue("team", "web"))
		}, SpecTimeout(30*time.Second))

		It("blocks a Deployment whose pod template breaks a Pod rule (autogen)", func(ctx SpecContext) {
			d := newDeployment("bad-deploy", map[string]string{"team": "web"})
			err := cl.Create(ctx, d)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring("resource Deployment/" + admissionNamespace + "/bad-deploy was blocked"))
			Expect(err.Error()).To(ContainSubstring("autogen-check-name"))

			good := newDeployment("good-deploy", map[string]string{"app.kubernetes.io/name": "web", "team": "web"})
			Expect(cl.Create(ctx, good)).To(Succeed())
		}, SpecTimeout(30*time.Second))

		It("leaves kube-system alone", func(ctx SpecContext) {
			p := newPod("unlabelled", nil)
			p.Namespace = "kube-system"
			Expect(cl.Create(ctx, p)).To(Succeed())
		}, SpecTimeout(30*time.Second))

		It("lets the one Pod a PolicyException names through", func(ctx SpecContext) {
			var ex kyvernov2.PolicyException
			Expect(yaml.UnmarshalStrict([]byte(nameException), &ex)).To(Succeed())
			Expect(cl.Create(ctx, &ex)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { Expect(cl.Delete(ctx, &ex)).To(Succeed()) })

			// The exception reaches the policy cache asynchronously.
			Eventually(func() error {
				return cl.Create(ctx, newPod("legacy", map[string]string{"team": "web"}), client.DryRunAll)
			}).WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
			Expect(cl.Create(ctx, newPod("legacy", map[string]string{"team": "web"}))).To(Succeed())

			err := cl.Create(ctx, newPod("not-legacy", map[string]string{"team": "web"}))
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring("require-name"))
		}, SpecTimeout(60*time.Second))

		It("recreates the webhook configuration when it is deleted", func(ctx SpecContext) {
			v := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: resourceValidatingName}}
			Expect(cl.Delete(ctx, v)).To(Succeed())
			Eventually(func() error {
				return cl.Get(ctx, client.ObjectKey{Name: resourceValidatingName}, &admissionregistrationv1.ValidatingWebhookConfiguration{})
			}).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
			// And it protects again.
			Eventually(func() error {
				return refusedByCharter(ctx, newPod("after-recreate", map[string]string{"team": "web"}))
			}).WithTimeout(30 * time.Second).Should(Succeed())
		}, SpecTimeout(2*time.Minute))

		It("stops enforcing a policy once it is deleted", func(ctx SpecContext) {
			Expect(cl.Delete(ctx, clusterPolicy(requireName))).To(Succeed())
			Eventually(func() error {
				return cl.Create(ctx, newPod("after-delete", map[string]string{"team": "web"}), client.DryRunAll)
			}).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		}, SpecTimeout(90*time.Second))
	})

	Context("with context entries that read the cluster", func() {
		var teams *corev1.ConfigMap
		BeforeAll(func(ctx SpecContext) {
			teams = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "allowed-teams", Namespace: admissionNamespace},
				Data: map[string]string{"teams": "web,platform"}}
			Expect(cl.Create(ctx, teams)).To(Succeed())
			Expect(cl.Create(ctx, clusterPolicy(allowedTeams))).To(Succeed())
			DeferCleanup(func(ctx SpecContext) {
				Expect(client.IgnoreNotFound(cl.Delete(ctx, clusterPolicy(allowedTeams)))).To(Succeed())
				Expect(client.IgnoreNotFound(cl.Delete(ctx, teams))).To(Succeed())
			})
			Eventually(func() error {
				return refusedByCharter(ctx, newPod("ctx-probe", map[string]string{"app.kubernetes.io/name": "web", "team": "ops"}))
			}).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		}, NodeTimeout(90*time.Second))

		It("judges a Pod by a ConfigMap and an apiCall, as they stand at admission", func(ctx SpecContext) {
			labels := func(team string) map[string]string {
				return map[string]string{"app.kubernetes.io/name": "web", "team": team, "owner": "alice"}
			}
			Expect(cl.Create(ctx, newPod("ctx-web", labels("web")), client.DryRunAll)).To(Succeed())

			err := cl.Create(ctx, newPod("ctx-ops", labels("ops")), client.DryRunAll)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring("team-listed: team ops is not one of web,platform"))

			// No cache stands between the policy and the ConfigMap: the
			// next admission reads the new list.
			teams.Data["teams"] = "web,platform,ops"
			Expect(cl.Update(ctx, teams)).To(Succeed())
			Expect(cl.Create(ctx, newPod("ctx-ops", labels("ops")), client.DryRunAll)).To(Succeed())
		}, SpecTimeout(60*time.Second))
	})
})

// skipUnlessClusterReachesCharter skips a spec tree that runs charter
// serve when the cluster's API server cannot reach this machine, where
// charter runs, saying why.
func skipUnlessClusterReachesCharter() {
	if suite.hostAddressErr != nil {
		Skip(fmt.Sprintf("charter serves its webhooks on this machine, which the %s cluster's API server cannot reach: %v",
			suite.provider.Name(), suite.hostAddressErr))
	}
}

// waitDefaultServiceAccounts waits until the namespaces have their
// default ServiceAccount, which the ServiceAccount admission plugin wants
// before it admits a Pod there: a kind cluster's controller manager makes
// it a moment after the namespace. The local control plane has no
// controller manager to make it, and its API server runs without that
// plugin (envtest's default), so there is nothing to wait for.
func waitDefaultServiceAccounts(ctx context.Context, namespaces ...string) {
	GinkgoHelper()
	if suite.provider.Name() == cluster.LocalProvider {
		return
	}
	for _, ns := range namespaces {
		Eventually(func() error {
			return suite.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{})
		}).WithTimeout(60*time.Second).WithPolling(250*time.Millisecond).Should(Succeed(), "default ServiceAccount of %s", ns)
	}
}

// startCharterWith runs `charter serve --controllers=<controllers>` out
// of cluster against the suite's cluster, in charter's namespace namespace
// with further serve flags, and URL webhooks to the address at which the
// cluster reaches this machine, until the spec tree ends; then it stops it
// and removes its webhook configurations so the cluster admits again. A
// charter installed in the cluster is uninstalled first. It returns what
// the cleanup does, for specs that stop charter early (a restart); the
// cleanup then does nothing more.
func startCharterWith(ctx context.Context, namespace, controllers string, flags ...string) (stop func(context.Context)) {
	return startCharterAs(ctx, namespace, controllers, suite.provider.KubeconfigPath(), GinkgoWriter, flags...)
}

// startCharterAs is startCharterWith with the kubeconfig charter serve
// runs with, whose user is who charter acts as, and the writer its output
// goes to. The cleanup still removes the webhook configurations as the
// suite's admin.
func startCharterAs(ctx context.Context, namespace, controllers, kubeconfig string, output io.Writer, flags ...string) (stop func(context.Context)) {
	uninstallCharter(ctx, "charter serve --controllers="+controllers+" runs on this machine for this spec tree, and webhook configurations are cluster-wide")
	// charter listens at the one address the API server calls, not on
	// every interface: loopback for local, the Docker bridge for kind. The
	// host of the URL becomes an IP SAN of its serving certificate.
	webhook := net.JoinHostPort(suite.hostAddress, strconv.Itoa(freePortOn(suite.hostAddress)))
	health := freePort()
	args := append([]string{"serve", "--controllers=" + controllers,
		"--kubeconfig=" + kubeconfig,
		"--namespace=" + namespace,
		"--webhook-addr=" + webhook,
		"--webhook-url=https://" + webhook,
		"--metrics-addr=0",
		"--health-addr=127.0.0.1:" + strconv.Itoa(health),
		"--leader-elect=false",
	}, flags...)
	cmd := exec.Command(suite.charter, args...)
	cmd.Stdout, cmd.Stderr = output, output
	Expect(cmd.Start()).To(Succeed())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var once sync.Once
	stop = func(ctx context.Context) { once.Do(func() { stopCharter(ctx, cmd, exited, namespace) }) }
	DeferCleanup(func(ctx SpecContext) { stop(ctx) }, NodeTimeout(2*time.Minute))
	Consistently(exited).WithTimeout(time.Second).ShouldNot(Receive(), "charter serve exited at once")
	return stop
}

// terminate stops a process this suite started (exited receives its
// Wait): SIGTERM, then SIGKILL after grace.
func terminate(cmd *exec.Cmd, exited <-chan error, grace time.Duration) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// stopCharter stops charter serve and removes its webhook configurations.
func stopCharter(ctx context.Context, cmd *exec.Cmd, exited <-chan error, namespace string) {
	GinkgoHelper()
	terminate(cmd, exited, 45*time.Second)
	cleanup := exec.CommandContext(ctx, suite.charter, "serve", "--cleanup-webhooks",
		"--kubeconfig="+suite.provider.KubeconfigPath(), "--namespace="+namespace)
	out, err := cleanup.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "charter serve --cleanup-webhooks: %s", out)
}

// refusedByCharter dry-runs the creation of obj and succeeds when
// charter's fail-closed validating webhook refused it (the shared one, or
// the one of a namespace's namespaced policies); an admission or a
// refusal by anything else (the webhook not reachable yet) is an error.
func refusedByCharter(ctx context.Context, obj client.Object) error {
	err := suite.client.Create(ctx, obj, client.DryRunAll)
	if err == nil {
		return fmt.Errorf("%s/%s admitted", obj.GetNamespace(), obj.GetName())
	}
	if !deniedByCharterFail.MatchString(err.Error()) {
		return err
	}
	return nil
}

// deniedByCharterFail matches a refusal by charter's fail-closed
// validating webhooks: the shared one, or a namespaced policies' one
// (named after a hash of its rules).
var deniedByCharterFail = regexp.MustCompile(`admission webhook "` + regexp.QuoteMeta(validateWebhookFail) + `(-namespaced-[0-9a-f]+)?" denied the request`)

// webhookResources lists the resources the rules of the webhooks name.
func webhookResources(webhooks []admissionregistrationv1.MutatingWebhook) []string {
	var out []string
	for _, w := range webhooks {
		for _, r := range w.Rules {
			out = append(out, r.Resources...)
		}
	}
	return out
}

// freePort is a TCP port free on the loopback address.
func freePort() int { return freePortOn("127.0.0.1") }

// freePortOn is a TCP port free on the address host, for a process the
// suite starts next to listen on. It is picked below Linux's ephemeral
// range (32768 and up): a port the kernel hands out for ":0" is also the
// one it hands the next outgoing connection, and under load one of the
// control plane's took it before charter could listen on it ("address
// already in use"). Ports this low are given only to whoever names them.
func freePortOn(host string) int {
	GinkgoHelper()
	const low, high = 20000, 32768
	for range 200 {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(low+rand.IntN(high-low))))
		if err != nil {
			continue
		}
		port := ln.Addr().(*net.TCPAddr).Port
		Expect(ln.Close()).To(Succeed())
		return port
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	Expect(err).NotTo(HaveOccurred())
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func clusterPolicy(manifest string) *kyvernov1.ClusterPolicy {
	var p kyvernov1.ClusterPolicy
	Expect(yaml.UnmarshalStrict([]byte(manifest), &p)).To(Succeed())
	return &p
}

func newPod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: admissionNamespace, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}}},
	}
}

func newDeployment(name string, podLabels map[string]string) *appsv1.Deployment {
	selector := map[string]string{"deployment": name}
	labels := map[string]string{"deployment": name}
	for k, v := range podLabels {
		labels[k] = v
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: admissionNamespace},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}}},
			},
		},
	}
}
