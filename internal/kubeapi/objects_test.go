package kubeapi

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/cri"
)

func svc(ns, name, ip string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ServiceSpec{ClusterIP: ip, Ports: ports}}
}

func TestServiceEnvFollowsTheKubelet(t *testing.T) {
	o := NewObjects(fake.NewClientset(), testclock.NewFakeClock(time.Now()), "", zaptest.NewLogger(t))
	o.synced = func() bool { return true }
	store := o.factory.Core().V1().Services().Informer().GetStore()
	store.Add(svc("default", "kubernetes", "10.96.0.1", v1.ServicePort{Name: "https", Port: 443, Protocol: v1.ProtocolTCP}))
	store.Add(svc("app", "my-db", "10.96.0.9", v1.ServicePort{Name: "pg", Port: 5432, Protocol: v1.ProtocolTCP}))
	store.Add(svc("app", "headless", v1.ClusterIPNone))
	store.Add(svc("other", "x", "10.96.0.7", v1.ServicePort{Port: 80, Protocol: v1.ProtocolTCP}))
	env, err := o.ServiceEnv(context.Background(), "app", true)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443", "KUBERNETES_SERVICE_PORT_HTTPS": "443",
		"MY_DB_SERVICE_HOST": "10.96.0.9", "MY_DB_PORT": "tcp://10.96.0.9:5432", "MY_DB_PORT_5432_TCP_ADDR": "10.96.0.9",
		"MY_DB_PORT_5432_TCP_PROTO": "tcp", "MY_DB_SERVICE_PORT_PG": "5432",
	} {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	for k := range env {
		if k == "HEADLESS_SERVICE_HOST" || k == "X_SERVICE_HOST" {
			t.Errorf("%s set", k)
		}
	}
	env, _ = o.ServiceEnv(context.Background(), "app", false)
	if env["MY_DB_SERVICE_HOST"] != "" || env["KUBERNETES_SERVICE_HOST"] == "" {
		t.Errorf("enableServiceLinks=false: %v", env)
	}
}

func TestServiceEnvBeforeTheServicesAreRead(t *testing.T) {
	ckpt := filepath.Join(t.TempDir(), "services.json")
	o := NewObjects(fake.NewClientset(), testclock.NewFakeClock(time.Now()), ckpt, zaptest.NewLogger(t))
	o.synced = func() bool { return false }
	if _, err := o.ServiceEnv(context.Background(), "app", true); !errors.Is(err, cri.ErrServicesNotSynced) {
		t.Fatalf("err = %v, want ErrServicesNotSynced without a checkpoint", err)
	}
	// An earlier run saved the services: they are used while the API
	// server is away.
	o.factory.Core().V1().Services().Informer().GetStore().Add(svc("default", "kubernetes", "10.96.0.1",
		v1.ServicePort{Name: "https", Port: 443, Protocol: v1.ProtocolTCP}))
	if _, err := o.saveServices(nil); err != nil {
		t.Fatal(err)
	}
	clk := testclock.NewFakeClock(time.Now())
	again := NewObjects(fake.NewClientset(), clk, ckpt, zaptest.NewLogger(t))
	again.synced = func() bool { return false }
	// Right after the start the API server may just be slow: pods wait.
	if _, err := again.ServiceEnv(context.Background(), "app", true); !errors.Is(err, cri.ErrServicesNotSynced) {
		t.Fatalf("err = %v right after the start, want ErrServicesNotSynced", err)
	}
	clk.Step(savedServicesAfter)
	env, err := again.ServiceEnv(context.Background(), "app", true)
	if err != nil || env["KUBERNETES_SERVICE_HOST"] != "10.96.0.1" {
		t.Fatalf("env %v, err %v", env, err)
	}
}

func TestInformersCacheNoManagedFields(t *testing.T) {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	got, err := stripManagedFields(p)
	if err != nil || got.(*v1.Pod).ManagedFields != nil || got.(*v1.Pod).Name != "a" {
		t.Fatalf("stripped to %+v, %v", got, err)
	}
	// Tombstones and other non-objects pass through.
	if got, err := stripManagedFields("x"); got != "x" || err != nil {
		t.Fatalf("non-object became %v, %v", got, err)
	}
}
