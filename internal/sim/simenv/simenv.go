// Package simenv is what every stand-in of the sim substrate shares: the selected faults, the
// latencies, where container logs go, and the record of when each fault became observable.
package simenv

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/cozystack/cozy-e2e/internal/sim/faults"
)

// LogSink gives the file whose content `kubectl logs` returns for a container of a pod that
// the management cluster's kwok runs (virt-launcher's guest-console-log, importer pods).
// Stand-ins append to it; kwok serves it.
type LogSink interface {
	ContainerLog(namespace, pod, container string) (path string, err error)
}

// PodMetricsDir is the folder under Env.Dir where stand-ins write what a pod serves on its
// metrics port, one file named by the pod's IP; the substrate serves each file on that IP to the
// controllers that read pods' metrics.
const PodMetricsDir = "pod-metrics"

// PodMetrics is the file of pod IP ip under PodMetricsDir, or "" without a Dir.
func (e *Env) PodMetrics(ip string) string {
	if e.Dir == "" || ip == "" {
		return ""
	}
	return filepath.Join(e.Dir, PodMetricsDir, ip)
}

// PreviousLogSuffix: the log of a container's previous instance is its log path plus this
// suffix, as kwok is told (`kubectl logs --previous`); RestartContainerLog moves it there.
const PreviousLogSuffix = ".previous"

// RestartContainerLog starts the log of a container's new instance: what the last instance
// wrote becomes its previous log, as the kubelet keeps it, and the current log starts empty.
func RestartContainerLog(path string) error {
	if err := os.Rename(path, path+PreviousLogSuffix); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// Webhook is a stand-in's admission webhook (failurePolicy Fail, as the providers declare
// theirs): its name, the requests it matches and its handler. A mutating webhook's handler
// answers with the patch it makes (admission.PatchResponseFromRaw).
type Webhook struct {
	Name    string
	Rules   []admissionv1.RuleWithOperations
	Handler admission.Handler
	// Unavailable, when set, says which requests find the webhook unavailable: their connection
	// ends without an answer, and the apiserver fails the request as it does for a webhook it
	// cannot call (nil: the webhook always answers).
	Unavailable func(admission.Request) bool
}

// Webhooks serves the stand-ins' admission webhooks (the sim's world does).
type Webhooks interface {
	Validating(Webhook) error
	Mutating(Webhook) error
}

// Env is shared by the stand-ins. Its zero value is not usable; the sim substrate builds it.
type Env struct {
	// Faults selected by E2E_SIM_FAULT (nil: none).
	Faults *faults.Set
	// Latencies of the stand-ins by name ("disk-import", "boot", "join"), from the lane's sim
	// section; Latency gives the default for a name the lane does not set.
	Latencies map[string]time.Duration
	// Logs places container logs.
	Logs LogSink
	// Webhooks serves admission webhooks (nil: none are served, and stand-ins skip theirs).
	Webhooks Webhooks
	// Serial are the guests' serial ports, read through the VMIs' console subresource (nil:
	// what guests write there is lost).
	Serial *SerialPorts
	// Dir is the sim's working folder (not an artifact).
	Dir string
	// RealNodeVolumes maps each real Node (internal/sim/node) to the folder on this host its
	// volumes are made in (nil: the world has none).
	RealNodeVolumes map[string]string
	// RealNodeRegistry is the host:port of the local registry the real Nodes pull from, which
	// CDI's importer reads the worker's disk from ("": the world has no real Node). Set before
	// any tenant is created.
	RealNodeRegistry string
	// Now is the clock.
	Now func() time.Time

	mu       sync.Mutex
	observed *os.File
}

// RealNode reports whether the Node name is a real Node (internal/sim/node): a real kubelet runs
// its Pods and a real virt-handler its VMIs, so no stand-in plays them.
func (e *Env) RealNode(name string) bool {
	_, ok := e.RealNodeVolumes[name]
	return ok && name != ""
}

// DefaultLatency is used for any latency the lane does not name: fast, but long enough that
// every stage is observable.
const DefaultLatency = 500 * time.Millisecond

// Latency is how long the stand-in named name takes.
func (e *Env) Latency(name string) time.Duration {
	if d, ok := e.Latencies[name]; ok {
		return d
	}
	return DefaultLatency
}

// Observation is the moment a fault's effect became visible through the API, as the sim saw it.
type Observation struct {
	Fault  faults.Name `json:"fault"`
	Pool   string      `json:"pool"`
	Object string      `json:"object"`        // Kind/namespace/name the effect shows on
	UID    string      `json:"uid,omitempty"` // that object's UID, when the effect is tied to it
	Detail string      `json:"detail"`
	At     time.Time   `json:"at"`
}

// Observe appends an observation to path's JSON lines file (faults-observed.jsonl in Dir).
// Tests compare these moments with the verdict's to measure time to verdict.
func (e *Env) Observe(o Observation) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if o.At.IsZero() {
		o.At = e.Now()
	}
	if e.observed == nil {
		f, err := os.OpenFile(e.ObservationsPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		e.observed = f
	}
	return json.NewEncoder(e.observed).Encode(o)
}

// ObservationsPath is where Observe writes.
func (e *Env) ObservationsPath() string { return e.Dir + "/faults-observed.jsonl" }

// GuestLogPath is the guests' log: what a guest could not do that no console shows and no fault
// explains (error texts, never a guest's data).
func (e *Env) GuestLogPath() string { return e.Dir + "/guests.log" }

// Close releases the observations file.
func (e *Env) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.observed == nil {
		return nil
	}
	err := e.observed.Close()
	e.observed = nil
	return err
}

// LoopbackAnnotation is the sim's own stand-in for the pod network: on a management Service, the
// loopback address (127.0.0.1:<port>) its ClusterIP and first port lead to. The Kamaji stand-in
// sets it on a tenant control plane's Service, whose apiserver listens on loopback; the guest
// stand-in dials through it, as a worker VM reaches the Service through kube-proxy.
const LoopbackAnnotation = "sim.cozy-e2e.io/loopback"

// RendererLabel, on a Kubernetes app's HelmRelease, says which renders it in the sim: RendererChart,
// the real Cozystack Kubernetes chart through the real helm-controller, for an app whose pools
// all run Talos (what the pinned chart knows); RendererModel, the platform stand-in's model of
// cozystack/cozystack#4911 (NodeGroupClass), for an app with a pool on any other class. The app
// API stand-in sets it when it creates the release and keeps it.
const (
	RendererLabel = "sim.cozy-e2e.io/renderer"
	RendererChart = "chart"
	RendererModel = "model-4911"
)
