// Command controlplane runs the control plane of `make conformance`
// (hack/conformance.sh): test/e2e/cluster's etcd, kube-apiserver and
// kube-controller-manager, plus kube-scheduler (the conformance suite
// creates pods without spec.nodeName), all on 127.0.0.1. It approves the
// node's client CSRs as an operator would, writes the paths the script
// needs to -env as shell assignments, and runs until SIGTERM or SIGINT,
// when it stops every process it started. The processes die with it
// (Pdeathsig), so a killed helper leaks nothing.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/nodeagent/nodeagent/test/e2e/cluster"
)

func main() {
	dir := flag.String("dir", "", "directory for certificates, kubeconfigs, etcd data and logs (required)")
	bin := flag.String("bin", "", "directory of etcd, kube-apiserver, kube-controller-manager, kubectl and kube-scheduler")
	env := flag.String("env", "", "file to write CP_* shell assignments to once the control plane is up (required)")
	flag.Parse()
	if *dir == "" || *env == "" {
		log.Fatal("controlplane: -dir and -env are required")
	}
	logf := func(format string, args ...any) { log.Printf(format, args...) }

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	c, err := cluster.Start(startCtx, cluster.Options{Dir: *dir, BinDir: *bin, Logf: logf})
	cancel()
	if err != nil {
		log.Fatalf("controlplane: %v", err)
	}
	defer c.Stop()

	sched, err := startScheduler(c, *bin)
	if err != nil {
		log.Printf("controlplane: %v", err)
		return
	}
	defer sched.stop()

	if err := writeEnv(*env, c); err != nil {
		log.Printf("controlplane: %v", err)
		return
	}
	log.Printf("controlplane: up at %s (env %s)", c.URL, *env)

	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			log.Printf("controlplane: stopping")
			return
		case <-t.C:
			actx, acancel := context.WithTimeout(ctx, 10*time.Second)
			if n, err := c.ApproveCSRs(actx, "kubernetes.io/kube-apiserver-client-kubelet"); err != nil {
				log.Printf("controlplane: approve CSRs: %v", err)
			} else if n > 0 {
				log.Printf("controlplane: approved %d kubelet client CSR(s)", n)
			}
			acancel()
		}
	}
}

type scheduler struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// stop sends SIGTERM, waits up to 15 s, then SIGKILL.
func (s *scheduler) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}

// startScheduler runs kube-scheduler as system:masters with the admin
// kubeconfig, serving nothing, logging into the cluster's directory.
func startScheduler(c *cluster.Cluster, bin string) (*scheduler, error) {
	if bin == "" {
		cache := os.Getenv("NODEAGENT_RIG_CACHE")
		if cache == "" {
			cache = "/root/.cache/nodeagent-rig"
		}
		bin = filepath.Join(cache, "bin")
	}
	logFile, err := os.Create(filepath.Join(c.Dir, "kube-scheduler.log"))
	if err != nil {
		return nil, fmt.Errorf("create scheduler log: %w", err)
	}
	cmd := exec.Command(filepath.Join(bin, "kube-scheduler"),
		"--kubeconfig="+c.AdminKubeconfig,
		"--authentication-kubeconfig="+c.AdminKubeconfig,
		"--authorization-kubeconfig="+c.AdminKubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		"--leader-elect=false",
		"--profiling=false",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start kube-scheduler: %w", err)
	}
	s := &scheduler{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); logFile.Close(); close(s.done) }()
	return s, nil
}

func writeEnv(path string, c *cluster.Cluster) error {
	body := fmt.Sprintf("CP_URL='%s'\nCP_ADMIN_KUBECONFIG='%s'\nCP_BOOTSTRAP_KUBECONFIG='%s'\nCP_CA_FILE='%s'\nCP_PID='%d'\n",
		c.URL, c.AdminKubeconfig, c.BootstrapKubeconfig, c.CAFile, os.Getpid())
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return nil
}
