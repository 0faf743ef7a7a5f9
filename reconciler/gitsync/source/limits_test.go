package source

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A revision over a limit stalls with this message on the tenant's
// PolicyRepository: it must say which setting an administrator raises.
func TestLimitErrorNamesItsSetting(t *testing.T) {
	tests := []struct {
		name   string
		limits Limits
		files  int
		want   string
	}{
		{"bytes", Limits{MaxSize: 10}, 1, "charter serve --gitsync-max-repository-size (Helm value gitsyncController.maxRepositorySize)"},
		{"files", Limits{MaxFiles: 2}, 3, "charter serve --gitsync-max-files (Helm value gitsyncController.maxFiles)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for i := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, string(rune('a'+i))+".yaml"), []byte(strings.Repeat("x", 20)), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			err := tt.limits.check(dir)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want it to name %q", err, tt.want)
			}
		})
	}
}
