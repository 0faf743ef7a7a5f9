package reports

import (
	"encoding/binary"
	"encoding/json"
	"errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/charter-dev/charter/api/policyreport/v1alpha2"
)

// packedResults are admission results waiting for their report, held as
// bytes: a result as structs is a dozen strings and a map of properties,
// pointers the garbage collector follows at every collection, and the
// writer holds up to DefaultMaxPendingResources resources of about two
// dozen results each. Measured under `make bench-admission MODE=split` at
// 3,000 reviews a second, those structs were two thirds of the admission
// process's live heap (66 of 100 MB), and marking them a large part of each
// collection, during which every review waited longer. Bytes hold no
// pointers: the collector does not look inside them.
//
// The encoding is a sequence of results, so the results of several
// admissions of one resource are their packings one after the other. Each
// result is its strings (length, then bytes), its timestamp, whether it is
// scored, its properties, its resources and its resource selector (JSON;
// admission results have none).
type packedResults []byte

// packResults appends the results to b.
func packResults(b packedResults, results []v1alpha2.PolicyReportResult) packedResults {
	for i := range results {
		r := &results[i]
		b = packString(b, r.Source)
		b = packString(b, r.Policy)
		b = packString(b, r.Rule)
		b = packString(b, r.Category)
		b = packString(b, string(r.Severity))
		b = packString(b, string(r.Result))
		b = packString(b, r.Message)
		b = binary.AppendVarint(b, r.Timestamp.Seconds)
		b = binary.AppendVarint(b, int64(r.Timestamp.Nanos))
		b = packBool(b, r.Scored)
		b = binary.AppendUvarint(b, uint64(len(r.Properties)))
		for k, v := range r.Properties {
			b = packString(b, k)
			b = packString(b, v)
		}
		b = binary.AppendUvarint(b, uint64(len(r.Resources)))
		for j := range r.Resources {
			o := &r.Resources[j]
			b = packString(b, o.Kind)
			b = packString(b, o.Namespace)
			b = packString(b, o.Name)
			b = packString(b, string(o.UID))
			b = packString(b, o.APIVersion)
			b = packString(b, o.ResourceVersion)
			b = packString(b, o.FieldPath)
		}
		var sel []byte
		if r.ResourceSelector != nil {
			// A LabelSelector always encodes.
			sel, _ = json.Marshal(r.ResourceSelector)
		}
		b = packBool(b, sel != nil)
		if sel != nil {
			b = packString(b, string(sel))
		}
	}
	return b
}

func packString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func packBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

var errPacked = errors.New("admission results: malformed packing")

// unpack returns the results packed in b.
func (b packedResults) unpack() ([]v1alpha2.PolicyReportResult, error) {
	u := unpacker{b: b}
	var out []v1alpha2.PolicyReportResult
	for len(u.b) > 0 && u.err == nil {
		r := v1alpha2.PolicyReportResult{
			Source:   u.string(),
			Policy:   u.string(),
			Rule:     u.string(),
			Category: u.string(),
			Severity: v1alpha2.PolicySeverity(u.string()),
			Result:   v1alpha2.PolicyResult(u.string()),
			Message:  u.string(),
		}
		r.Timestamp = metav1.Timestamp{Seconds: u.varint(), Nanos: int32(u.varint())}
		r.Scored = u.bool()
		if n := u.count(); n > 0 {
			r.Properties = make(map[string]string, n)
			for range n {
				k := u.string()
				r.Properties[k] = u.string()
			}
		}
		if n := u.count(); n > 0 {
			r.Resources = make([]corev1.ObjectReference, n)
			for j := range r.Resources {
				r.Resources[j] = corev1.ObjectReference{Kind: u.string(), Namespace: u.string(), Name: u.string(), UID: types.UID(u.string()),
					APIVersion: u.string(), ResourceVersion: u.string(), FieldPath: u.string()}
			}
		}
		if u.bool() {
			sel := u.string()
			if u.err == nil {
				r.ResourceSelector = &metav1.LabelSelector{}
				if err := json.Unmarshal([]byte(sel), r.ResourceSelector); err != nil {
					u.err = err
				}
			}
		}
		out = append(out, r)
	}
	if u.err != nil {
		return nil, u.err
	}
	return out, nil
}

// unpacker reads a packing; the first thing it cannot read sets err, and
// everything after reads as zero.
type unpacker struct {
	b   []byte
	err error
}

func (u *unpacker) uvarint() uint64 { return readNumber(u, binary.Uvarint) }

func (u *unpacker) varint() int64 { return readNumber(u, binary.Varint) }

// readNumber reads a number with read (binary.Uvarint or binary.Varint).
func readNumber[T uint64 | int64](u *unpacker, read func([]byte) (T, int)) T {
	if u.err != nil {
		return 0
	}
	v, n := read(u.b)
	if n <= 0 {
		u.err = errPacked
		return 0
	}
	u.b = u.b[n:]
	return v
}

// count reads a number of things that follow, each at least a byte long.
func (u *unpacker) count() int {
	n := u.uvarint()
	if n > uint64(len(u.b)) {
		u.err = errPacked
		return 0
	}
	return int(n)
}

func (u *unpacker) string() string {
	n := u.uvarint()
	if u.err != nil {
		return ""
	}
	if n > uint64(len(u.b)) {
		u.err = errPacked
		return ""
	}
	s := string(u.b[:n])
	u.b = u.b[n:]
	return s
}

func (u *unpacker) bool() bool {
	if u.err != nil {
		return false
	}
	if len(u.b) == 0 || u.b[0] > 1 {
		u.err = errPacked
		return false
	}
	v := u.b[0] == 1
	u.b = u.b[1:]
	return v
}
