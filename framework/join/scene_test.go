package join_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/osfamily"
	"github.com/cozystack/cozy-e2e/framework/serialconsole"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/internal/sim/world"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// workloadImage is the pod image each scene pins to its Nodes.
var workloadImage = "docker.io/library/nginx@sha256:" + strings.Repeat("4", 64)

// scene is one pool's objects in a namespace of its own.
type scene struct {
	t    *testing.T
	ctx  context.Context
	w    *world.World
	c    client.Client
	pool join.Pool
	n    int // objects made, for unique IPs
}

var sceneCount struct {
	sync.Mutex
	n int
}

func newScene(t *testing.T, w *world.World, os string, replicas int) *scene {
	return newSceneNamed(t, w, os, replicas, "", "p")
}

// newSceneNamed is a scene whose app name starts with app (then the scene's number) and whose
// pool is pool: long names make names the apiserver and Cluster API cut.
func newSceneNamed(t *testing.T, w *world.World, os string, replicas int, app, pool string) *scene {
	t.Helper()
	sceneCount.Lock()
	sceneCount.n++
	i := sceneCount.n
	sceneCount.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	ns := fmt.Sprintf("tenant-join%d", i)
	s := &scene{t: t, ctx: ctx, w: w, c: w.Cluster.Client, n: i * 16,
		pool: join.Pool{Spec: lane.Pool{Name: pool, Class: os, Replicas: replicas}, Names: tenant.For(ns, fmt.Sprintf("%sj%d", app, i)).Pool(pool),
			OS: family(t, os)}}
	s.must(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	s.poll("the default ServiceAccount of "+ns, func() bool {
		var sa corev1.ServiceAccount
		return s.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "default"}, &sa) == nil
	})
	return s
}

func (s *scene) must(err error) {
	s.t.Helper()
	if err != nil {
		s.t.Fatal(err)
	}
}

// poll is the test's own wait for a state it does not control (kwok, the scheduler).
// Each of show is printed when the wait fails, to say where it was stuck.
func (s *scene) poll(what string, ok func() bool, show ...fmt.Stringer) {
	s.t.Helper()
	evidence := make([]func() string, len(show))
	for i, sh := range show {
		evidence[i] = sh.String
	}
	testkit.Eventually(s.ctx, s.t, what, 30*time.Second, testkit.Holds(ok), evidence...)
}

func (s *scene) ns() string { return s.pool.Names.Namespace }

// joinRun is Join running in the background.
type joinRun struct {
	w    *join.Watcher
	log  *testkit.Buffer
	done chan struct{}
	res  *join.Result
	err  error
	at   time.Time
	cl   *budget.Clock
	// heard are the stages OnProgress reported, in order, each once.
	mu    sync.Mutex
	heard []join.Stage
}

// start starts a Watcher and Join for the scene's pool, inside budget.
func (s *scene) start(budgetFor time.Duration) *joinRun {
	s.t.Helper()
	cl := budget.New(lane.Budget{JobCap: lane.Duration(time.Hour), Phases: []lane.Phase{{Name: "pools", Ceiling: lane.Duration(budgetFor)}}}, budget.Options{})
	pctx, span, err := cl.Phase(s.ctx, "pools")
	s.must(err)
	s.t.Cleanup(func() { span.End(nil) })
	r := &joinRun{log: &testkit.Buffer{}, done: make(chan struct{}), cl: cl}
	hub, err := serialconsole.Start(s.ctx, serialconsole.Options{Management: s.w.Cluster, Namespace: s.ns()})
	s.must(err)
	s.t.Cleanup(hub.Close)
	r.w, err = join.Start(s.ctx, join.Options{Management: s.w.Cluster, Tenant: s.w.Cluster, Namespace: s.ns(), Consoles: hub, WorkloadImage: workloadImage,
		OSes: []osfamily.Family{s.pool.OS}, Clock: cl, Log: r.log, OnProgress: func(p join.Progress) {
			r.mu.Lock()
			defer r.mu.Unlock()
			if n := len(r.heard); n == 0 || r.heard[n-1] != p.Stage {
				r.heard = append(r.heard, p.Stage)
			}
		}})
	s.must(err)
	s.t.Cleanup(r.w.Close)
	go func() {
		defer close(r.done)
		r.res, r.err = r.w.Join(pctx, s.pool)
		r.at = time.Now()
	}()
	return r
}

// at waits until the pool's reported stage is st.
func (s *scene) at(r *joinRun, st join.Stage) {
	s.t.Helper()
	s.poll("pool at stage "+string(st), func() bool {
		select {
		case <-r.done:
			s.t.Fatalf("the join ended (%v) before stage %s", r.err, st)
		default:
		}
		p, ok := r.w.Progress(s.pool.Names.Pool)
		return ok && p.Stage == st
	})
}

func (r *joinRun) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the join did not end; its log:\n%s", r.log)
	}
}

// Setups: a Machine brought to the stage before the fault.

func toDisk(s *scene) (string, string, string) {
	s.template()
	vm := s.machine("bbbbb")
	s.importing(vm, "10.0%")
	return vm, "", s.ip()
}

func toBoot(s *scene) (string, string, string) {
	vm, _, ip := toDisk(s)
	s.dataVolume(vm, cdiv1.Succeeded, "100.0%")
	s.vmi(vm, kubevirtv1.Scheduling, ip)
	pod := s.launcher(vm, "1Gi")
	s.vmi(vm, kubevirtv1.Running, ip)
	s.poll("launcher running", func() bool {
		var p corev1.Pod
		return s.c.Get(s.ctx, types.NamespacedName{Namespace: s.ns(), Name: pod}, &p) == nil && p.Status.Phase == corev1.PodRunning
	})
	s.console(pod, "[    0.000000] Linux version 6.12.0")
	return vm, pod, ip
}

func toLinked(s *scene) (string, string, string) {
	vm, pod, ip := toBoot(s)
	// The CNI's startup taint, which its agent removes once it runs: the Node waits at schedulable.
	s.node(vm, ip, corev1.Taint{Key: "node.cilium.io/agent-not-ready", Effect: corev1.TaintEffectNoSchedule})
	s.providerID(vm, tenant.ProviderID(vm))
	s.link(vm, vm)
	return vm, pod, ip
}

// progressOf shows where the join of a pool is.
type progressOf struct {
	w    *join.Watcher
	pool string
}

func (p progressOf) String() string {
	pr, ok := p.w.Progress(p.pool)
	if !ok {
		return "no progress of " + p.pool
	}
	return fmt.Sprintf("progress of %s: %+v", p.pool, pr)
}

func family(t *testing.T, name string) osfamily.Family {
	t.Helper()
	f, err := osfamily.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
