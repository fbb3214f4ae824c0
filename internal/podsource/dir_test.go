package podsource

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/pod"
)

const dirNode = "node1"

// Manifests used by the Dir tests.
const (
	manifestWeb = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: app
    image: nginx:1.25
`
	manifestWebEdited = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: app
    image: nginx:1.26
`
	manifestDB = `apiVersion: v1
kind: Pod
metadata:
  name: db
spec:
  containers:
  - name: pg
    image: postgres:16
`
	manifestCache = `apiVersion: v1
kind: Pod
metadata:
  name: cache
spec:
  containers:
  - name: redis
    image: redis:7
`
	manifestBroken = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: app
    image: [nginx
`
	manifestInvalid = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: App_1
    image: nginx:1.25
`
)

// dirHarness is a Dir over a temporary directory whose sink records what
// it receives.
type dirHarness struct {
	t     *testing.T
	path  string
	dir   *Dir
	clock *testclock.FakeClock
	got   [][]*v1.Pod
	// mtime is the modification time the next write gets; each write
	// moves it on by a second, so a rewrite is always seen as a change
	// whatever the file system's timestamp granularity.
	mtime time.Time
}

func newDirHarness(t *testing.T) *dirHarness {
	t.Helper()
	h := &dirHarness{t: t, path: t.TempDir(), clock: testclock.NewFakeClock(time.Unix(1_700_000_000, 0)), mtime: time.Unix(1_600_000_000, 0)}
	d, err := NewDir(DirConfig{
		Path:     h.path,
		NodeName: dirNode,
		Clock:    h.clock,
		Logger:   zaptest.NewLogger(t),
		Sink:     func(pods []*v1.Pod) { h.got = append(h.got, pods) },
	})
	if err != nil {
		t.Fatalf("NewDir() error = %v", err)
	}
	h.dir = d
	return h
}

func (h *dirHarness) write(name, content string) {
	h.t.Helper()
	p := filepath.Join(h.path, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
	h.mtime = h.mtime.Add(time.Second)
	if err := os.Chtimes(p, h.mtime, h.mtime); err != nil {
		h.t.Fatal(err)
	}
}

// relist runs one Relist and returns what the sink got.
func (h *dirHarness) relist() []*v1.Pod {
	h.t.Helper()
	n := len(h.got)
	h.dir.Relist()
	if len(h.got) != n+1 {
		h.t.Fatalf("Relist delivered %d sets, want exactly 1", len(h.got)-n)
	}
	return h.got[n]
}

// podView is what the Dir tests compare of a delivered pod.
type podView struct {
	Name, Namespace, Image string
	UID                    pod.UID
}

func views(pods []*v1.Pod) []podView {
	out := []podView{}
	for _, p := range pods {
		out = append(out, podView{Name: p.Name, Namespace: p.Namespace, Image: p.Spec.Containers[0].Image, UID: p.UID})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func names(pods []*v1.Pod) []string {
	out := []string{}
	for _, v := range views(pods) {
		out = append(out, v.Name)
	}
	return out
}

func TestNewDirRequiresConfig(t *testing.T) {
	good := DirConfig{Path: "/x", NodeName: "n", Clock: testclock.NewFakeClock(time.Unix(0, 0)), Logger: zaptest.NewLogger(t), Sink: func([]*v1.Pod) {}}
	tests := []struct {
		name   string
		mutate func(c *DirConfig)
		ok     bool
	}{
		{name: "complete", mutate: func(*DirConfig) {}, ok: true},
		{name: "no path", mutate: func(c *DirConfig) { c.Path = "" }},
		{name: "no node name", mutate: func(c *DirConfig) { c.NodeName = "" }},
		{name: "no sink", mutate: func(c *DirConfig) { c.Sink = nil }},
		{name: "no logger", mutate: func(c *DirConfig) { c.Logger = nil }},
		{name: "no clock", mutate: func(c *DirConfig) { c.Clock = nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good
			tt.mutate(&cfg)
			_, err := NewDir(cfg)
			if (err == nil) != tt.ok {
				t.Errorf("NewDir() error = %v, want ok = %v", err, tt.ok)
			}
		})
	}
}

func TestDirReadsPods(t *testing.T) {
	h := newDirHarness(t)
	h.write("a.yaml", manifestWeb+"---\n"+manifestDB)
	h.write("b.json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"cache"},"spec":{"containers":[{"name":"redis","image":"redis:7"}]}}`)
	h.write("c.yaml", yamlConfigMap+"---\n"+strings.Replace(manifestCache, "name: cache", "name: cache2", 1))
	h.write(".hidden.yaml", strings.Replace(manifestWeb, "name: web", "name: hidden", 1))
	h.write("sub/nested.yaml", strings.Replace(manifestWeb, "name: web", "name: nested", 1))

	got := h.relist()
	want := []string{"cache-node1", "cache2-node1", "db-node1", "web-node1"}
	if diff := cmp.Diff(want, names(got)); diff != "" {
		t.Errorf("pods (-want +got):\n%s", diff)
	}
	for _, p := range got {
		if p.Namespace != "default" || p.Annotations[ConfigSourceAnnotation] != pod.SourceFile || p.UID == "" {
			t.Errorf("pod %s not defaulted as a static pod: ns=%q source=%q uid=%q",
				p.Name, p.Namespace, p.Annotations[ConfigSourceAnnotation], p.UID)
		}
	}
	if probs := h.dir.Problems(); len(probs) != 0 {
		t.Errorf("Problems() = %v, want none", probs)
	}
}

func TestDirEmptyAndMissingDirectory(t *testing.T) {
	h := newDirHarness(t)
	if got := h.relist(); len(got) != 0 {
		t.Errorf("empty directory delivered %v, want no pods", names(got))
	}
	// The sink is called even with nothing, so the source counts as seen.
	if err := os.Remove(h.path); err != nil {
		t.Fatal(err)
	}
	if got := h.relist(); len(got) != 0 {
		t.Errorf("missing directory delivered %v, want no pods", names(got))
	}
}

func TestDirBrokenFileDoesNotStopOthers(t *testing.T) {
	tests := []struct {
		name    string
		content string
		problem string
	}{
		{name: "unparsable", content: manifestBroken, problem: "document 0"},
		{name: "invalid", content: manifestInvalid, problem: "spec.containers[0].name"},
		{name: "second document broken", content: manifestDB + "---\n" + manifestBroken, problem: "document 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newDirHarness(t)
			h.write("a.yaml", tt.content)
			h.write("b.yaml", manifestCache)

			got := h.relist()
			if diff := cmp.Diff([]string{"cache-node1"}, names(got)); diff != "" {
				t.Errorf("pods (-want +got):\n%s", diff)
			}
			probs := h.dir.Problems()
			if len(probs) != 1 || !strings.Contains(probs["a.yaml"], tt.problem) {
				t.Errorf("Problems() = %v, want only a.yaml mentioning %q", probs, tt.problem)
			}
		})
	}
}

func TestDirBrokenEditKeepsLastGoodPods(t *testing.T) {
	h := newDirHarness(t)
	h.write("web.yaml", manifestWeb)
	h.write("db.yaml", manifestDB)
	before := views(h.relist())

	h.write("web.yaml", manifestBroken)
	during := views(h.relist())
	if diff := cmp.Diff(before, during); diff != "" {
		t.Errorf("a broken edit changed the pods (-before +after):\n%s", diff)
	}
	if p := h.dir.Problems(); !strings.Contains(p["web.yaml"], "document 0") || len(p) != 1 {
		t.Errorf("Problems() = %v, want web.yaml named", p)
	}

	// Relisting again without a change keeps both the pods and the problem.
	if diff := cmp.Diff(before, views(h.relist())); diff != "" {
		t.Errorf("second relist of the broken file changed the pods (-before +after):\n%s", diff)
	}
	if _, ok := h.dir.Problems()["web.yaml"]; !ok {
		t.Errorf("problem forgotten on an unchanged relist")
	}

	h.write("web.yaml", manifestWebEdited)
	after := views(h.relist())
	if p := h.dir.Problems(); len(p) != 0 {
		t.Errorf("Problems() after the fix = %v, want none", p)
	}
	want := []podView{before[0], {Name: "web-node1", Namespace: "default", Image: "nginx:1.26", UID: after[1].UID}}
	if diff := cmp.Diff(want, after); diff != "" {
		t.Errorf("pods after the fix (-want +got):\n%s", diff)
	}
	if after[1].UID == before[1].UID {
		t.Errorf("an edited spec kept UID %q; it must change so the pod is replaced", after[1].UID)
	}
}

func TestDirBrokenNewFileHasNoPods(t *testing.T) {
	h := newDirHarness(t)
	h.write("web.yaml", manifestBroken)
	if got := h.relist(); len(got) != 0 {
		t.Errorf("pods = %v, want none from a file that was never good", names(got))
	}
	h.write("web.yaml", manifestWeb)
	if diff := cmp.Diff([]string{"web-node1"}, names(h.relist())); diff != "" {
		t.Errorf("pods after the fix (-want +got):\n%s", diff)
	}
}

func TestDirRenameKeepsUIDs(t *testing.T) {
	h := newDirHarness(t)
	h.write("web.yaml", manifestWeb+"---\n"+manifestDB)
	before := views(h.relist())
	if err := os.Rename(filepath.Join(h.path, "web.yaml"), filepath.Join(h.path, "renamed.yml")); err != nil {
		t.Fatal(err)
	}
	after := views(h.relist())
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("rename changed the pods (-before +after):\n%s", diff)
	}
}

func TestDirDuplicateNameFirstFileWins(t *testing.T) {
	h := newDirHarness(t)
	h.write("b.yaml", manifestWebEdited)
	h.write("a.yaml", manifestWeb)
	h.write("c.yaml", manifestWeb) // identical content: same UID too
	got := views(h.relist())
	if len(got) != 1 || got[0].Image != "nginx:1.25" {
		t.Fatalf("pods = %+v, want only a.yaml's web (nginx:1.25)", got)
	}

	// Removing the winner lets the next file's pod in.
	if err := os.Remove(filepath.Join(h.path, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	got = views(h.relist())
	if len(got) != 1 || got[0].Image != "nginx:1.26" {
		t.Fatalf("pods after removing a.yaml = %+v, want b.yaml's web (nginx:1.26)", got)
	}
}

func TestDirDeletedFileRemovesItsPodsAndProblems(t *testing.T) {
	h := newDirHarness(t)
	h.write("web.yaml", manifestWeb)
	h.write("db.yaml", manifestDB)
	h.write("bad.yaml", manifestBroken)
	if diff := cmp.Diff([]string{"db-node1", "web-node1"}, names(h.relist())); diff != "" {
		t.Fatalf("pods (-want +got):\n%s", diff)
	}
	for _, f := range []string{"web.yaml", "bad.yaml"} {
		if err := os.Remove(filepath.Join(h.path, f)); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"db-node1"}, names(h.relist())); diff != "" {
		t.Errorf("pods after deleting web.yaml (-want +got):\n%s", diff)
	}
	if p := h.dir.Problems(); len(p) != 0 {
		t.Errorf("Problems() = %v, want the deleted file's problem gone", p)
	}
}

func TestDirUnchangedFileYieldsSamePods(t *testing.T) {
	h := newDirHarness(t)
	h.write("web.yaml", manifestWeb)
	first := h.relist()
	second := h.relist()
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("relist of an unchanged directory differs (-first +second):\n%s", diff)
	}
}

func TestDirSameSizeEditWithinOneTimestampTick(t *testing.T) {
	h := newDirHarness(t)
	h.write("web.yaml", manifestWeb)
	before := views(h.relist())

	// Same length (1.25 -> 1.26) and, as for two writes within one
	// coarse timestamp tick, the same mtime.
	p := filepath.Join(h.path, "web.yaml")
	if err := os.WriteFile(p, []byte(manifestWebEdited), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, h.mtime, h.mtime); err != nil {
		t.Fatal(err)
	}
	after := views(h.relist())
	if len(after) != 1 || after[0].Image != "nginx:1.26" || after[0].UID == before[0].UID {
		t.Errorf("pods after the edit = %+v, want web with nginx:1.26 and a new UID (before: %+v)", after, before)
	}
}

// An inotify-triggered relist re-reads only the files its events name
// (and files never read); the periodic relist re-reads every file.
func TestDirEventRelistReadsOnlyNamedFiles(t *testing.T) {
	h := newDirHarness(t)
	h.write("web.yaml", manifestWeb)
	h.write("db.yaml", manifestDB)
	first := h.relist()
	byName := func(pods []*v1.Pod) map[string]*v1.Pod {
		m := map[string]*v1.Pod{}
		for _, p := range pods {
			m[p.Name] = p
		}
		return m
	}
	before := byName(first)
	h.write("web.yaml", manifestWebEdited)
	h.write("db.yaml", strings.Replace(manifestDB, "postgres:16", "postgres:17", 1))
	h.dir.relist(map[string]bool{"web.yaml": true})
	after := byName(h.got[len(h.got)-1])
	if after["web-node1"].UID == before["web-node1"].UID {
		t.Fatal("the named file was not re-read")
	}
	if after["db-node1"] != before["db-node1"] {
		t.Fatal("a file no event named was re-read by the event relist")
	}
	if full := byName(h.relist()); full["db-node1"].UID == before["db-node1"].UID {
		t.Fatal("the periodic relist did not re-read every file")
	}
}

// A symlinked manifest is read, as the kubelet does.
func TestDirFollowsSymlinks(t *testing.T) {
	h := newDirHarness(t)
	target := filepath.Join(t.TempDir(), "web.yaml")
	if err := os.WriteFile(target, []byte(manifestWeb), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(h.path, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	if got := h.relist(); len(got) != 1 || got[0].Name != "web-node1" {
		t.Fatalf("got %d pods, want the symlinked one", len(got))
	}
}
