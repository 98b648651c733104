// Package serialconsole reads each VMI's serial console once and hands every line to whoever
// follows it: the join's detectors and the diagnostics' console files. (The terminal a person
// reads is internal/progress's Console.)
//
// A VMI's console is read from the moment the VMI runs, in one of two ways:
//
//   - through the VMI's console subresource (subresources.kubevirt.io/v1 .../console, a
//     websocket that virt-api proxies to virt-handler, which opens the launcher's virt-serial0
//     socket: kubevirt/kubevirt v1.8.4 pkg/virt-handler/rest/console.go:179-195). This works on
//     every cluster, but KubeVirt serves one connection a VMI: a new one closes the one before
//     (console.go:266-272). The hub holds at most one, and once it has had one and it ends while
//     the VMI still runs, it does not dial again: a person's `virtctl console` took it, and keeps
//     it. Bytes the guest writes while nobody is connected are not kept by KubeVirt: what the
//     console said before the hub connected is not read.
//   - from the launcher's guest-console-log container log, for a VMI whose pool sets
//     logSerialConsole (KubeVirt's virt-tail of the console log file,
//     pkg/virt-controller/services/serialconsolelog.go:24-45). Cozystack disables that
//     container cluster-wide (disableSerialConsoleLog, cozystack/cozystack main
//     packages/system/kubevirt/templates/kubevirt-cr.yaml:36-37) unless a pool asks for it; the
//     chart's comment on logSerialConsole (packages/apps/kubernetes/templates/cluster.yaml:
//     176-183) cites kubevirt/kubevirt#15989, a launcher held in PodInitializing, which was not
//     read here. Reading a log blocks nobody.
//
// Every line carries the absolute time it was read (or, from a container log, logged).
package serialconsole

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/cluster"
)

// LogContainer is KubeVirt's launcher container whose log is the guest's serial console.
const LogContainer = "guest-console-log"

// Sources of a stream.
const (
	// SourceSubresource is the VMI's console subresource.
	SourceSubresource = "console subresource"
	// SourceLog is the launcher's guest-console-log container log.
	SourceLog = "guest-console-log"
)

// labelCreatedBy is KubeVirt's label on a launcher Pod holding its VMI's UID
// (pkg/virt-controller/services/template.go:1614); annEphemeral marks the temporary launcher of
// a volume waiting for its first consumer (template.go:545-548), which runs no guest.
const (
	labelCreatedBy = "kubevirt.io/created-by"
	annEphemeral   = "kubevirt.io/ephemeral-provisioning"
)

// Stream is one read of one VMI's console: one subresource connection, or one instance of the
// launcher's console container.
type Stream struct {
	VMI    string
	VMIUID types.UID
	Source string
	// Pod, PodUID and Restart name the launcher container instance (SourceLog only).
	Pod     string
	PodUID  types.UID
	Restart int32
	Node    string
	// Start is when the read began; LauncherStart when the console container started (SourceLog).
	Start, LauncherStart time.Time
}

// Key identifies a stream.
func (s Stream) Key() string {
	if s.Source == SourceLog {
		return fmt.Sprintf("%s/%s/%d", s.VMIUID, s.PodUID, s.Restart)
	}
	return string(s.VMIUID) + "/console"
}

// Subscriber hears every stream's start, lines and end. Calls come one at a time, each stream's
// in order; a subscriber must not call the Hub back from them.
type Subscriber interface {
	// Started: the hub began reading s (Stream.Start is set).
	Started(s Stream)
	// Line is one console line, without its line end, read (or logged) at at.
	Line(s Stream, at time.Time, text string)
	// Unreadable: s cannot be read right now, and why; the hub tries again. It is said once
	// per distinct reason.
	Unreadable(s Stream, at time.Time, why string)
	// Ended: s is over, and why. A stream that started always ends, at the latest at Close.
	Ended(s Stream, at time.Time, reason string)
}

// Dialer opens a VMI's console subresource: it returns the console's bytes until the
// connection ends. The kubevirt one is SubresourceDialer.
type Dialer func(ctx context.Context, namespace, vmi string) (Conn, error)

// Conn is an open console connection.
type Conn interface {
	// Read reads the console's bytes.
	Read(p []byte) (int, error)
	Close() error
}

// Options configure a Hub.
type Options struct {
	// Management is the cluster the VMIs run in; Namespace their namespace.
	Management *cluster.Cluster
	Namespace  string
	// Dial opens the console subresource; nil: SubresourceDialer(Management.REST).
	Dial Dialer
	// Retry is how soon a console that cannot be read yet is tried again (an internal
	// interval: the run's phases bound the whole).
	Retry time.Duration
	// Drain is how long a launcher's console log is still read after the launcher or its VMI
	// went away, so the last lines the kubelet has are not lost (an internal interval).
	Drain time.Duration
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Hub follows every VMI of one namespace once it runs, one stream at a time per VMI.
type Hub struct {
	o      Options
	cache  ctrlcache.Cache
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// say orders what subscribers hear: it is held while a stream's news is recorded and told,
	// and while a new subscriber hears what it missed.
	say     sync.Mutex
	subs    map[int]Subscriber
	nextSub int

	mu      sync.Mutex
	streams map[string]*follower // by Stream.Key()
	// serial is the VMIs whose subresource stream the hub has, or had (it never dials twice
	// after one connection ended while the VMI ran).
	serial  map[types.UID]*follower
	stopped bool
}

type follower struct {
	s      Stream
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	reason string // why it ends, once known
	poke   chan struct{}
	// heard is what subscribers were told of the stream, for one that subscribes later
	// (guarded by Hub.say).
	heard record
}

// end records why the stream ends; the first reason wins, and end reports whether it was it.
func (f *follower) end(reason string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reason != "" {
		return false
	}
	f.reason = reason
	return true
}

func (f *follower) why() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reason
}

// Start watches the namespace's VMIs and launcher Pods and starts following each VMI once it
// runs. Close stops every stream.
func Start(ctx context.Context, o Options) (*Hub, error) {
	if o.Management == nil || o.Namespace == "" {
		return nil, fmt.Errorf("console: Options need the management cluster and the namespace")
	}
	if o.Retry <= 0 {
		o.Retry = 500 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Drain <= 0 {
		o.Drain = 2 * time.Second
	}
	if o.Dial == nil {
		o.Dial = SubresourceDialer(o.Management.REST)
	}
	c, err := ctrlcache.New(o.Management.REST, ctrlcache.Options{Scheme: cluster.Scheme(), Mapper: o.Management.Client.RESTMapper(),
		DefaultNamespaces: map[string]ctrlcache.Config{o.Namespace: {}}})
	if err != nil {
		return nil, fmt.Errorf("console: informers: %w", err)
	}
	hctx, cancel := context.WithCancel(context.Background())
	h := &Hub{o: o, cache: c, ctx: hctx, cancel: cancel, subs: map[int]Subscriber{}, streams: map[string]*follower{}, serial: map[types.UID]*follower{}}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		_ = c.Start(hctx)
	}()
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { h.sync() },
		UpdateFunc: func(any, any) { h.sync() },
		DeleteFunc: func(any) { h.sync() },
	}
	for _, obj := range []client.Object{&kubevirtv1.VirtualMachineInstance{}, &corev1.Pod{}} {
		inf, err := c.GetInformer(ctx, obj, ctrlcache.BlockUntilSynced(false))
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("console: watching %T in %s: %w", obj, o.Namespace, err)
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			h.Close()
			return nil, err
		}
	}
	if !c.WaitForCacheSync(ctx) {
		h.Close()
		return nil, fmt.Errorf("console: the informers on %s did not sync: %v", o.Namespace, context.Cause(ctx))
	}
	h.sync()
	return h, nil
}

// Close ends every stream (their subscribers hear why) and stops the informers.
func (h *Hub) Close() {
	h.mu.Lock()
	h.stopped = true
	for _, f := range h.streams {
		f.end("the run stopped reading")
		f.cancel()
	}
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
}

// sync starts a stream for every running VMI that has none, and ends the log streams of
// launchers that went away or restarted their console container.
func (h *Hub) sync() {
	var vmis kubevirtv1.VirtualMachineInstanceList
	var pods corev1.PodList
	if err := h.cache.List(h.ctx, &vmis, client.InNamespace(h.o.Namespace)); err != nil {
		return
	}
	if err := h.cache.List(h.ctx, &pods, client.InNamespace(h.o.Namespace)); err != nil {
		return
	}
	running := map[types.UID]*kubevirtv1.VirtualMachineInstance{}
	for i := range vmis.Items {
		if v := &vmis.Items[i]; v.Status.Phase == kubevirtv1.Running && v.DeletionTimestamp == nil {
			running[v.UID] = v
		}
	}
	launcher := map[types.UID]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		uid := types.UID(p.Labels[labelCreatedBy])
		if uid == "" || p.Annotations[annEphemeral] == "true" {
			continue
		}
		if old, ok := launcher[uid]; !ok || p.CreationTimestamp.After(old.CreationTimestamp.Time) {
			launcher[uid] = p
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return
	}
	want := map[string]bool{}
	for uid, vmi := range running {
		pod := launcher[uid]
		if pod != nil && hasLogContainer(pod) {
			started, restart, ok := logStatus(pod)
			if !ok {
				continue // the console container has not started yet
			}
			s := Stream{VMI: vmi.Name, VMIUID: uid, Source: SourceLog, Pod: pod.Name, PodUID: pod.UID, Restart: restart,
				Node: pod.Spec.NodeName, LauncherStart: started}
			want[s.Key()] = true
			h.startLocked(s, h.followLog)
			continue
		}
		if _, had := h.serial[uid]; had || pod == nil {
			// One subresource stream a VMI, never taken back; and none before the launcher
			// is seen, which may yet turn out to log its console.
			continue
		}
		s := Stream{VMI: vmi.Name, VMIUID: uid, Source: SourceSubresource, Pod: pod.Name, PodUID: pod.UID, Node: pod.Spec.NodeName}
		want[s.Key()] = true
		h.serial[uid] = h.startLocked(s, h.followSerial)
	}
	for key, f := range h.streams {
		switch {
		case want[key]:
			select {
			case f.poke <- struct{}{}:
			default:
			}
		case f.s.Source == SourceLog:
			reason := "the launcher or its console container was replaced"
			if _, ok := running[f.s.VMIUID]; !ok {
				reason = "the VMI stopped running"
			}
			if f.end(reason) {
				time.AfterFunc(h.o.Drain, f.cancel)
			}
		case running[f.s.VMIUID] == nil:
			if f.end("the VMI stopped running") {
				f.cancel()
			}
		}
	}
}

// startLocked starts following s with read, unless it is followed already; h.mu is held.
func (h *Hub) startLocked(s Stream, read func(context.Context, *follower)) *follower {
	if f, ok := h.streams[s.Key()]; ok {
		return f
	}
	ctx, cancel := context.WithCancel(h.ctx)
	f := &follower{s: s, cancel: cancel, done: make(chan struct{}), poke: make(chan struct{}, 1)}
	h.streams[s.Key()] = f
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer close(f.done)
		read(ctx, f)
	}()
	return f
}

func hasLogContainer(p *corev1.Pod) bool {
	for _, list := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range list {
			if c.Name == LogContainer {
				return true
			}
		}
	}
	return false
}

// logStatus is when the console container's current instance started and its restart count.
func logStatus(p *corev1.Pod) (time.Time, int32, bool) {
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range list {
			if cs.Name != LogContainer {
				continue
			}
			switch {
			case cs.State.Running != nil:
				return cs.State.Running.StartedAt.Time, cs.RestartCount, true
			case cs.State.Terminated != nil:
				return cs.State.Terminated.StartedAt.Time, cs.RestartCount, true
			}
			return time.Time{}, cs.RestartCount, false
		}
	}
	return time.Time{}, 0, false
}
