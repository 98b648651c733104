package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"time"
)

// ControllerManagerOptions configure kube-controller-manager for an apiserver.
type ControllerManagerOptions struct {
	Dir string
	// Controllers is the --controllers value (default "*").
	Controllers string
	ExtraArgs   []string
}

// StartControllerManager runs kube-controller-manager against a (signing CSRs with its CA,
// minting service account tokens with its key) and waits until it holds no error in its first
// moments. It serves nothing: no port is opened.
func StartControllerManager(ctx context.Context, tools Tools, a *APIServer, o ControllerManagerOptions) (*Process, error) {
	if o.Controllers == "" {
		o.Controllers = "*"
	}
	p := &Process{
		Name: "kube-controller-manager " + a.Name, Path: tools.Path("kube-controller-manager"),
		LogPath: filepath.Join(o.Dir, "kube-controller-manager.log"),
		Args: append([]string{
			"--kubeconfig=" + a.AdminKubeconfig, "--authentication-kubeconfig=" + a.AdminKubeconfig,
			"--authorization-kubeconfig=" + a.AdminKubeconfig,
			"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0",
			"--controllers=" + o.Controllers, "--use-service-account-credentials=false",
			"--service-account-private-key-file=" + a.ServiceAccountKeyPath, "--root-ca-file=" + a.CACertPath,
			"--cluster-signing-cert-file=" + a.CACertPath, "--cluster-signing-key-file=" + a.CAKeyPath,
			"--concurrent-gc-syncs=5", "--v=1",
		}, o.ExtraArgs...),
	}
	return p, startAndSettle(ctx, p)
}

// StartScheduler runs kube-scheduler against a. It serves nothing.
func StartScheduler(ctx context.Context, tools Tools, a *APIServer, dir string, extra ...string) (*Process, error) {
	p := &Process{
		Name: "kube-scheduler " + a.Name, Path: tools.Path("kube-scheduler"),
		LogPath: filepath.Join(dir, "kube-scheduler.log"),
		Args: append([]string{
			"--kubeconfig=" + a.AdminKubeconfig, "--authentication-kubeconfig=" + a.AdminKubeconfig,
			"--authorization-kubeconfig=" + a.AdminKubeconfig,
			"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0", "--v=1",
		}, extra...),
	}
	return p, startAndSettle(ctx, p)
}

// KwokOptions configure kwok, the stand-in kubelet.
type KwokOptions struct {
	Dir string
	// Configs are kwok configuration files (stages, logs); the upstream stages are used when empty.
	Configs   []string
	ExtraArgs []string
}

// StartKwok runs kwok against a: it plays the kubelet for the Nodes it manages.
func StartKwok(ctx context.Context, tools Tools, a *APIServer, o KwokOptions) (*Process, error) {
	if len(o.Configs) == 0 {
		o.Configs = []string{tools.KwokStages()}
	}
	args := []string{"--kubeconfig=" + a.AdminKubeconfig}
	for _, c := range o.Configs {
		args = append(args, "--config="+c)
	}
	p := &Process{
		Name: "kwok " + a.Name, Path: tools.Path("kwok"), LogPath: filepath.Join(o.Dir, "kwok.log"),
		Args: append(args, o.ExtraArgs...),
	}
	return p, startAndSettle(ctx, p)
}

// startAndSettle starts p and fails if it exits within its first half second, which is how
// a bad flag or kubeconfig shows.
func startAndSettle(ctx context.Context, p *Process) error {
	if err := p.Start(); err != nil {
		return err
	}
	select {
	case <-p.done:
		_, err := p.Exited()
		return fmt.Errorf("%s exited at start (%v); end of %s:\n%s", p.Name, err, p.LogPath, p.tail(15))
	case <-time.After(500 * time.Millisecond):
		return nil
	case <-ctx.Done():
		p.Stop(time.Second)
		return ctx.Err()
	}
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
