package engine

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/charter-dev/charter/engine/celruntime"
)

// evalPolicyExpr compiles and evaluates a CEL expression in the
// environment of policies.kyverno.io policies, with nothing bound.
func evalPolicyExpr(t *testing.T, expr string) (any, error) {
	t.Helper()
	set, err := celruntime.PolicyEnv()
	if err != nil {
		t.Fatal(err)
	}
	env, err := set.Env(environment.StoredExpressions)
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		t.Fatalf("%s: %v", expr, iss.Err())
	}
	prg, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	val, _, err := prg.Eval(map[string]any{})
	if err != nil {
		return nil, err
	}
	return val.Value(), nil
}

func certPEM(t *testing.T, key any, pub any) string {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(42), Subject: pkix.Name{CommonName: "charter"},
		NotBefore: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), NotAfter: time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC),
		DNSNames: []string{"charter.example"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// TestPureCELLibraries: Kyverno's offline CEL libraries (cel-policy-types.md
// §4) answer as Kyverno's do.
func TestPureCELLibraries(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaCert, ecCert := certPEM(t, rsaKey, &rsaKey.PublicKey), certPEM(t, ecKey, &ecKey.PublicKey)
	const digest = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	holds := []string{
		`image("nginx").registry() == "index.docker.io"`,
		`image("nginx").repository() == "library/nginx"`,
		`image("nginx").tag() == "latest" && image("nginx").identifier() == "latest"`,
		`!image("nginx:1.27").containsDigest() && image("nginx:1.27").digest() == ""`,
		`image("ghcr.io/org/app:1.2@` + digest + `").tag() == "1.2"`,
		`image("ghcr.io/org/app:1.2@` + digest + `").digest() == "` + digest + `"`,
		`image("ghcr.io/org/app:1.2@` + digest + `").identifier() == "1.2@` + digest + `"`,
		`image("ghcr.io/org/app@` + digest + `").containsDigest()`,
		`image("registry.example:5000/repo@` + digest + `").tag() == ""`,
		`image("registry.example:5000/repo@` + digest + `").registry() == "registry.example:5000"`,
		`parseImageReference("corp.reg.com/team/app:1").registry() == "corp.reg.com"`,
		`isImage("nginx") && !isImage("Not An Image")`,
		`math.round(1.256, 2) == 1.26 && math.round(2.5, 0) == 3.0`,
		`listObjToMap([{"name": "a"}, {"name": "b"}], [{"v": 1}, {"v": 2}], "name", "v") == {"a": 1, "b": 2}`,
		`transform.listObjToMap([{"k": "a"}], [{"v": true}], "k", "v") == {"a": true}`,
		`gzip.decompress(gzip.compress("hello")) == "hello"`,
		`gzip.compress("hello") == gzip.compress("hello")`,
		`base64.encode(b"charter") == "Y2hhcnRlcg==" && base64.decode("Y2hhcnRlcg==") == b"charter"`,
		`cel.bind(x, 2, x * x) == 4`,
		`math.greatest(1, 3, 2) == 3 && math.ceil(1.2) == 2.0 && math.round(1.5) == 2.0`,
		`sets.contains([1, 2, 3], [2])`,
		`[3, 1, 3].distinct() == [3, 1]`,
		`["a", "b"].join("-") == "a-b" && "%s-%d".format(["x", 1]) == "x-1"`,
		`{"a": 1}.all(k, v, v == 1)`,
		`quantity("1Gi").isGreaterThan(quantity("1Mi"))`,
		`semver("1.2.3").isGreaterThan(semver("1.2.0"))`,
		`x509.decode('''` + rsaCert + `''').PublicKey.E == 65537`,
		`x509.decode('''` + rsaCert + `''').DNSNames == ["charter.example"]`,
		`x509.decode('''` + rsaCert + `''').NotBefore == "2026-01-02T03:04:05Z"`,
		`x509.decode('''` + rsaCert + `''').SerialNumber == 42`,
	}
	for _, expr := range holds {
		got, err := evalPolicyExpr(t, expr)
		if err != nil || got != true {
			t.Errorf("%s: %v (%v), want true", strings.ReplaceAll(expr, "\n", " ")[:min(len(expr), 120)], got, err)
		}
	}
	fails := map[string]string{
		`x509.decode('''` + ecCert + `''')`:        "certificate should use rsa algorithm",
		`x509.decode("not pem")`:                   "failed to decode PEM block",
		`listObjToMap([{"k": "a"}], [], "k", "v")`: "lists of equal length",
		`image("Not An Image").registry()`:         "could not parse reference",
		`gzip.decompress(b"not gzip")`:             "gzip.decompress",
	}
	for expr, want := range fails {
		got, err := evalPolicyExpr(t, expr)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%.80s: %v (%v), want an error containing %q", expr, got, err, want)
		}
	}
}
