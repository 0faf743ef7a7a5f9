package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/internal/version"
)

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the charter version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := version.Get()
			w := cmd.OutOrStdout()
			switch output {
			case "":
				fmt.Fprintf(w, "charter %s", info.Version)
				if info.Commit != "" {
					fmt.Fprintf(w, " (%s)", info.Commit)
				}
				fmt.Fprintf(w, " %s\n", info.GoVersion)
			case "json":
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			case "yaml":
				b, err := yaml.Marshal(info)
				if err != nil {
					return err
				}
				_, err = w.Write(b)
				return err
			default:
				return fmt.Errorf("unknown output format %q: use json or yaml", output)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json|yaml")
	return cmd
}
