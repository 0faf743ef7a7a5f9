//go:build unix

package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestControllerManagerSignsClientCertificates: as in a real cluster, an
// approved CertificateSigningRequest of signer
// kubernetes.io/kube-apiserver-client gets a certificate, and the API
// server authenticates its holder as the request's subject (Kyverno's
// chainsaw test validating-policies/context/resource/post creates its
// users so). Without a signer the request is never issued.
func TestControllerManagerSignsClientCertificates(t *testing.T) {
	ctx, cp := startWithControllerManager(t)
	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig())

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	csrDER, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "subreviewuser", Organization: []string{"testorg"}}}, key)
	if err != nil {
		t.Fatal(err)
	}
	csr := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "subreviewuser"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csrDER}),
			SignerName: certificatesv1.KubeAPIServerClientSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth},
		}}
	if csr, err = cs.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Test", Message: "approved by the test"})
	if _, err := cs.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var certPEM []byte
	for len(certPEM) == 0 {
		got, err := cs.CertificatesV1().CertificateSigningRequests().Get(ctx, csr.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		certPEM = got.Status.Certificate
		if len(certPEM) == 0 {
			select {
			case <-ctx.Done():
				t.Fatalf("the approved request was never issued: conditions %+v", got.Status.Conditions)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	user := &rest.Config{Host: cp.RESTConfig().Host, TLSClientConfig: rest.TLSClientConfig{
		CAData: cp.RESTConfig().CAData, CertData: certPEM, KeyData: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})}}
	userClient := kubernetes.NewForConfigOrDie(user)
	for {
		// The API server reloads its client CAs, the signer's among them,
		// shortly after start.
		review, err := userClient.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err == nil {
			if got := review.Status.UserInfo.Username; got != "subreviewuser" {
				t.Fatalf("the certificate's holder is %q, want subreviewuser", got)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the issued certificate does not authenticate: %v", err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
