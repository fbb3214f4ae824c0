package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/flags.md from the flag set")

// flagsDoc is docs/flags.md: every flag of the agent, its default and
// its help, generated from the flag set itself.
func flagsDoc() string {
	var b strings.Builder
	b.WriteString("# nodeagent flags\n\n")
	b.WriteString("Generated from the flag set by `go test ./cmd/nodeagent -run TestFlagsDoc -update-docs`;\n")
	b.WriteString("`TestFlagsDoc` fails when this file and the flags differ. Flags named as the kubelet's\n")
	b.WriteString("behave as the kubelet's; a `--config` file (KubeletConfiguration) sets the same settings\n")
	b.WriteString("and the command line wins over it.\n\n")
	b.WriteString("| Flag | Default | Meaning |\n|---|---|---|\n")
	fs := newFlagSet(newOptions())
	fs.VisitAll(func(f *flag.Flag) {
		def := f.DefValue
		if def == "" || def == "[]" {
			def = "—"
		} else {
			def = "`" + def + "`"
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s |\n", f.Name, def, strings.ReplaceAll(f.Usage, "|", "\\|"))
	})
	return b.String()
}

// TestFlagsDoc: docs/flags.md is the flag set, so it cannot drift.
func TestFlagsDoc(t *testing.T) {
	want := flagsDoc()
	const path = "../../docs/flags.md"
	if *updateDocs {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("docs/flags.md differs from the flag set; regenerate it: go test ./cmd/nodeagent -run TestFlagsDoc -update-docs")
	}
}

// The usage (-h) names each flag's value as the flag package names its
// own, also for the values over KubeletConfiguration fields.
func TestUsageNamesValueTypes(t *testing.T) {
	fs := newFlagSet(newOptions())
	var b strings.Builder
	fs.SetOutput(&b)
	fs.Usage()
	tests := []struct {
		name, want string
	}{
		{name: "int32 field", want: "  -max-pods int\n    \tmost pods this node runs (default 110)\n"},
		{name: "float flag over an int32 field", want: "  -kube-api-qps float\n"},
		{name: "string-like value, quoted default", want: `(default "Webhook")`},
		{name: "eviction map, as the kubelet names it", want: "  -eviction-hard mapStringString\n"},
		{name: "key=value map, as the kubelet names it", want: "  -kube-reserved mapStringString\n"},
		{name: "bool over a pointer", want: "  -cgroups-per-qos\n"},
		{name: "zero default not shown", want: "  -read-only-port int\n    \tplain-HTTP port on --address serving /healthz, /pods, /stats/summary, /metrics and /metrics/resource with no authentication (either mode); 0 (default) disables it\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(b.String(), tt.want) {
				t.Errorf("usage lacks %q", tt.want)
			}
		})
	}
}
