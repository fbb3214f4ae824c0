package cri

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/internal/downward"
)

func TestExpand(t *testing.T) {
	vals := map[string]string{"A": "alpha", "B": "beta", "EMPTY": ""}
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "no reference", in: "plain text", want: "plain text"},
		{name: "one reference", in: "$(A)", want: "alpha"},
		{name: "references inside text", in: "x-$(A)-$(B)-y", want: "x-alpha-beta-y"},
		{name: "adjacent references", in: "$(A)$(B)", want: "alphabeta"},
		{name: "empty value", in: "[$(EMPTY)]", want: "[]"},
		{name: "escaped reference", in: "$$(A)", want: "$(A)"},
		{name: "escaped dollar then reference", in: "$$$(A)", want: "$alpha"},
		{name: "double escape", in: "$$$$", want: "$$"},
		{name: "unknown reference kept", in: "$(NOPE) and $(A)", want: "$(NOPE) and alpha"},
		{name: "unclosed reference kept", in: "$(A", want: "$(A"},
		{name: "unclosed after a good one", in: "$(A) $(B", want: "alpha $(B"},
		{name: "lone dollar", in: "cost: 5$ now", want: "cost: 5$ now"},
		{name: "trailing dollar", in: "end$", want: "end$"},
		{name: "dollar before a letter", in: "$A", want: "$A"},
		{name: "shell syntax is not expanded", in: "${A}", want: "${A}"},
		{name: "empty name", in: "$()", want: "$()"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := expand(tt.in, vals); got != tt.want {
				t.Errorf("expand(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestExpandAll(t *testing.T) {
	got := expandAll([]string{"echo", "$(GREETING), $(NAME)", "$$(NAME)"}, []string{"GREETING=hello", "NAME=a=b"})
	want := []string{"echo", "hello, a=b", "$(NAME)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("expandAll() (-want +got):\n%s", diff)
	}
	if got := expandAll(nil, []string{"A=1"}); got != nil {
		t.Errorf("expandAll(nil) = %v, want nil", got)
	}
}

// envPod is the pod whose environment TestEnvFor resolves.
var envPod = &v1.Pod{
	ObjectMeta: metav1.ObjectMeta{
		Name: "web-node1", Namespace: "prod", UID: "uid-42",
		Labels:      map[string]string{"app": "web", "tier": "front"},
		Annotations: map[string]string{"owner": "ops"},
	},
	Spec: v1.PodSpec{NodeName: "node1", ServiceAccountName: "sa"},
}

func fieldEnv(name, path string) v1.EnvVar {
	return v1.EnvVar{Name: name, ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}}
}

func TestEnvFor(t *testing.T) {
	r := &Runtime{cfg: Config{NodeName: "node1", NodeIP: "192.168.1.10"}, node: downward.Node{IP: "192.168.1.10"}}
	tests := []struct {
		name    string
		env     []v1.EnvVar
		envFrom []v1.EnvFromSource
		want    []string
		wantErr string
	}{
		{name: "no env"},
		{
			name: "literals in order",
			env:  []v1.EnvVar{{Name: "B", Value: "2"}, {Name: "A", Value: "1"}},
			want: []string{"B=2", "A=1"},
		},
		{
			name: "reference to an earlier variable",
			env:  []v1.EnvVar{{Name: "HOST", Value: "db"}, {Name: "URL", Value: "postgres://$(HOST):5432"}},
			want: []string{"HOST=db", "URL=postgres://db:5432"},
		},
		{
			name: "reference to a later variable is kept",
			env:  []v1.EnvVar{{Name: "URL", Value: "postgres://$(HOST)"}, {Name: "HOST", Value: "db"}},
			want: []string{"URL=postgres://$(HOST)", "HOST=db"},
		},
		{
			name: "a redefined variable keeps its place, last value wins",
			env:  []v1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "$(A)"}, {Name: "A", Value: "3"}},
			want: []string{"A=3", "B=1"},
		},
		{
			name: "downward API fields",
			env: []v1.EnvVar{
				fieldEnv("POD_NAME", "metadata.name"),
				fieldEnv("POD_NAMESPACE", "metadata.namespace"),
				fieldEnv("POD_UID", "metadata.uid"),
				fieldEnv("NODE", "spec.nodeName"),
				fieldEnv("SA", "spec.serviceAccountName"),
				fieldEnv("POD_IP", "status.podIP"),
				fieldEnv("POD_IPS", "status.podIPs"),
				fieldEnv("HOST_IP", "status.hostIP"),
				fieldEnv("APP", "metadata.labels['app']"),
				fieldEnv("OWNER", "metadata.annotations['owner']"),
				fieldEnv("MISSING", "metadata.labels['missing']"),
			},
			want: []string{
				"POD_NAME=web-node1", "POD_NAMESPACE=prod", "POD_UID=uid-42", "NODE=node1", "SA=sa",
				"POD_IP=10.88.0.7", "POD_IPS=10.88.0.7", "HOST_IP=192.168.1.10", "APP=web", "OWNER=ops", "MISSING=",
			},
		},
		{
			name: "field values can be referenced",
			env:  []v1.EnvVar{fieldEnv("POD_IP", "status.podIP"), {Name: "ADDR", Value: "$(POD_IP):8080"}},
			want: []string{"POD_IP=10.88.0.7", "ADDR=10.88.0.7:8080"},
		},
		{
			name:    "unsupported field path",
			env:     []v1.EnvVar{fieldEnv("X", "metadata.generation")},
			wantErr: `unsupported fieldPath "metadata.generation"`,
		},
		{
			name: "configMap reference needs an API server",
			env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
				LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, Key: "k"}}}},
			wantErr: `couldn't get configMap prod/cm without an API server: nodeagent runs standalone`,
		},
		{
			name: "optional configMap reference needs an API server too",
			env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
				LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, Key: "k", Optional: ptr.To(true)}}}},
			wantErr: `without an API server`,
		},
		{
			name:    "envFrom needs an API server",
			envFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "s"}}}},
			wantErr: "couldn't get secret prod/s without an API server",
		},
		{
			name: "labels and annotations as a whole",
			env:  []v1.EnvVar{fieldEnv("L", "metadata.labels"), fieldEnv("A", "metadata.annotations")},
			want: []string{"L=app=\"web\"\ntier=\"front\"", "A=owner=\"ops\""},
		},
		{
			name: "resource of the container, limit defaulted to the node's CPUs",
			env: []v1.EnvVar{
				{Name: "CPU", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu"}}},
				{Name: "MEM_MI", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{
					Resource: "requests.memory", Divisor: resource.MustParse("1Mi")}}},
			},
			want: []string{"CPU=" + strconv.Itoa(runtime.NumCPU()), "MEM_MI=0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &v1.Container{Name: "app", Env: tt.env, EnvFrom: tt.envFrom}
			got, err := r.envFor(context.Background(), envPod, c, []string{"10.88.0.7"})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("envFor() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("envFor() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("envFor() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEnvForPodIPsAndAllocatable: status.podIPs gives every pod IP
// (dual stack), status.hostIPs the node's, and a resource limit the
// container does not set reads as the node's allocatable amount.
func TestEnvForPodIPsAndAllocatable(t *testing.T) {
	allocatable := v1.ResourceList{v1.ResourceCPU: resource.MustParse("3"), v1.ResourceMemory: resource.MustParse("6Gi")}
	r := &Runtime{cfg: Config{NodeName: "node1", NodeIP: "192.168.1.10"}, node: downward.Node{IP: "192.168.1.10", Allocatable: allocatable}}
	c := &v1.Container{Name: "app", Env: []v1.EnvVar{
		fieldEnv("POD_IP", "status.podIP"),
		fieldEnv("POD_IPS", "status.podIPs"),
		fieldEnv("HOST_IP", "status.hostIP"),
		fieldEnv("HOST_IPS", "status.hostIPs"),
		{Name: "CPU", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu"}}},
		{Name: "MEM_GI", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Gi")}}},
	}}
	got, err := r.envFor(context.Background(), envPod, c, []string{"fd00:10:88::7", "10.88.0.7"})
	if err != nil {
		t.Fatalf("envFor() error = %v", err)
	}
	want := []string{
		"POD_IP=10.88.0.7", "POD_IPS=10.88.0.7,fd00:10:88::7", "HOST_IP=192.168.1.10", "HOST_IPS=192.168.1.10",
		"CPU=3", "MEM_GI=6",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("envFor() (-want +got):\n%s", diff)
	}
}
