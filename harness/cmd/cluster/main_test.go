package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestCommandErrors(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+t.TempDir()+"/absent.sock")
	tests := []struct {
		args    []string
		wantErr string
	}{
		{args: []string{"create", "--provider", "local"}, wantErr: "create works with --provider kind only: a local control plane lives as long as its process, use `start --provider local`"},
		{args: []string{"delete", "--provider", "local"}, wantErr: "delete works with --provider kind only"},
		{args: []string{"create", "--provider", "kind"}, wantErr: "kind needs Docker"},
		{args: []string{"delete", "--name", "x"}, wantErr: "kind needs Docker"},
		{args: []string{"start", "--provider", "minikube"}, wantErr: `unknown cluster provider "minikube"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			cmd := newRootCommand()
			cmd.SetArgs(tt.args)
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := cmd.ExecuteContext(ctx)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("cluster %s: error = %v, want one containing %q", strings.Join(tt.args, " "), err, tt.wantErr)
			}
		})
	}
}
