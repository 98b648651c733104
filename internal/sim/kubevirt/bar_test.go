package kubevirt_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cozystack/cozy-e2e/internal/sim/kubevirt"
	"github.com/cozystack/cozy-e2e/internal/sim/simtest"
)

// The real virt-controller owns VirtualMachines and VirtualMachineInstances: this package must
// not register a controller for either again (For or Owns of those kinds), whatever it is named.
func TestNoVMOrVMIReconcilerIsRegistered(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		found, err := vmReconcilers(f, src)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, r := range found {
			t.Errorf("%s: internal/sim/kubevirt registers a VM or VMI reconciler again; the real virt-controller owns them", r)
		}
	}
	if checked == 0 {
		t.Fatal("no Go file of the package was read")
	}
}

// The bar catches the controllers this package had before virt-controller ran for real.
func TestTheBarCatchesTheFormerVMAndVMIControllers(t *testing.T) {
	src := `package kubevirt
func setupVM(mgr manager.Manager, env *simenv.Env) error {
	return ctrl.NewControllerManagedBy(mgr).Named("sim-kubevirt-vm").
		For(&kubevirtv1.VirtualMachine{}).
		Owns(&kubevirtv1.VirtualMachineInstance{}).
		Complete(&vmReconciler{})
}`
	found, err := vmReconcilers("vm.go", []byte(src))
	if err != nil || len(found) != 2 {
		t.Fatalf("found %v (%v); want the For and the Owns", found, err)
	}
}

// vmReconcilers are the For and Owns calls of src that name a VirtualMachine or a
// VirtualMachineInstance, as "file:line: For(&VirtualMachine{})".
func vmReconcilers(name string, src []byte) ([]string, error) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, name, src, 0)
	if err != nil {
		return nil, err
	}
	var out []string
	ast.Inspect(file, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || (sel.Sel.Name != "For" && sel.Sel.Name != "Owns") {
			return true
		}
		for _, arg := range call.Args {
			if kind := kubevirtKind(arg); kind == "VirtualMachine" || kind == "VirtualMachineInstance" {
				out = append(out, fmt.Sprintf("%s: %s(&%s{})", fset.Position(call.Pos()), sel.Sel.Name, kind))
			}
		}
		return true
	})
	return out, nil
}

// kubevirtKind is the type name of &pkg.Kind{} (or pkg.Kind{}), or "".
func kubevirtKind(e ast.Expr) string {
	if u, ok := e.(*ast.UnaryExpr); ok {
		e = u.X
	}
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		return ""
	}
	if sel, ok := lit.Type.(*ast.SelectorExpr); ok {
		return sel.Sel.Name
	}
	return ""
}

// With the virt-handler stand-in alone (no virt-controller), a VirtualMachine gets no VMI and
// no status, and a VMI no launcher Pod and no phase: nothing here does virt-controller's work.
func TestTheStandInDoesNoVirtControllerWork(t *testing.T) {
	e := simtest.Start(t)
	env := simtest.SimEnv(t, e.Dir, "", nil)
	e.Manager(t, func(m manager.Manager) error { return kubevirt.Setup(m, env) })
	ctx := t.Context()
	c := e.Cluster.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t"}}); err != nil {
		t.Fatal(err)
	}
	always := kubevirtv1.RunStrategyAlways
	mem := resource.MustParse("1Gi")
	spec := kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{Memory: &kubevirtv1.Memory{Guest: &mem}}}
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "vm"},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &always, Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: spec}}}
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "vmi"}, Spec: spec}
	for _, o := range []client.Object{vm, vmi} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(3 * time.Second)
	if err := c.Get(ctx, client.ObjectKey{Namespace: "t", Name: "vm"}, &kubevirtv1.VirtualMachineInstance{}); err == nil {
		t.Error("a VMI was created for the VirtualMachine")
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil || vm.Status.PrintableStatus != "" || len(vm.Finalizers) > 0 {
		t.Errorf("VirtualMachine touched: status %+v, finalizers %v (%v)", vm.Status, vm.Finalizers, err)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace("t")); err != nil || len(pods.Items) > 0 {
		t.Errorf("%d Pods created (%v)", len(pods.Items), err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(vmi), vmi); err != nil || vmi.Status.Phase != "" || len(vmi.Finalizers) > 0 {
		t.Errorf("VMI touched: phase %q, finalizers %v (%v)", vmi.Status.Phase, vmi.Finalizers, err)
	}
}
