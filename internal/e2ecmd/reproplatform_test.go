package e2ecmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/install"
	"github.com/cozystack/cozy-e2e/internal/substrate/kind"
)

const reproDigest = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"

func noEnv(string) string { return "" }

// A repro installs the platform the run installed: a release at the digest the run verified,
// whatever the run's own E2E_PLATFORM_SOURCE said; a person's override only when it pins that
// digest. It never carries the run's E2E_REUSE over.
func TestReproEnforcesTheRecordedDigest(t *testing.T) {
	rec := &install.PlatformRecord{Source: "release:v1.6.2", Kind: "release", Pinned: "release:v1.6.2@" + reproDigest}
	env, notes, err := reproEnvironment(map[string]string{"E2E_PLATFORM_SOURCE": "release:v1.6.2", "E2E_REUSE": "1"}, rec, noEnv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if env["E2E_PLATFORM_SOURCE"] != "release:v1.6.2@"+reproDigest {
		t.Fatalf("platform source %q", env["E2E_PLATFORM_SOURCE"])
	}
	if _, ok := env["E2E_REUSE"]; ok || !strings.Contains(strings.Join(notes, "\n"), "a repro does not carry it over: a kept cluster of the lane's name is refused unless you set E2E_REUSE=1 yourself") {
		t.Fatalf("E2E_REUSE carried over: %v %v", env, notes)
	}
	own := func(v string) func(string) string {
		return func(k string) string {
			if k == "E2E_PLATFORM_SOURCE" {
				return v
			}
			return ""
		}
	}
	_, _, err = reproEnvironment(nil, rec, own("release:v1.6.2@sha256:"+strings.Repeat("d", 64)), nil)
	if err == nil || !strings.Contains(err.Error(), "does not pin "+reproDigest+", the operator manifest the run applied") {
		t.Fatalf("another digest: %v", err)
	}
	env, _, err = reproEnvironment(nil, rec, own("manifest:https://mirror.example/cozystack-operator-generic.yaml@"+reproDigest), nil)
	if err != nil || env["E2E_PLATFORM_SOURCE"] != "manifest:https://mirror.example/cozystack-operator-generic.yaml@"+reproDigest {
		t.Fatalf("the same digest elsewhere: %v %v", env, err)
	}
	// A manifest the run read from a file of its runner.
	file := &install.PlatformRecord{Kind: "manifest", Pinned: "manifest:/home/runner/work/_platform/cozystack-operator-generic.yaml@" + reproDigest}
	if _, _, err := reproEnvironment(nil, file, noEnv, nil); err == nil ||
		!strings.Contains(err.Error(), "the run applied the operator manifest /home/runner/work/_platform/cozystack-operator-generic.yaml ("+reproDigest+"), which does not exist on this machine") {
		t.Fatalf("a manifest file not here: %v", err)
	}
}

// A checkout the run built is used where it is, with a word when it moved on; one that is not
// on this machine is said plainly, with the commit to check out.
func TestReproOfACheckoutSaysWhenTheFolderIsNotHere(t *testing.T) {
	rec := &install.PlatformRecord{Kind: "checkout", Checkout: "/home/runner/work/cozystack/cozystack", CheckoutCommit: "0123456789abcdef0123456789abcdef01234567"}
	_, _, err := reproEnvironment(nil, rec, noEnv, nil)
	if err == nil || err.Error() != "the run built its platform from the checkout /home/runner/work/cozystack/cozystack at commit 0123456789abcdef0123456789abcdef01234567, and that folder does not exist on this machine: check out cozystack/cozystack at commit 0123456789abcdef0123456789abcdef01234567 and set E2E_PLATFORM_SOURCE=checkout:<that folder>" {
		t.Fatalf("missing checkout: %v", err)
	}
	rec.Checkout = t.TempDir()
	env, notes, err := reproEnvironment(nil, rec, noEnv, func(string) string { return "fffffff" })
	if err != nil || env["E2E_PLATFORM_SOURCE"] != "checkout:"+rec.Checkout || !strings.Contains(strings.Join(notes, "\n"), "is at fffffff, the run built 0123456789abcdef") {
		t.Fatalf("present checkout: %v %v %v", env, notes, err)
	}
}

// make repro refuses with exit 2, before running anything, a run whose checkout is not here.
func TestReproCommandRefusesAMissingCheckout(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "lane"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lane", "kubernetes-latest.yaml"), []byte("name: kubernetes-latest\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	repro := `{"lane":"kubernetes-latest","laneFile":"lane/kubernetes-latest.yaml","runId":"ab1cd","env":{"E2E_PLATFORM_SOURCE":"checkout:/nowhere/cozystack"},"command":"x"}`
	if err := os.WriteFile(filepath.Join(dir, "repro.json"), []byte(repro), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := (install.PlatformRecord{Source: "checkout:/nowhere/cozystack", Kind: "checkout", Checkout: "/nowhere/cozystack", CheckoutCommit: "abc"}).Write(dir); err != nil {
		t.Fatal(err)
	}
	t.Setenv("E2E_PLATFORM_SOURCE", "")
	var out, errb bytes.Buffer
	code := dispatch(context.Background(), []string{"repro", "--artifacts", dir}, &out, &errb)
	if code != exitConfig || !strings.Contains(errb.String(), "e2e repro: the run built its platform from the checkout /nowhere/cozystack at commit abc, and that folder does not exist on this machine") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}

// A kind run records the node image it created its nodes from (run.json and repro.json), the
// lane's own pin as much as an override, and a repro runs that very image: a person's
// E2E_KIND_NODE_IMAGE naming another is refused.
func TestReproEnforcesTheRecordedNodeImage(t *testing.T) {
	const pinned = "docker.io/kindest/node:v1.35.0@sha256:452d707d4862f52530247495d180205e029056831160e22870e37e3f6c1ac31f"
	const other = "kindest/node:v1.36.1@sha256:3489c7674813ba5d8b1a9977baea8a6e553784dab7b84759d1014dbd78f7ebd5"
	l, err := lane.Load(filepath.Join("..", "..", "lanes", "kubernetes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == kind.NodeImageEnv {
				return v
			}
			return ""
		}
	}
	ni := nodeImageOf(l, env(""))
	if ni == nil || ni.Image != pinned || !strings.HasPrefix(ni.Source, "kind v0.31.0's default node image") {
		t.Fatalf("the lane's own node image: %+v", ni)
	}
	ni = nodeImageOf(l, env(other))
	if ni == nil || ni.Image != other || !strings.HasPrefix(ni.Source, "E2E_KIND_NODE_IMAGE (the lane pins "+pinned+")") {
		t.Fatalf("the override: %+v", ni)
	}
	if sim, _ := lane.Load(filepath.Join("..", "..", "lanes", "sim.yaml")); nodeImageOf(sim, env("")) != nil {
		t.Fatal("a sim lane has a node image")
	}

	recorded := map[string]string{kind.NodeImageEnv: pinned}
	got, notes, err := reproEnvironment(recorded, nil, noEnv, nil)
	if err != nil || got[kind.NodeImageEnv] != pinned || !strings.Contains(strings.Join(notes, "\n"), "kind node image "+pinned+", the one the run used") {
		t.Fatalf("the recorded image: %v %v %v", got, notes, err)
	}
	if _, _, err := reproEnvironment(recorded, nil, env(pinned), nil); err != nil {
		t.Fatalf("the same image named again: %v", err)
	}
	_, _, err = reproEnvironment(recorded, nil, env(other), nil)
	if err == nil || !strings.Contains(err.Error(), "E2E_KIND_NODE_IMAGE="+other+" is not the node image the run created its kind nodes from ("+pinned+")") {
		t.Fatalf("another image: %v", err)
	}
}
