package cni

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/google/go-cmp/cmp"
)

// plugin is the behaviour of one fake plugin binary.
type plugin struct {
	versions  string // JSON list of supported versions
	statusErr string // STATUS fails with this message when set
}

var (
	current = plugin{versions: `["0.4.0","1.0.0","1.1.0"]`} // plugins v1.10
	debian  = plugin{versions: `["0.4.0","1.0.0"]`}         // Debian's 1.1.1
)

// fakePlugins writes shell plugins into a new bin dir. Each answers
// VERSION, fails STATUS when told to, and appends "<command> <container
// ID>" to <bin>/calls and its stdin for GC to <bin>/gc-<name>.json.
func fakePlugins(t *testing.T, plugins map[string]plugin) string {
	t.Helper()
	dir := t.TempDir()
	for name, p := range plugins {
		status := "exit 0"
		if p.statusErr != "" {
			status = `echo '{"cniVersion":"1.1.0","code":50,"msg":"` + p.statusErr + `"}'; exit 1`
		}
		script := `#!/bin/sh
echo "$CNI_COMMAND $CNI_CONTAINERID" >>"` + dir + `/calls"
case "$CNI_COMMAND" in
VERSION) cat >/dev/null; echo '{"cniVersion":"1.0.0","supportedVersions":` + p.versions + `}' ;;
STATUS) cat >/dev/null; ` + status + ` ;;
GC) cat >"` + dir + `/gc-` + name + `.json" ;;
DEL) cat >/dev/null ;;
*) cat >/dev/null; echo '{"cniVersion":"1.1.0","code":4,"msg":"unexpected"}'; exit 1 ;;
esac
`
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func allPlugins(p plugin) map[string]plugin {
	return map[string]plugin{"bridge": p, "host-local": p, "portmap": p, "bandwidth": p, "loopback": p}
}

// confList is the shape of a generated list, for comparisons.
type confList struct {
	CNIVersion  string `json:"cniVersion"`
	Name        string `json:"name"`
	GeneratedBy string `json:"generatedBy"`
	Plugins     []struct {
		Type         string          `json:"type"`
		Bridge       string          `json:"bridge,omitempty"`
		IsGateway    bool            `json:"isGateway,omitempty"`
		IPMasq       bool            `json:"ipMasq,omitempty"`
		HairpinMode  bool            `json:"hairpinMode,omitempty"`
		MACSpoofChk  bool            `json:"macspoofchk,omitempty"`
		Capabilities map[string]bool `json:"capabilities,omitempty"`
		IPAM         *struct {
			Type    string                `json:"type"`
			Ranges  [][]map[string]string `json:"ranges"`
			Routes  []map[string]string   `json:"routes"`
			DataDir string                `json:"dataDir"`
		} `json:"ipam,omitempty"`
	} `json:"plugins"`
}

func TestConfList(t *testing.T) {
	tests := []struct {
		name       string
		cidrs      []string
		wantRanges [][]map[string]string
		wantRoutes []map[string]string
		wantErr    string
	}{
		{name: "single stack", cidrs: []string{"10.99.0.0/24"},
			wantRanges: [][]map[string]string{{{"subnet": "10.99.0.0/24"}}},
			wantRoutes: []map[string]string{{"dst": "0.0.0.0/0"}}},
		{name: "host bits cleared", cidrs: []string{"10.99.0.7/24"},
			wantRanges: [][]map[string]string{{{"subnet": "10.99.0.0/24"}}},
			wantRoutes: []map[string]string{{"dst": "0.0.0.0/0"}}},
		{name: "dual stack", cidrs: []string{"10.99.0.0/24", "fd00:99::/64"},
			wantRanges: [][]map[string]string{{{"subnet": "10.99.0.0/24"}}, {{"subnet": "fd00:99::/64"}}},
			wantRoutes: []map[string]string{{"dst": "0.0.0.0/0"}, {"dst": "::/0"}}},
		{name: "IPv6 only", cidrs: []string{"fd00:99::/64"},
			wantRanges: [][]map[string]string{{{"subnet": "fd00:99::/64"}}},
			wantRoutes: []map[string]string{{"dst": "::/0"}}},
		{name: "invalid CIDR", cidrs: []string{"10.99.0.0/33"}, wantErr: `pod CIDR "10.99.0.0/33": invalid CIDR address`},
		{name: "not a CIDR", cidrs: []string{"banana"}, wantErr: `pod CIDR "banana"`},
		{name: "two of one family", cidrs: []string{"10.99.0.0/24", "10.98.0.0/24"}, wantErr: "two of one family"},
		{name: "three", cidrs: []string{"10.99.0.0/24", "fd00::/64", "10.98.0.0/24"}, wantErr: "at most two"},
		{name: "too small", cidrs: []string{"10.99.0.0/31"}, wantErr: "too small"},
		{name: "none", wantErr: "no pod CIDR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := ConfList(NetworkConfig{Name: "nodeagent", Bridge: "nabr0", PodCIDRs: tt.cidrs, DataDir: "/data", CNIVersion: "1.1.0", MACSpoofCheck: true})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := libcni.ConfListFromBytes(body); err != nil {
				t.Fatalf("libcni does not load it: %v", err)
			}
			if !Generated(body) {
				t.Error("no nodeagent marker")
			}
			var got confList
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			if got.CNIVersion != "1.1.0" || got.Name != "nodeagent" || len(got.Plugins) != 3 {
				t.Fatalf("list %+v", got)
			}
			br, pm, bw := got.Plugins[0], got.Plugins[1], got.Plugins[2]
			if br.Type != "bridge" || br.Bridge != "nabr0" || !br.IsGateway || !br.IPMasq || !br.HairpinMode || !br.MACSpoofChk {
				t.Errorf("bridge %+v", br)
			}
			if br.IPAM == nil || br.IPAM.Type != "host-local" || br.IPAM.DataDir != "/data" {
				t.Fatalf("ipam %+v", br.IPAM)
			}
			if d := cmp.Diff(tt.wantRanges, br.IPAM.Ranges); d != "" {
				t.Errorf("ranges (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tt.wantRoutes, br.IPAM.Routes); d != "" {
				t.Errorf("routes (-want +got):\n%s", d)
			}
			if pm.Type != "portmap" || !pm.Capabilities["portMappings"] {
				t.Errorf("portmap %+v", pm)
			}
			if bw.Type != "bandwidth" || !bw.Capabilities["bandwidth"] {
				t.Errorf("bandwidth %+v", bw)
			}
		})
	}
}

func TestGeneratedMarker(t *testing.T) {
	for _, tt := range []struct {
		name string
		body string
		want bool
	}{
		{name: "ours", body: `{"name":"n","generatedBy":"nodeagent"}`, want: true},
		{name: "operator's", body: `{"name":"n"}`},
		{name: "other tool", body: `{"name":"n","generatedBy":"someone"}`},
		{name: "not JSON", body: `{`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Generated([]byte(tt.body)); got != tt.want {
				t.Errorf("Generated = %v, want %v", got, tt.want)
			}
		})
	}
}

const listTmpl = `{"cniVersion":"VERSION","name":"net","plugins":[{"type":"bridge","ipam":{"type":"host-local"}},{"type":"TYPE"}]}`

func list(t *testing.T, version, second string) *libcni.NetworkConfigList {
	t.Helper()
	l, err := libcni.ConfListFromBytes([]byte(strings.NewReplacer("VERSION", version, "TYPE", second).Replace(listTmpl)))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestValidate(t *testing.T) {
	withoutLoopback := allPlugins(current)
	delete(withoutLoopback, "loopback")
	brokenStatus := allPlugins(current)
	brokenStatus["bridge"] = plugin{versions: current.versions, statusErr: "host-local: data dir /x is not writable"}
	tests := []struct {
		name    string
		plugins map[string]plugin
		version string
		second  string
		wantErr []string // substrings; none: valid
	}{
		{name: "current plugins, 1.1.0", plugins: allPlugins(current), version: "1.1.0", second: "portmap"},
		{name: "Debian's plugins, 1.0.0", plugins: allPlugins(debian), version: "1.0.0", second: "portmap"},
		{name: "unknown plugin type", plugins: allPlugins(current), version: "1.1.0", second: "nosuch",
			wantErr: []string{`plugin "nosuch"`, `failed to find plugin "nosuch"`}},
		{name: "version unsupported", plugins: allPlugins(debian), version: "1.1.0", second: "portmap",
			wantErr: []string{`plugin "bridge"`, `plugin bridge does not support config version "1.1.0"`, `plugin "portmap"`}},
		{name: "no loopback", plugins: withoutLoopback, version: "1.0.0", second: "portmap",
			wantErr: []string{`plugin "loopback" (the runtime sets up lo with it)`}},
		{name: "STATUS fails", plugins: brokenStatus, version: "1.1.0", second: "portmap",
			wantErr: []string{"plugin STATUS", "host-local: data dir /x is not writable"}},
		{name: "STATUS not sent below 1.1.0", plugins: brokenStatus, version: "1.0.0", second: "portmap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin := fakePlugins(t, tt.plugins)
			err := Validate(context.Background(), list(t, tt.version, tt.second), bin)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate accepted it")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestCheckNamesTheFile(t *testing.T) {
	conf := t.TempDir()
	bin := fakePlugins(t, allPlugins(current))
	if _, err := Check(context.Background(), conf, bin); err == nil || !strings.Contains(err.Error(), "no CNI config in") {
		t.Fatalf("empty dir: %v", err)
	}
	file := filepath.Join(conf, "05-op.conflist")
	os.WriteFile(file, []byte(strings.NewReplacer("VERSION", "1.1.0", "TYPE", "nosuch").Replace(listTmpl)), 0o644)
	n, err := Check(context.Background(), conf, bin)
	if err == nil || !strings.Contains(err.Error(), "CNI config "+file+": ") || n.File != file {
		t.Fatalf("Check = %+v, %v", n, err)
	}
	os.WriteFile(file, []byte(`{"name":`), 0o644)
	if _, err := Check(context.Background(), conf, bin); err == nil || !strings.Contains(err.Error(), "is invalid") {
		t.Fatalf("unparsable: %v", err)
	}
}

func TestEnsure(t *testing.T) {
	cfg := NetworkConfig{Name: "nodeagent", Bridge: "nabr0", PodCIDRs: []string{"10.99.0.0/24"}}
	operator := strings.NewReplacer("VERSION", "1.0.0", "TYPE", "portmap").Replace(listTmpl)
	tests := []struct {
		name        string
		plugins     map[string]plugin
		files       map[string]string // existing files of the conf dir
		cidrs       []string
		want        Written
		wantVersion string // of the target after Ensure
		wantErr     error
		wantBody    string // the target's content when it must stay as it was
	}{
		{name: "empty dir, current plugins", plugins: allPlugins(current),
			want: Written{File: "10-nodeagent.conflist", Wrote: true}, wantVersion: "1.1.0"},
		{name: "empty dir, Debian's plugins", plugins: allPlugins(debian),
			want: Written{File: "10-nodeagent.conflist", Wrote: true}, wantVersion: "1.0.0"},
		{name: "operator's config stays", plugins: allPlugins(current), files: map[string]string{"20-op.conflist": operator},
			want: Written{File: "20-op.conflist", Operator: true}},
		{name: "operator's file of our name stays", plugins: allPlugins(current), files: map[string]string{"10-nodeagent.conflist": operator},
			want: Written{File: "10-nodeagent.conflist", Operator: true}, wantBody: operator},
		{name: "ours rewritten for a new CIDR", plugins: allPlugins(current),
			files: map[string]string{"10-nodeagent.conflist": `{"name":"nodeagent","generatedBy":"nodeagent","cniVersion":"1.0.0","plugins":[]}`},
			cidrs: []string{"10.99.0.0/24", "fd00::/64"},
			want:  Written{File: "10-nodeagent.conflist", Wrote: true}, wantVersion: "1.1.0"},
		{name: "refused: the previous one stays", plugins: map[string]plugin{"bridge": current, "host-local": current, "loopback": current},
			files:   map[string]string{"10-nodeagent.conflist": `{"name":"nodeagent","generatedBy":"nodeagent","cniVersion":"1.0.0","plugins":[]}`},
			want:    Written{File: "10-nodeagent.conflist"},
			wantErr: ErrRefused, wantBody: `{"name":"nodeagent","generatedBy":"nodeagent","cniVersion":"1.0.0","plugins":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conf, bin := t.TempDir(), fakePlugins(t, tt.plugins)
			for f, body := range tt.files {
				os.WriteFile(filepath.Join(conf, f), []byte(body), 0o644)
			}
			c := cfg
			if tt.cidrs != nil {
				c.PodCIDRs = tt.cidrs
			}
			got, err := Ensure(context.Background(), conf, bin, c)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if tt.want.File != "" {
				tt.want.File = filepath.Join(conf, tt.want.File)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("Written (-want +got):\n%s", d)
			}
			body, _ := os.ReadFile(filepath.Join(conf, "10-nodeagent.conflist"))
			if tt.wantBody != "" && string(body) != tt.wantBody {
				t.Errorf("file changed to %s", body)
			}
			if tt.wantVersion != "" {
				var l confList
				json.Unmarshal(body, &l)
				if l.CNIVersion != tt.wantVersion || l.GeneratedBy != "nodeagent" {
					t.Errorf("written %s", body)
				}
				// Idempotent: a second call writes nothing.
				again, err := Ensure(context.Background(), conf, bin, c)
				if err != nil || again.Wrote {
					t.Errorf("second Ensure = %+v, %v", again, err)
				}
			}
			if tt.wantErr != nil && !strings.Contains(err.Error(), `plugin "portmap": failed to find plugin "portmap"`) {
				t.Errorf("refusal does not carry the plugin error: %v", err)
			}
			entries, _ := os.ReadDir(conf)
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), ".tmp") {
					t.Errorf("temporary file %s left", e.Name())
				}
			}
		})
	}
	t.Run("invalid CIDR is an error, nothing written", func(t *testing.T) {
		conf, bin := t.TempDir(), fakePlugins(t, allPlugins(current))
		c := cfg
		c.PodCIDRs = []string{"10.99.0.0/99"}
		if _, err := Ensure(context.Background(), conf, bin, c); err == nil || errors.Is(err, ErrRefused) {
			t.Fatalf("err = %v", err)
		}
		if entries, _ := os.ReadDir(conf); len(entries) != 0 {
			t.Errorf("wrote %v", entries)
		}
	})
}
