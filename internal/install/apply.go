package install

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/cozystack/cozy-e2e/framework/cluster"
)

// FieldOwner is the field manager of everything the harness applies.
const FieldOwner = "cozy-e2e"

// Applier server-side applies objects to one cluster.
type Applier struct {
	c   *cluster.Cluster
	dyn dynamic.Interface
	// DryRun asks the apiserver to validate and default without persisting (dryRun=All).
	DryRun bool
}

// NewApplier builds an Applier on c.
func NewApplier(c *cluster.Cluster) (*Applier, error) {
	dyn, err := dynamic.NewForConfig(c.REST)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: dynamic client: %w", c.Name, err)
	}
	return &Applier{c: c, dyn: dyn}, nil
}

// Dynamic is the applier's dynamic client.
func (a *Applier) Dynamic() dynamic.Interface { return a.dyn }

// Object is one manifest document and where it came from, for messages.
type Object struct {
	Source string // file or URL, and document index: "cozystack-operator-generic.yaml#3"
	Obj    *unstructured.Unstructured
}

// Apply server-side applies each object in order, forcing ownership of the fields it sets.
// The first refusal ends it, naming the object, its source and the apiserver's answer.
func (a *Applier) Apply(ctx context.Context, objs []Object) error {
	for _, o := range objs {
		if err := a.apply(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

func (a *Applier) apply(ctx context.Context, o Object) error {
	gvk := o.Obj.GroupVersionKind()
	desc := fmt.Sprintf("%s %s", gvk.Kind, key(o.Obj))
	m, err := a.c.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("apply %s (from %s): the cluster serves no %s: %w; is the CRD that defines it installed?", desc, o.Source, gvk.GroupVersion().WithKind(gvk.Kind), err)
	}
	opts := metav1.ApplyOptions{FieldManager: FieldOwner, Force: true}
	if a.DryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var ri dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
	if m.Scope.Name() == "namespace" {
		ns := o.Obj.GetNamespace()
		if ns == "" {
			return fmt.Errorf("apply %s (from %s): a namespaced %s needs metadata.namespace", desc, o.Source, gvk.Kind)
		}
		ri = a.dyn.Resource(m.Resource).Namespace(ns)
	}
	if _, err := ri.Apply(ctx, o.Obj.GetName(), o.Obj, opts); err != nil {
		return fmt.Errorf("apply %s (from %s): %w", desc, o.Source, err)
	}
	return nil
}

func key(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetName()
	}
	return u.GetNamespace() + "/" + u.GetName()
}

// gvr shorthands for what the gates read.
var (
	gvrCRD         = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	gvrDeployment  = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	gvrReplicaSet  = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
	gvrPod         = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	gvrService     = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	gvrHelmRelease = schema.GroupVersionResource{Group: "helm.toolkit.fluxcd.io", Version: "v2", Resource: "helmreleases"}
	gvrNodeClass   = schema.GroupVersionResource{Group: "cozystack.io", Version: "v1alpha1", Resource: "nodegroupclasses"}
	gvrAPIService  = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	gvrVWebhook    = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}
	gvrMWebhook    = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"}
)
