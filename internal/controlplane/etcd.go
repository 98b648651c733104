package controlplane

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"time"
)

// Etcd is one etcd member on loopback, plain HTTP (it never leaves the machine).
type Etcd struct {
	Process
	ClientURL string
	DataDir   string
}

// StartEtcd starts etcd with its data in dir and waits until it answers /health.
func StartEtcd(ctx context.Context, tools Tools, dir string) (*Etcd, error) {
	ports, err := FreePorts(2)
	if err != nil {
		return nil, err
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	e := &Etcd{ClientURL: client, DataDir: filepath.Join(dir, "etcd-data")}
	e.Process = Process{
		Name:    "etcd",
		Path:    tools.Path("etcd"),
		LogPath: filepath.Join(dir, "etcd.log"),
		Args: []string{
			"--data-dir=" + e.DataDir,
			"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=default=" + peer,
			"--unsafe-no-fsync", // test data: durability is not needed, speed is
			"--quota-backend-bytes=2147483648",
			"--log-level=warn",
		},
	}
	if err := e.Start(); err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: time.Second}
	err = e.WaitFor(ctx, "healthy", func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, client+"/health", nil)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(body), `"health":"true"`) {
			return fmt.Errorf("health: %s", body)
		}
		return nil
	})
	if err != nil {
		e.Stop(5 * time.Second)
		return nil, err
	}
	return e, nil
}
