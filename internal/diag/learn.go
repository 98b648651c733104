package diag

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/cozystack/cozy-e2e/framework/cluster"
)

// LearnSecrets teaches r every value of every Secret in namespaces of c (every namespace when
// none is given), once. The values stay in memory; they are never written anywhere.
func LearnSecrets(ctx context.Context, c *cluster.Cluster, r *Redactor, namespaces ...string) (int, error) {
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	n := 0
	for _, ns := range namespaces {
		var list corev1.SecretList
		var err error
		continueToken := ""
		for {
			var page *corev1.SecretList
			page, err = c.Kube.CoreV1().Secrets(ns).List(ctx, listOptions(continueToken))
			if err != nil {
				break
			}
			list.Items = append(list.Items, page.Items...)
			if continueToken = page.Continue; continueToken == "" {
				break
			}
		}
		if err != nil {
			where := "every namespace"
			if ns != "" {
				where = "namespace " + ns
			}
			return n, fmt.Errorf("learning the Secret values of cluster %s (%s) to scrub them: %w", c.Name, where, err)
		}
		for i := range list.Items {
			r.LearnSecret(&list.Items[i])
			n++
		}
	}
	return n, nil
}

// WatchSecrets keeps teaching r the values of Secrets in namespace of c ("" for all) as they
// are created or changed, until ctx ends. It returns once the Secrets that exist now are
// learned, so nothing written after it returns can carry one of them unscrubbed.
func WatchSecrets(ctx context.Context, c *cluster.Cluster, r *Redactor, namespace string) error {
	f := informers.NewSharedInformerFactoryWithOptions(c.Kube, 0, informers.WithNamespace(namespace))
	inf := f.Core().V1().Secrets().Informer()
	learn := func(obj any) {
		if s, ok := obj.(*corev1.Secret); ok {
			r.LearnSecret(s)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    learn,
		UpdateFunc: func(_, obj any) { learn(obj) },
	}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("learning the Secret values of cluster %s to scrub them: the Secret list did not sync: %w", c.Name, ctx.Err())
	}
	return nil
}
