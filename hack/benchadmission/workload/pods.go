package workload

import (
	"encoding/json"
	"fmt"
	"math"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Pod is one Pod the benchmark sends and the decision charter must reach
// on it with the Pod Security policies in Enforce.
type Pod struct {
	// Pod is the object, valid for the API server's own validation.
	Pod *corev1.Pod
	// Compliant Pods pass baseline and restricted; the others must be
	// denied.
	Compliant bool
	// Violates names a policy a non-compliant Pod fails (there may be
	// more).
	Violates string
}

// Pods returns the benchmark's Pods in namespace: a few compliant with the
// restricted profile in different shapes, and one or more violations of
// each kind the baseline and restricted policies check. Every Pod passes
// the API server's own validation, so through the API server only the
// policies decide.
func Pods(namespace string) []Pod {
	var pods []Pod
	add := func(name string, compliant bool, violates string, change func(*corev1.Pod)) {
		p := restricted(namespace, name)
		if change != nil {
			change(p)
		}
		pods = append(pods, Pod{Pod: p, Compliant: compliant, Violates: violates})
	}
	first := func(p *corev1.Pod) *corev1.SecurityContext { return p.Spec.Containers[0].SecurityContext }

	add("restricted", true, "", nil)
	add("restricted-volumes", true, "", func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{
			{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}},
		}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
			{Name: "scratch", MountPath: "/tmp"}, {Name: "config", MountPath: "/etc/app"},
		}
	})
	add("restricted-sidecar", true, "", func(p *corev1.Pod) {
		init := p.Spec.Containers[0]
		init.Name, init.Image = "migrate", "registry.example/migrate:1.0"
		p.Spec.InitContainers = []corev1.Container{init}
		sidecar := restrictedContainer("proxy", "registry.example/proxy:2.3")
		sidecar.SecurityContext.Capabilities.Add = []corev1.Capability{"NET_BIND_SERVICE"}
		sidecar.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 80}}
		p.Spec.Containers = append(p.Spec.Containers, sidecar)
	})

	add("privileged", false, "disallow-privileged-containers", func(p *corev1.Pod) {
		// The API server refuses privileged with allowPrivilegeEscalation
		// false, so this one also fails disallow-privilege-escalation.
		first(p).Privileged = ptr.To(true)
		first(p).AllowPrivilegeEscalation = ptr.To(true)
	})
	add("host-network", false, "disallow-host-namespaces", func(p *corev1.Pod) { p.Spec.HostNetwork = true })
	add("host-pid", false, "disallow-host-namespaces", func(p *corev1.Pod) { p.Spec.HostPID = true })
	add("host-path", false, "disallow-host-path", func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: "/var/run"}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "host", MountPath: "/host"}}
	})
	add("host-port", false, "disallow-host-ports", func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8080}}
	})
	add("capability-net-admin", false, "disallow-capabilities", func(p *corev1.Pod) {
		first(p).Capabilities.Add = []corev1.Capability{"NET_ADMIN"}
	})
	add("capability-chown", false, "restrict-capabilities-strict", func(p *corev1.Pod) {
		first(p).Capabilities.Add = []corev1.Capability{"CHOWN"}
	})
	add("no-drop-all", false, "restrict-capabilities-strict", func(p *corev1.Pod) {
		first(p).Capabilities = nil
	})
	add("run-as-root", false, "require-run-as-non-root-user", func(p *corev1.Pod) {
		p.Spec.SecurityContext.RunAsNonRoot = nil
		p.Spec.SecurityContext.RunAsUser = ptr.To[int64](0)
	})
	add("privilege-escalation", false, "disallow-privilege-escalation", func(p *corev1.Pod) {
		first(p).AllowPrivilegeEscalation = ptr.To(true)
	})
	add("seccomp-unconfined", false, "restrict-seccomp", func(p *corev1.Pod) {
		p.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
	})
	add("unsafe-sysctl", false, "restrict-sysctls", func(p *corev1.Pod) {
		p.Spec.SecurityContext.Sysctls = []corev1.Sysctl{{Name: "net.core.somaxconn", Value: "1024"}}
	})
	add("selinux-type", false, "disallow-selinux", func(p *corev1.Pod) {
		first(p).SELinuxOptions = &corev1.SELinuxOptions{Type: "spc_t"}
	})
	return pods
}

// restricted returns a Pod that meets the restricted profile.
func restricted(namespace, name string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace,
			Labels: map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "bench"},
		},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To[int64](1000),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{restrictedContainer("app", "registry.example/app:1.0")},
		},
	}
}

func restrictedContainer(name, image string) corev1.Container {
	return corev1.Container{
		Name: name, Image: image,
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
}

// Review returns the AdmissionReview v1 body the API server would send a
// validating webhook for creating p, as uid.
func Review(p *corev1.Pod, uid string) ([]byte, error) {
	obj, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %w", p.Name, err)
	}
	opts, err := json.Marshal(&metav1.CreateOptions{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "CreateOptions"}})
	if err != nil {
		return nil, err
	}
	gvk := metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	gvr := metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:             types.UID(uid),
			Kind:            gvk,
			Resource:        gvr,
			RequestKind:     &gvk,
			RequestResource: &gvr,
			Name:            p.Name,
			Namespace:       p.Namespace,
			Operation:       admissionv1.Create,
			UserInfo: authenticationv1.UserInfo{
				Username: "bench", Groups: []string{"system:authenticated"},
			},
			Object:  runtime.RawExtension{Raw: obj},
			Options: runtime.RawExtension{Raw: opts},
			DryRun:  ptr.To(false),
		},
	}
	return json.Marshal(&review)
}

// Mix picks the Pod of each request: a fixed share of non-compliant Pods,
// spread evenly (not in bursts), cycling through the variants of each
// kind. It is deterministic, so two runs send the same sequence.
type Mix struct {
	compliant, noncompliant []Pod
	fraction                float64
}

// NewMix returns a mix of pods where the given fraction (0 to 1) of
// requests carries a non-compliant Pod.
func NewMix(pods []Pod, noncompliant float64) (*Mix, error) {
	if noncompliant < 0 || noncompliant > 1 || math.IsNaN(noncompliant) {
		return nil, fmt.Errorf("non-compliant share %v: want a fraction from 0 to 1", noncompliant)
	}
	m := &Mix{fraction: noncompliant}
	for _, p := range pods {
		if p.Compliant {
			m.compliant = append(m.compliant, p)
		} else {
			m.noncompliant = append(m.noncompliant, p)
		}
	}
	if noncompliant < 1 && len(m.compliant) == 0 {
		return nil, fmt.Errorf("no compliant Pod to send")
	}
	if noncompliant > 0 && len(m.noncompliant) == 0 {
		return nil, fmt.Errorf("no non-compliant Pod to send")
	}
	return m, nil
}

// At returns the Pod of request i (0-based). Request i is non-compliant
// when the running count floor(i*fraction) steps up at i+1, which spaces
// them evenly and makes any prefix hold the share to within one request.
func (m *Mix) At(i int) Pod {
	before := int(math.Floor(float64(i) * m.fraction))
	after := int(math.Floor(float64(i+1) * m.fraction))
	if after > before {
		return m.noncompliant[before%len(m.noncompliant)]
	}
	return m.compliant[(i-before)%len(m.compliant)]
}
