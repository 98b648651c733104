package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/internal/install/assumptions"
)

// Runner runs the commands a checkout build needs; tests stand in for it.
type Runner interface {
	// LookPath finds a program on PATH.
	LookPath(name string) (string, error)
	// Run runs name with args in dir and returns its combined output.
	Run(ctx context.Context, dir string, name string, args ...string) ([]byte, error)
}

// ExecRunner runs commands on this machine, copying their output to Log.
type ExecRunner struct{ Log io.Writer }

// LookPath is exec.LookPath.
func (ExecRunner) LookPath(name string) (string, error) { return exec.LookPath(name) }

// Run runs the command, its output also going to Log.
func (r ExecRunner) Run(ctx context.Context, dir string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out strings.Builder
	w := io.Writer(&out)
	if r.Log != nil {
		w = io.MultiWriter(&out, r.Log)
	}
	cmd.Stdout, cmd.Stderr = w, w
	err := cmd.Run()
	return []byte(out.String()), err
}

// ImageLoader puts images from the local docker into every node of the kind cluster.
type ImageLoader func(ctx context.Context, images []string) error

// CheckoutBuild builds the platform of a Cozystack checkout with the checkout's own make
// targets (packages/core/installer/Makefile at main 3c780acd417f):
//
//	make -C packages/core/installer image-operator image-packages REGISTRY=<r> IMAGE_TAG=<t> PUSH=0 LOAD=1
//	make manifests
//
// image-operator builds the operator image into the local docker (PUSH=0 LOAD=1; make
// command-line values override hack/common-envs.mk's PUSH := 1, LOAD := 0) and points the
// installer's values.yaml at it; image-packages pushes the packages artifact to <r> with `flux
// push artifact` whatever PUSH says, and points values.yaml at its digest; `make manifests`
// then renders _out/assets/cozystack-operator-generic.yaml from those values (`make assets`
// does not write it). The operator image is loaded into the kind nodes (Load) and the rendered
// Deployment is pointed at the loaded tag. Both targets rewrite files in the checkout, as they
// do in Cozystack's own CI.
type CheckoutBuild struct {
	Dir string
	// Registry is where image-packages pushes the packages artifact (E2E_PLATFORM_REGISTRY):
	// the runner pushes there, the kind cluster's operator pulls from there.
	Registry string
	// Tag is IMAGE_TAG; empty means e2e-<the checkout's short commit>.
	Tag  string
	Run  Runner
	Load ImageLoader
}

// checkoutTools are the programs the checkout's targets call (the Makefiles and
// hack/pre-checks.sh): docker buildx for the image, flux to push the packages artifact, yq to
// rewrite values.yaml, helm for `make manifests`, git for the revision.
var checkoutTools = []string{"make", "docker", "git", "yq", "flux", "helm"}

// Check says, before anything is built, what this machine lacks for the build: each missing
// program, the registry, a folder that is not a git checkout.
func (b CheckoutBuild) Check(ctx context.Context) error {
	var missing []string
	for _, t := range checkoutTools {
		if _, err := b.Run.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	var problems []string
	if len(missing) > 0 {
		problems = append(problems, fmt.Sprintf("%s not on PATH (the checkout's make targets call %s)", strings.Join(missing, ", "), strings.Join(checkoutTools, ", ")))
	}
	if b.Registry == "" {
		problems = append(problems, "E2E_PLATFORM_REGISTRY is not set: image-packages pushes the packages artifact with `flux push artifact oci://$(REGISTRY)/cozystack-packages` (packages/core/installer/Makefile:37-38) whatever PUSH says, and the operator pulls it from there; set it to a registry this runner can push to and the kind cluster can pull from")
	}
	if _, err := b.Run.Run(ctx, b.Dir, "git", "rev-parse", "HEAD"); err != nil {
		problems = append(problems, fmt.Sprintf("%s is not a git checkout (git rev-parse HEAD: %v); the make targets read its revision", b.Dir, err))
	}
	if len(problems) > 0 {
		return fmt.Errorf("checkout:%s cannot be built here: %s", b.Dir, strings.Join(problems, "; "))
	}
	return nil
}

// CheckoutResult is what a build made.
type CheckoutResult struct {
	Commit string
	// OperatorImage is the image loaded into the kind nodes.
	OperatorImage string
	// PackagesURL is the packages artifact the rendered manifest points the operator at.
	PackagesURL string
	// Rendered is the manifest `make manifests` wrote, with its sha256 before the harness
	// pointed the Deployment at the loaded image.
	Rendered *Manifest
}

// Build runs the checkout's targets, loads the operator image into the cluster and returns the
// operator manifest to apply.
func (b CheckoutBuild) Build(ctx context.Context) (*Manifest, CheckoutResult, error) {
	var res CheckoutResult
	out, err := b.Run.Run(ctx, b.Dir, "git", "rev-parse", "HEAD")
	if err != nil {
		return nil, res, fmt.Errorf("checkout:%s: git rev-parse HEAD: %w", b.Dir, err)
	}
	res.Commit = strings.TrimSpace(string(out))
	tag := b.Tag
	if tag == "" {
		tag = "e2e-" + shortCommit(res.Commit)
	}
	installer := filepath.Join(b.Dir, assumptions.InstallerDir)
	steps := [][]string{
		{"make", "-C", installer, assumptions.ImageOperatorTarget, assumptions.ImagePackagesTarget,
			"REGISTRY=" + b.Registry, "IMAGE_TAG=" + tag, "PUSH=0", "LOAD=1"},
		{"make", "-C", b.Dir, assumptions.ManifestsTarget},
	}
	for _, s := range steps {
		if out, err := b.Run.Run(ctx, b.Dir, s[0], s[1:]...); err != nil {
			return nil, res, fmt.Errorf("checkout:%s: %s: %w\n%s", b.Dir, strings.Join(s, " "), err, tail(out, 20))
		}
	}
	res.OperatorImage = b.Registry + "/" + assumptions.OperatorImageName + ":" + tag
	res.PackagesURL = "oci://" + b.Registry + "/" + assumptions.PackagesArtifactName
	path := filepath.Join(b.Dir, "_out", "assets", OperatorAsset)
	rendered, err := Fetch(ctx, path, "")
	if err != nil {
		return nil, res, fmt.Errorf("checkout:%s: `make %s` ran but: %w", b.Dir, assumptions.ManifestsTarget, err)
	}
	res.Rendered = rendered
	objs, err := rendered.Objects()
	if err != nil {
		return nil, res, err
	}
	if err := pointAtLoadedImage(objs, res.OperatorImage, res.PackagesURL); err != nil {
		return nil, res, fmt.Errorf("checkout:%s: %s: %w", b.Dir, path, err)
	}
	if err := b.Load(ctx, []string{res.OperatorImage}); err != nil {
		return nil, res, fmt.Errorf("checkout:%s: load %s into the kind nodes: %w", b.Dir, res.OperatorImage, err)
	}
	m, err := Encode(path+" (operator image "+res.OperatorImage+")", objs)
	return m, res, err
}

// pointAtLoadedImage checks that the rendered operator Deployment takes its packages from the
// artifact image-packages pushed, and points it at the image loaded into the nodes: by tag, as
// the nodes hold it, pulled only if absent.
func pointAtLoadedImage(objs []Object, image, packagesURL string) error {
	for _, o := range objs {
		if o.Obj.GetKind() != "Deployment" || o.Obj.GetName() != assumptions.OperatorImageName {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Obj.Object, "spec", "template", "spec", "containers")
		for i, c := range containers {
			cm, _ := c.(map[string]any)
			if cm["name"] != assumptions.OperatorImageName {
				continue
			}
			args, _, _ := unstructured.NestedStringSlice(cm, "args")
			if !hasArg(args, "--platform-source-url="+packagesURL) {
				return fmt.Errorf("the operator's --platform-source-url is not %s (args %v): image-packages did not point values.yaml at the artifact it pushed", packagesURL, args)
			}
			cm["image"] = image
			cm["imagePullPolicy"] = "IfNotPresent"
			containers[i] = cm
			return unstructured.SetNestedSlice(o.Obj.Object, containers, "spec", "template", "spec", "containers")
		}
	}
	return errors.New("no Deployment cozystack-operator with a container cozystack-operator")
}

func hasArg(args []string, want string) bool {
	for _, a := range args {
		if a == want {
			return true
		}
	}
	return false
}

// Encode writes objects back into one manifest, with its sha256.
func Encode(source string, objs []Object) (*Manifest, error) {
	var b strings.Builder
	for _, o := range objs {
		data, err := yaml.Marshal(o.Obj.Object)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.Source, err)
		}
		b.WriteString("---\n")
		b.Write(data)
	}
	return newManifest(source, []byte(b.String())), nil
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

// tail is the last n lines of out, for an error.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
