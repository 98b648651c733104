package hostjobs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// serviceAccountKubeconfig is the key, among the materialised volumes, of the kubeconfig that
// carries the pod's ServiceAccount token (its automounted kube-api-access volume).
const serviceAccountKubeconfig = "\x00serviceaccount-kubeconfig"

// serviceAccountMount is where the kubelet mounts a pod's ServiceAccount token.
const serviceAccountMount = "/var/run/secrets/kubernetes.io/serviceaccount"

// materialise writes every volume of pod under dir/volumes/<name> and returns where each is.
// Secret and ConfigMap volumes hold their keys (or the items named), an emptyDir is an empty
// folder, a projected volume its sources: a ServiceAccount token the apiserver issues for the
// pod (TokenRequest, bound to the pod), ConfigMaps, Secrets and the downward API's namespace. A
// container that mounts the ServiceAccount token gets a kubeconfig for it.
func (r *runner) materialise(ctx context.Context, pod *corev1.Pod, dir string) (map[string]string, error) {
	out := map[string]string{}
	root := filepath.Join(dir, "volumes")
	if err := os.RemoveAll(root); err != nil {
		return nil, err
	}
	for _, v := range pod.Spec.Volumes {
		path := filepath.Join(root, v.Name)
		if err := os.MkdirAll(path, 0o700); err != nil {
			return nil, err
		}
		out[v.Name] = path
		var err error
		switch {
		case v.Secret != nil:
			err = r.writeSecret(ctx, pod.Namespace, v.Secret.SecretName, v.Secret.Items, ptrTrue(v.Secret.Optional), path)
		case v.ConfigMap != nil:
			err = r.writeConfigMap(ctx, pod.Namespace, v.ConfigMap.Name, v.ConfigMap.Items, ptrTrue(v.ConfigMap.Optional), path)
		case v.EmptyDir != nil:
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				switch {
				case src.ServiceAccountToken != nil:
					var tok string
					if tok, err = r.token(ctx, pod, src.ServiceAccountToken); err == nil {
						err = os.WriteFile(filepath.Join(path, src.ServiceAccountToken.Path), []byte(tok), 0o600)
					}
				case src.ConfigMap != nil:
					err = r.writeConfigMap(ctx, pod.Namespace, src.ConfigMap.Name, src.ConfigMap.Items, ptrTrue(src.ConfigMap.Optional), path)
				case src.Secret != nil:
					err = r.writeSecret(ctx, pod.Namespace, src.Secret.Name, src.Secret.Items, ptrTrue(src.Secret.Optional), path)
				case src.DownwardAPI != nil:
					for _, f := range src.DownwardAPI.Items {
						if f.FieldRef != nil {
							val, ferr := fieldValue(pod, f.FieldRef.FieldPath)
							if ferr == nil {
								err = os.WriteFile(filepath.Join(path, f.Path), []byte(val), 0o600)
							} else {
								err = ferr
							}
						}
					}
				}
				if err != nil {
					break
				}
			}
		default:
			err = fmt.Errorf("volume %s: only secret, configMap, emptyDir and projected volumes run on the host", v.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
	}
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for _, m := range c.VolumeMounts {
			if m.MountPath != serviceAccountMount {
				continue
			}
			kc := filepath.Join(out[m.Name], "kubeconfig")
			cfg := clientcmdapi.NewConfig()
			cfg.Clusters["in-cluster"] = &clientcmdapi.Cluster{Server: r.o.APIServerURL, CertificateAuthorityData: r.o.APIServerCA}
			cfg.AuthInfos["serviceaccount"] = &clientcmdapi.AuthInfo{TokenFile: filepath.Join(out[m.Name], "token")}
			cfg.Contexts["in-cluster"] = &clientcmdapi.Context{Cluster: "in-cluster", AuthInfo: "serviceaccount", Namespace: pod.Namespace}
			cfg.CurrentContext = "in-cluster"
			if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
				return nil, err
			}
			out[serviceAccountKubeconfig] = kc
		}
	}
	return out, nil
}

// token is a token for the pod's ServiceAccount, bound to the pod, as the kubelet requests one
// for a projected serviceAccountToken source.
func (r *runner) token(ctx context.Context, pod *corev1.Pod, src *corev1.ServiceAccountTokenProjection) (string, error) {
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: src.ExpirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	tr, err := r.cs.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("a token for ServiceAccount %s/%s: %w", pod.Namespace, sa, err)
	}
	return tr.Status.Token, nil
}

func (r *runner) writeSecret(ctx context.Context, ns, name string, items []corev1.KeyToPath, optional bool, dir string) error {
	var s corev1.Secret
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		if optional && client.IgnoreNotFound(err) == nil {
			return nil
		}
		return fmt.Errorf("secret %q: %w", name, err)
	}
	return writeKeys(s.Data, items, dir)
}

func (r *runner) writeConfigMap(ctx context.Context, ns, name string, items []corev1.KeyToPath, optional bool, dir string) error {
	var cm corev1.ConfigMap
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cm); err != nil {
		if optional && client.IgnoreNotFound(err) == nil {
			return nil
		}
		return fmt.Errorf("configmap %q: %w", name, err)
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return writeKeys(data, items, dir)
}

// writeKeys writes each key as a file (or the items, each to its path).
func writeKeys(data map[string][]byte, items []corev1.KeyToPath, dir string) error {
	if len(items) == 0 {
		for k, v := range data {
			if err := os.WriteFile(filepath.Join(dir, k), v, 0o600); err != nil {
				return err
			}
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			return fmt.Errorf("no key %q", it.Key)
		}
		p := filepath.Join(dir, it.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(p, v, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// environment is the container's environment as the kubelet makes it: envFrom, then env (values,
// $(VAR) references, Secret and ConfigMap keys, the downward API's fields).
func (r *runner) environment(ctx context.Context, pod *corev1.Pod, c *corev1.Container) ([]corev1.EnvVar, error) {
	var out []corev1.EnvVar
	for _, from := range c.EnvFrom {
		var data map[string][]byte
		switch {
		case from.SecretRef != nil:
			var s corev1.Secret
			if err := r.c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: from.SecretRef.Name}, &s); err != nil {
				if ptrTrue(from.SecretRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("envFrom secret %q: %w", from.SecretRef.Name, err)
			}
			data = s.Data
		case from.ConfigMapRef != nil:
			var cm corev1.ConfigMap
			if err := r.c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: from.ConfigMapRef.Name}, &cm); err != nil {
				if ptrTrue(from.ConfigMapRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("envFrom configmap %q: %w", from.ConfigMapRef.Name, err)
			}
			data = map[string][]byte{}
			for k, v := range cm.Data {
				data[k] = []byte(v)
			}
		}
		for k, v := range data {
			out = append(out, corev1.EnvVar{Name: from.Prefix + k, Value: string(v)})
		}
	}
	for _, e := range c.Env {
		v := corev1.EnvVar{Name: e.Name, Value: expand(e.Value, out)}
		if f := e.ValueFrom; f != nil {
			var err error
			switch {
			case f.SecretKeyRef != nil:
				var s corev1.Secret
				if err = r.c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: f.SecretKeyRef.Name}, &s); err == nil {
					b, ok := s.Data[f.SecretKeyRef.Key]
					if !ok && !ptrTrue(f.SecretKeyRef.Optional) {
						err = fmt.Errorf("couldn't find key %s in Secret %s/%s", f.SecretKeyRef.Key, pod.Namespace, f.SecretKeyRef.Name)
					}
					v.Value = string(b)
				}
			case f.ConfigMapKeyRef != nil:
				var cm corev1.ConfigMap
				if err = r.c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: f.ConfigMapKeyRef.Name}, &cm); err == nil {
					s, ok := cm.Data[f.ConfigMapKeyRef.Key]
					if !ok && !ptrTrue(f.ConfigMapKeyRef.Optional) {
						err = fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", f.ConfigMapKeyRef.Key, pod.Namespace, f.ConfigMapKeyRef.Name)
					}
					v.Value = s
				}
			case f.FieldRef != nil:
				v.Value, err = fieldValue(pod, f.FieldRef.FieldPath)
			default:
				err = fmt.Errorf("env %s: only secretKeyRef, configMapKeyRef and fieldRef run on the host", e.Name)
			}
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
		}
		out = append(out, v)
	}
	return out, nil
}

// fieldValue is a downward API field of the pod.
func fieldValue(pod *corev1.Pod, path string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	case "status.hostIP":
		return pod.Status.HostIP, nil
	}
	if k, ok := strings.CutPrefix(path, "metadata.labels['"); ok {
		return pod.Labels[strings.TrimSuffix(k, "']")], nil
	}
	return "", fmt.Errorf("field %s is not one the host runner knows", path)
}

func ptrTrue(b *bool) bool { return b != nil && *b }
