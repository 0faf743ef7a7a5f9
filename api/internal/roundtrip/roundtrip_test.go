package roundtrip

import (
	"strings"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

type inner struct {
	Name string `json:"name,omitempty"`
}

type sample struct {
	Flag    bool           `json:"flag,omitempty"`
	Count   int            `json:"count"`
	Inner   *inner         `json:"inner,omitempty"`
	List    []inner        `json:"list,omitempty"`
	Free    *apiextv1.JSON `json:"free,omitempty"`
	Dropped string         `json:"-"`
	inline  `json:",inline"`
}

type inline struct {
	Embedded string `json:"embedded,omitempty"`
}

// lossy is a type that silently rewrites its free-form field.
type lossy struct {
	Free *rewritingJSON `json:"free,omitempty"`
}

type rewritingJSON struct{ apiextv1.JSON }

func (r *rewritingJSON) UnmarshalJSON(data []byte) error {
	r.Raw = []byte(`{"rewritten":true}`)
	return nil
}

// dropOnEncode accepts a name but never encodes it.
type dropOnEncode struct {
	Name string `json:"name"`
}

func (dropOnEncode) MarshalJSON() ([]byte, error) { return []byte("{}"), nil }

func TestCheck(t *testing.T) {
	tests := []struct {
		name        string
		doc         string
		obj         any
		wantErr     string
		wantDropped []string
		wantAdded   []string
		wantFree    int
	}{{
		name:     "everything survives",
		doc:      "count: 2\ninner: {name: a}\nlist: [{name: b}]\nembedded: e\nfree: {a: null, b: [], c: {}}\n",
		obj:      &sample{},
		wantFree: 1,
	}, {
		name:        "zero values in typed fields may be dropped and added",
		doc:         "flag: false\ninner: {name: ''}\n",
		obj:         &sample{},
		wantDropped: []string{".flag", ".inner.name"},
		wantAdded:   []string{".count"},
	}, {
		name:    "unknown field is refused",
		doc:     "count: 1\ncuont: 2\n",
		obj:     &sample{},
		wantErr: `unknown field "cuont"`,
	}, {
		name: "field the type does not encode is lost",
		doc:  "count: 1\ninner: {name: x}\nlist: [{name: yy}, {}]\n",
		obj: &struct {
			Count int            `json:"count"`
			Inner *inner         `json:"inner"`
			List  []dropOnEncode `json:"list"`
		}{},
		wantErr: `.list[0].name: given "yy", lost`,
	}, {
		name:    "free-form value must come back exactly",
		doc:     "free: {a: 1}\n",
		obj:     &lossy{},
		wantErr: "free-form value changed",
	}, {
		name:     "free-form scalars and nested empties",
		doc:      "count: 0\nlist: [{}, {name: z}]\nfree: 'text'\n",
		obj:      &sample{},
		wantFree: 1,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Check([]byte(tt.doc), tt.obj)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Check() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Check() error = %v", err)
			}
			if strings.Join(res.Dropped, " ") != strings.Join(tt.wantDropped, " ") {
				t.Errorf("Dropped = %v, want %v", res.Dropped, tt.wantDropped)
			}
			if strings.Join(res.Added, " ") != strings.Join(tt.wantAdded, " ") {
				t.Errorf("Added = %v, want %v", res.Added, tt.wantAdded)
			}
			if res.FreeForm != tt.wantFree {
				t.Errorf("FreeForm = %d, want %d", res.FreeForm, tt.wantFree)
			}
		})
	}
}

func TestSplitDocuments(t *testing.T) {
	data := "apiVersion: v1\nkind: A\n---\n# only a comment\n---\n- a list\n---\napiVersion: v1\nkind: B\n"
	docs, err := SplitDocuments("f.yaml", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, d := range docs {
		if d.Kind != "" {
			kinds = append(kinds, d.Kind)
		}
	}
	if strings.Join(kinds, ",") != "A,B" {
		t.Fatalf("kinds = %v, want A,B", kinds)
	}
}
