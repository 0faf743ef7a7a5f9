package printer

import (
	"bytes"
	"strings"
	"testing"
)

func TestTableAlignsByVisibleWidth(t *testing.T) {
	tbl := NewTable("id", "result", "reason")
	tbl.AddCells(Cell{Text: "1"}, Cell{Text: "Pass", Style: Green}, Cell{Text: "Ok"})
	tbl.AddCells(Cell{Text: "10"}, Cell{Text: "Fail", Style: Red}, Cell{Text: "Want pass,\ngot fail"})

	tests := []struct {
		name  string
		color bool
		want  string
	}{
		{"plain", false, "ID   RESULT   REASON\n" +
			"1    Pass     Ok\n" +
			"10   Fail     Want pass, got fail\n"},
		{"color", true, "\x1b[1mID\x1b[0m   \x1b[1mRESULT\x1b[0m   \x1b[1mREASON\x1b[0m\n" +
			"1    \x1b[32mPass\x1b[0m     Ok\n" +
			"10   \x1b[31mFail\x1b[0m     Want pass, got fail\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := tbl.Write(&buf, tt.color); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tt.want {
				t.Errorf("got\n%q\nwant\n%q", buf.String(), tt.want)
			}
		})
	}
}

func TestColorEnabledIsFalseForNonTerminals(t *testing.T) {
	if ColorEnabled(&bytes.Buffer{}) {
		t.Error("a buffer is not a terminal")
	}
}

func TestWriteObject(t *testing.T) {
	v := map[string]any{"a": 1}
	tests := []struct{ format, want string }{
		{"json", "{\n  \"a\": 1\n}\n"},
		{"yaml", "a: 1\n"},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		if err := WriteObject(&buf, tt.format, v); err != nil {
			t.Fatal(err)
		}
		if buf.String() != tt.want {
			t.Errorf("%s: got %q want %q", tt.format, buf.String(), tt.want)
		}
	}
	if err := WriteObject(&bytes.Buffer{}, "xml", v); err == nil || !strings.Contains(err.Error(), "xml") {
		t.Errorf("xml: want an error naming the format, got %v", err)
	}
}
