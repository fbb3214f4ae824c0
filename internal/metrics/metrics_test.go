package metrics

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/pod"
)

var t0 = time.Unix(1_700_000_000, 0)

// snapshot is a PLEG view: one pod with a ready sandbox and a running and
// an exited container, one whose sandbox is gone.
var snapshot = map[pod.UID]*pod.RuntimeStatus{
	"u1": {UID: "u1", Sandboxes: []*pod.Sandbox{{State: runtimeapi.PodSandboxState_SANDBOX_READY}},
		Containers: []*pod.Container{{State: pod.ContainerRunning}, {State: pod.ContainerExited}}},
	"u2": {UID: "u2", Sandboxes: []*pod.Sandbox{{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}},
		Containers: []*pod.Container{{State: pod.ContainerExited}}},
}

func TestHandler(t *testing.T) {
	clk := testclock.NewFakeClock(t0)
	m := New(clk)
	m.AddGauges(Gauges{Workers: func() float64 { return 3 }, DroppedEvents: func() float64 { return 7 },
		Runtime: func() (map[pod.UID]*pod.RuntimeStatus, time.Time) { return snapshot, t0 }})
	m.ObserveIteration("pleg", 2*time.Millisecond)
	m.ObserveRelist(t0, time.Millisecond, nil)
	m.ObserveRelist(t0.Add(time.Second), time.Millisecond, errors.New("runtime down"))
	m.ObserveRelist(t0.Add(2*time.Second), time.Millisecond, nil) // 2 s since the last successful one
	m.ObservePodSync("create", 10*time.Millisecond)
	m.record("run_podsandbox", t0, nil)
	healthErr := error(nil)
	srv := httptest.NewServer(m.Handler(func() error { return healthErr }))
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || body != "ok" {
		t.Fatalf("healthz = %d %q", code, body)
	}
	healthErr = errors.New("pleg was last seen active 4m ago")
	if code, body := get("/healthz"); code != 500 || !strings.Contains(body, "pleg") {
		t.Fatalf("unhealthy healthz = %d %q", code, body)
	}
	_, body := get("/metrics")
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	// Each family's type and the label names of its samples (the
	// histograms' and the vectors' before any observation are absent).
	type family struct {
		Type   string
		Labels string
	}
	got := map[string]family{}
	for name, mf := range families {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			continue
		}
		var labels []string
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				labels = append(labels, l.GetName())
			}
		}
		sort.Strings(labels)
		got[name] = family{mf.GetType().String(), strings.Join(labels, ",")}
	}
	want := map[string]family{
		"nodeagent_sync_loop_iteration_duration_seconds":       {"HISTOGRAM", "kind"},
		"nodeagent_pod_workers":                                {"GAUGE", ""},
		"kubelet_pleg_relist_duration_seconds":                 {"HISTOGRAM", ""},
		"kubelet_pleg_relist_interval_seconds":                 {"HISTOGRAM", ""},
		"kubelet_pleg_last_seen_seconds":                       {"GAUGE", ""},
		"kubelet_pleg_discard_events":                          {"COUNTER", ""},
		"kubelet_pod_worker_duration_seconds":                  {"HISTOGRAM", "operation_type"},
		"kubelet_runtime_operations_total":                     {"COUNTER", "operation_type"},
		"kubelet_runtime_operations_duration_seconds":          {"HISTOGRAM", "operation_type"},
		"kubelet_pod_start_duration_seconds":                   {"HISTOGRAM", ""},
		"kubelet_pod_start_sli_duration_seconds":               {"HISTOGRAM", ""},
		"kubelet_pod_start_total_duration_seconds":             {"HISTOGRAM", ""},
		"kubelet_first_network_pod_start_sli_duration_seconds": {"GAUGE", ""},
		"kubelet_running_pods":                                 {"GAUGE", ""},
		"kubelet_running_containers":                           {"GAUGE", "container_state,container_state,container_state,container_state"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metric families (-want +got):\n%s", diff)
	}
	for _, line := range []string{
		`nodeagent_sync_loop_iteration_duration_seconds_count{kind="pleg"} 1`,
		"kubelet_pleg_relist_duration_seconds_count 3", // the failed one too
		"kubelet_pleg_relist_interval_seconds_sum 3",   // 1 s and 2 s since the last success
		"kubelet_pleg_last_seen_seconds 1.7e+09",
		"kubelet_pleg_discard_events 7",
		`kubelet_pod_worker_duration_seconds_count{operation_type="create"} 1`,
		`kubelet_runtime_operations_total{operation_type="run_podsandbox"} 1`,
		"nodeagent_pod_workers 3",
		"kubelet_running_pods 1",
		`kubelet_running_containers{container_state="running"} 1`,
		`kubelet_running_containers{container_state="exited"} 2`,
		`kubelet_running_containers{container_state="created"} 0`,
		`kubelet_running_containers{container_state="unknown"} 0`,
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("metrics lack %q", line)
		}
	}
	// The kubelet's buckets.
	for name, le := range map[string]string{
		"kubelet_pleg_relist_duration_seconds_bucket":        `le="10"`,
		"kubelet_runtime_operations_duration_seconds_bucket": `le="745.0580596923828"`,
	} {
		if !strings.Contains(body, name+"{") || !strings.Contains(body, le) {
			t.Errorf("%s lacks the kubelet's bucket %s", name, le)
		}
	}
}

// Before the first relist there is no last-seen time to show.
func TestNoLastSeenBeforeFirstRelist(t *testing.T) {
	m := New(testclock.NewFakeClock(t0))
	m.AddGauges(Gauges{Runtime: func() (map[pod.UID]*pod.RuntimeStatus, time.Time) { return nil, time.Time{} }})
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() == "kubelet_pleg_last_seen_seconds" {
			t.Errorf("kubelet_pleg_last_seen_seconds = %v before the first relist", mf.GetMetric())
		}
	}
}

// The device plugin and pod resources metrics carry the kubelet's names
// and labels.
func TestDeviceMetrics(t *testing.T) {
	m := New(testclock.NewFakeClock(time.Unix(1, 0)))
	m.Devices.Registered("example.com/r")
	m.Devices.Allocated("example.com/r", 20*time.Millisecond)
	m.Devices.PodResourcesRequest("list")
	m.Devices.PodResourcesRequest("get")
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		switch f.GetName() {
		case "kubelet_device_plugin_registration_total":
			if mt := f.GetMetric()[0]; mt.GetCounter().GetValue() != 1 || mt.GetLabel()[0].GetName() != "resource_name" || mt.GetLabel()[0].GetValue() != "example.com/r" {
				t.Errorf("registrations %v", mt)
			}
		case "kubelet_pod_resources_endpoint_requests_total":
			if mt := f.GetMetric()[0]; mt.GetCounter().GetValue() != 2 || mt.GetLabel()[0].GetValue() != "v1" {
				t.Errorf("pod resources requests %v", mt)
			}
		}
	}
	want := map[string]bool{"kubelet_device_plugin_registration_total": false, "kubelet_device_plugin_alloc_duration_seconds": false,
		"kubelet_pod_resources_endpoint_requests_total": false, "kubelet_pod_resources_endpoint_requests_list": false,
		"kubelet_pod_resources_endpoint_requests_get": false}
	for _, f := range fams {
		if _, ok := want[f.GetName()]; ok {
			want[f.GetName()] = true
		}
	}
	for name, seen := range want {
		if !seen {
			t.Errorf("%s not exported", name)
		}
	}
}
