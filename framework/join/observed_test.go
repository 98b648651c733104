package join

//lint:file-ignore SA1019 observed Machines and MachineSets carry the v1beta1 fields providers at the v1beta1 contract write.

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// observed is one file of fixtures/observed: objects as real clusters wrote them, and what
// upstream says their state means.
type observed struct {
	Source  string `json:"source"`
	Meaning string `json:"meaning"` // final, transient or healthy
	Why     string `json:"why"`
	Family  string `json:"family"`
	Expect  struct {
		Class verdict.Class `json:"class"`
		Stage Stage         `json:"stage"`
	} `json:"expect"`
	Objects []map[string]any `json:"objects"`
}

// Each observed state, placed in a worker that has otherwise joined, is judged as upstream
// means it: a final state ends the join with its class and stage, a transient one is at most a
// suspect, a healthy one neither.
func TestObservedStatesAreJudgedAsUpstreamMeansThem(t *testing.T) {
	dir := filepath.Join("..", "..", "fixtures", "observed")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no observed states in %s (%v)", dir, err)
	}
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	objects := 0
	for _, f := range files {
		name := filepath.Base(f)
		var o observed
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(data, &o); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		objects += len(o.Objects)
		if !strings.Contains(string(readme), "`"+name+"`") {
			t.Errorf("%s: fixtures/observed/README.md does not list it", name)
		}
		t.Run(strings.TrimSuffix(name, ".yaml"), func(t *testing.T) {
			if strings.TrimSpace(o.Source) == "" || strings.TrimSpace(o.Why) == "" || len(o.Objects) == 0 {
				t.Fatalf("%s: a source, a why and objects are required", name)
			}
			out := evaluate(placeObserved(t, o))
			switch o.Meaning {
			case "final":
				if out.Terminal == nil || out.Terminal.Class != o.Expect.Class || out.Terminal.Stage != o.Expect.Stage {
					t.Errorf("upstream says final (%s at %s: %s); the join decided %+v, waiting at %s: %s", o.Expect.Class, o.Expect.Stage, o.Why, out.Terminal, out.Stage, out.Detail)
				}
			case "transient":
				if out.Terminal != nil {
					t.Errorf("upstream retries or repairs it (%s); the join ended with %s at %s: %s", o.Why, out.Terminal.Class, out.Terminal.Stage, out.Terminal.Detail)
				}
				t.Logf("waits at %s; suspects %v", out.Stage, out.Suspects)
			case "healthy":
				if out.Terminal != nil || len(out.Suspects) > 0 {
					t.Errorf("healthy; the join decided %+v with suspects %v", out.Terminal, out.Suspects)
				}
			default:
				t.Errorf("meaning %q is none of final, transient, healthy", o.Meaning)
			}
		})
	}
	if objects < 20 {
		t.Errorf("%d observed objects; at least 20 are wanted", objects)
	}
}

// placeObserved puts a file's objects in a snapshot of a pool of one worker that has otherwise
// joined: each object takes the place the join reads its kind from; the worker carries the
// name the objects give its VMI (a VMI's, a KubevirtMachine's, a Node's tied to it, a Machine's
// infrastructure), so that names tie as they did on the cluster.
func placeObserved(t *testing.T, o observed) *snapshot {
	t.Helper()
	p := testPool(o.Family, 1)
	var objs []*unstructured.Unstructured
	vm := ""
	for _, m := range o.Objects {
		u := &unstructured.Unstructured{Object: m}
		objs = append(objs, u)
		switch u.GetKind() {
		case "VirtualMachineInstance", "KubevirtMachine":
			vm = u.GetName()
		case "Machine":
			if vm == "" {
				vm, _, _ = unstructured.NestedString(u.Object, "spec", "infrastructureRef", "name")
			}
		}
	}
	for _, u := range objs {
		if id, _, _ := unstructured.NestedString(u.Object, "spec", "providerID"); vm == "" && u.GetKind() == "Node" {
			if name, ok := tenant.VMIFromProviderID(id); ok {
				vm = name
			}
		}
	}
	if vm == "" {
		vm = "vm-1"
	}
	v := joined(p, vm)
	s := withTemplate(p, v)
	s.KubeletConfig = kubeletConfig("clusterDNS: [10.95.0.10]\n")
	s.ClusterDNSService = &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.95.0.10"}}
	var kinds []string
	for _, u := range objs {
		kinds = append(kinds, u.GetKind())
		switch u.GetKind() {
		case "Machine":
			into(t, u, v.Machine)
		case "MachineSet":
			var ms clusterv1.MachineSet
			into(t, u, &ms)
			s.MachineSets = append(s.MachineSets, ms)
		case "KairosConfig", "TalosConfig":
			v.BootstrapConfig = u
		case "KubevirtMachine":
			v.KubevirtMachine = u
		case "DataVolume":
			v.DataVolume = &cdiv1.DataVolume{}
			into(t, u, v.DataVolume)
		case "VirtualMachineInstance":
			v.VMI = &kubevirtv1.VirtualMachineInstance{}
			into(t, u, v.VMI)
		case "Pod":
			pod := &corev1.Pod{}
			into(t, u, pod)
			switch {
			case strings.HasPrefix(pod.Name, tenant.ImporterPrefix):
				v.Importer = pod
			case tenant.LauncherVMIUID(pod.Labels) != "":
				v.Launcher = pod
			default:
				t.Fatalf("Pod %s is neither an importer nor a launcher", pod.Name)
			}
		case "Node":
			n := &corev1.Node{}
			into(t, u, n)
			v.Node = n
			// Cluster API links a Node by the Machine's providerID, once the Node carries it.
			v.Machine.Status.NodeRef.Name = ""
			if n.Spec.ProviderID == tenant.ProviderID(vm) {
				v.Machine.Status.NodeRef.Name = n.Name
			}
			v.Workload.Spec.NodeName = n.Name
		case "CertificateSigningRequest":
			var c certificatesv1.CertificateSigningRequest
			into(t, u, &c)
			v.CSRs = append(v.CSRs, c)
		case "VirtualMachine":
			v.VM = &kubevirtv1.VirtualMachine{}
			into(t, u, v.VM)
		case "Event":
			// Evidence beside the objects.
		default:
			t.Fatalf("no place for a %s", u.GetKind())
		}
	}
	sort.Strings(kinds)
	if onlyMachineSets(kinds) {
		// A MachineSet that cannot create its Machines: none exist yet.
		s.Machines = nil
	}
	return s
}

func onlyMachineSets(kinds []string) bool {
	for _, k := range kinds {
		if k != "MachineSet" {
			return false
		}
	}
	return len(kinds) > 0
}

// into converts an observed object to its Go type, refusing fields the type does not have.
func into(t *testing.T, u *unstructured.Unstructured, obj any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, obj, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}
