package bootstrap

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/names"
	"github.com/cozystack/cozy-e2e/internal/sim/standin"
)

// kairos reconciles KairosConfigs for kubeadm workers, a model of the Kairos provider release
// cozystack/cozystack#4911 pins (v0.2.1, kubeadm workers: the seed; that release is not
// published where it can be read). What the readable provider (kairos-io/cluster-api-provider-
// kairos main c300236) does is followed where the kubeadm path would do the same: the host is
// named <hostnamePrefix><machine id> with the default prefix metal-
// (api/bootstrap/v1beta2/kairosconfig_types.go:297-303), and once the KubevirtMachine carries
// a providerID the bootstrap data is rendered again with it as the kubelet's --provider-id
// (internal/controllers/bootstrap/kairosconfig_controller.go:387-431), so the Node is linked by
// providerID, not by name. A spec the provider would refuse gets status.failureReason
// BootstrapDataSecretGenerationFailed (kairosconfig_controller.go:214-215) on any error of a
// reconcile, a spec it would refuse or a password Secret that is not there yet, and clears it
// on the next success (:231-236). The data carries a post-bootstrap step that patches the
// Node's providerID once the Node registered (transient.go).
type kairos struct {
	base
	late lateSecrets
}

func (r *kairos) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s, err := r.load(ctx, names.KairosConfigGVK, req.NamespacedName)
	if err != nil || s == nil {
		return ctrl.Result{}, err
	}
	cfg := s.config
	providerID, err := r.providerID(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	if created, _, _ := unstructured.NestedBool(cfg.Object, "status", "initialization", "dataSecretCreated"); created {
		if providerID == "" {
			return ctrl.Result{}, nil
		}
		// The KubevirtMachine got its providerID: render the data again with it.
		data, err := r.cloudConfig(ctx, s, providerID)
		if err != nil {
			return ctrl.Result{}, nil // refused at the first render already, or the spec changed
		}
		return ctrl.Result{}, r.rewriteSecret(ctx, s, cfg.GetName(), data)
	}
	wait := func(reason string) (ctrl.Result, error) {
		standin.SetConditions(cfg, r.now(), standin.False("Ready", "Info", reason, ""),
			standin.False(BootstrapReady, "Info", reason, ""), standin.False(DataSecretAvailable, "Info", reason, ""))
		return ctrl.Result{}, r.updateStatus(ctx, cfg)
	}
	if !infrastructureProvisioned(s.cluster) {
		return wait(WaitingForClusterInfrastructure)
	}
	if !controlPlaneInitialized(s.cluster) || s.cluster.Spec.ControlPlaneEndpoint.Host == "" {
		return wait(WaitingForControlPlaneInit)
	}
	data, err := r.cloudConfig(ctx, s, providerID)
	if err != nil {
		r.late.missing(ctx, r, s, err)
		msg := err.Error()
		standin.SetConditions(cfg, r.now(), standin.False("Ready", "Warning", KairosGenerationFailed, msg),
			standin.False(BootstrapReady, "Warning", KairosGenerationFailed, msg), standin.False(DataSecretAvailable, "Warning", KairosGenerationFailed, msg))
		_ = unstructured.SetNestedField(cfg.Object, KairosGenerationFailed, "status", "failureReason")
		_ = unstructured.SetNestedField(cfg.Object, msg, "status", "failureMessage")
		_ = unstructured.SetNestedField(cfg.Object, false, "status", "ready")
		return ctrl.Result{}, r.updateStatus(ctx, cfg)
	}
	name := cfg.GetName()
	if err := r.writeSecret(ctx, s, name, clusterv1.ClusterSecretType, data); err != nil {
		return ctrl.Result{}, err
	}
	r.late.cleared(r, s)
	unstructured.RemoveNestedField(cfg.Object, "status", "failureReason")
	unstructured.RemoveNestedField(cfg.Object, "status", "failureMessage")
	_ = unstructured.SetNestedField(cfg.Object, name, "status", "dataSecretName")
	_ = unstructured.SetNestedField(cfg.Object, true, "status", "ready")
	_ = unstructured.SetNestedField(cfg.Object, true, "status", "initialization", "dataSecretCreated")
	standin.SetConditions(cfg, r.now(), standin.True("Ready"), standin.True(BootstrapReady), standin.True(DataSecretAvailable))
	return ctrl.Result{}, r.updateStatus(ctx, cfg)
}

// kairosSpec is the part of KairosConfig.spec the kubeadm worker path reads.
type kairosSpec struct {
	Role                  string `json:"role"`
	Distribution          string `json:"distribution"`
	KubernetesVersion     string `json:"kubernetesVersion"`
	UserName              string `json:"userName"`
	UserPassword          string `json:"userPassword"`
	UserPasswordSecretRef *struct {
		Name, Key, Namespace string
	} `json:"userPasswordSecretRef"`
	UserGroups     []string         `json:"userGroups"`
	GitHubUser     string           `json:"githubUser"`
	SSHPublicKey   string           `json:"sshPublicKey"`
	Hostname       string           `json:"hostname"`
	HostnamePrefix *string          `json:"hostnamePrefix"`
	DNSServers     []string         `json:"dnsServers"`
	Files          []map[string]any `json:"files"`
	PreCommands    []string         `json:"preCommands"`
	PostCommands   []string         `json:"postCommands"`
	Kubeadm        *struct {
		JoinConfiguration map[string]any `json:"joinConfiguration"`
	} `json:"kubeadm"`
}

// providerID is the providerID of the config's KubevirtMachine (the Machine's infrastructure),
// "" while it has none; under the provider-id-missing fault the provider never learns it.
func (r *kairos) providerID(ctx context.Context, s *scope) (string, error) {
	if standin.PoolOfMachine(s.machine).Active(r.env, faults.ProviderIDMissing) {
		return "", nil
	}
	km := &unstructured.Unstructured{}
	km.SetGroupVersionKind(names.KubevirtMachineGVK)
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: s.machine.Namespace, Name: s.machine.Spec.InfrastructureRef.Name}, km); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	id, _, _ := unstructured.NestedString(km.Object, "spec", "providerID")
	return id, nil
}

// cloudConfig renders the worker's #cloud-config, or says why the provider refuses the spec.
func (r *kairos) cloudConfig(ctx context.Context, s *scope, providerID string) ([]byte, error) {
	raw, _, _ := unstructured.NestedMap(s.config.Object, "spec")
	js, _ := yaml.Marshal(raw)
	var spec kairosSpec
	if err := yaml.Unmarshal(js, &spec); err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	password, err := r.userPassword(ctx, s, spec)
	if err != nil {
		return nil, err
	}
	ep := s.cluster.Spec.ControlPlaneEndpoint
	join, token := joinConfiguration(spec, ep.Host+":"+strconv.Itoa(int(ep.Port)), providerID)
	pool := standin.PoolOfMachine(s.machine)
	hostname := r.hostname(spec, pool)
	options, err := yaml.Marshal(map[string]any{
		"clusterConfiguration": map[string]any{"kubernetesVersion": spec.KubernetesVersion},
		"joinConfiguration":    join,
	})
	if err != nil {
		return nil, err
	}
	doc := map[string]any{
		"users":   []any{kairosUser(spec, password)},
		"install": map[string]any{"auto": true, "device": "auto", "reboot": true},
		"cluster": map[string]any{
			"cluster_token": token, "control_plane_host": ep.Host, "role": "worker",
			"config": string(options),
		},
	}
	if hostname != "" {
		doc["hostname"] = hostname
	}
	if len(spec.DNSServers) > 0 {
		doc["dns"] = map[string]any{"nameservers": spec.DNSServers}
	}
	if len(spec.Files) > 0 {
		doc["write_files"] = spec.Files
	}
	if stages := r.stages(s, spec, pool); len(stages) > 0 {
		doc["stages"] = stages
	}
	body, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return append([]byte("#cloud-config\n"), body...), nil
}

// userPassword is the worker user's password: the spec's userPassword, or the key of the Secret
// userPasswordSecretRef names (key "password" and the config's namespace when unset), refused
// as the provider refuses it when the Secret or its key is missing.
func (r *kairos) userPassword(ctx context.Context, s *scope, spec kairosSpec) (string, error) {
	password := spec.UserPassword
	if ref := spec.UserPasswordSecretRef; ref != nil {
		ns, key := ref.Namespace, ref.Key
		if ns == "" {
			ns = s.config.GetNamespace()
		}
		if key == "" {
			key = "password"
		}
		var sec corev1.Secret
		// The provider's words (kairosconfig_controller.go:936-960).
		if err := r.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &sec); err != nil {
			return "", &passwordError{ns: ns, name: ref.Name, err: fmt.Errorf("get user password secret %s/%s: %w", ns, ref.Name, err)}
		}
		if _, ok := sec.Data[key]; !ok {
			return "", fmt.Errorf("user password secret %s/%s does not contain key %q", ns, ref.Name, key)
		}
		password = string(sec.Data[key])
	}
	return password, nil
}

// joinConfiguration is the spec's kubeadm JoinConfiguration with a fresh bootstrap token for
// server and, when providerID is known, the kubelet's --provider-id; it returns the token too.
func joinConfiguration(spec kairosSpec, server, providerID string) (map[string]any, string) {
	join := map[string]any{}
	if spec.Kubeadm != nil && spec.Kubeadm.JoinConfiguration != nil {
		join = spec.Kubeadm.JoinConfiguration
	}
	discovery, _ := join["discovery"].(map[string]any)
	if discovery == nil {
		discovery = map[string]any{}
	}
	bt, _ := discovery["bootstrapToken"].(map[string]any)
	if bt == nil {
		bt = map[string]any{}
	}
	token := randHex(6) + "." + randHex(16)
	bt["apiServerEndpoint"], bt["token"] = server, token
	discovery["bootstrapToken"] = bt
	join["discovery"] = discovery
	reg, _ := join["nodeRegistration"].(map[string]any)
	if reg == nil {
		reg = map[string]any{}
	}
	if providerID != "" {
		// kubeadm v1beta4: kubeletExtraArgs is a list of name/value pairs.
		args, _ := reg["kubeletExtraArgs"].([]any)
		reg["kubeletExtraArgs"] = append(args, map[string]any{"name": "provider-id", "value": providerID})
	}
	join["nodeRegistration"] = reg
	return join, token
}

// hostname is the worker's hostname: the spec's, or its prefix (the provider's default "metal-"
// unless the spec sets one and no provider-id fault is active on pool) and four characters of
// the machine ID.
func (r *kairos) hostname(spec kairosSpec, pool standin.Pool) string {
	hostname := spec.Hostname
	prefix := "metal-"
	if spec.HostnamePrefix != nil && !pool.Active(r.env, faults.ProviderIDMissing) && !pool.Active(r.env, faults.ProviderIDLate) {
		// Under provider-id-missing and providerid-late the provider's default prefix stands,
		// as for a class that leaves hostnamePrefix unset: the Node is not named like the VMI,
		// so CAPK does not patch its providerID. Under provider-id-missing (providerID above)
		// no --provider-id is passed and no post-bootstrap step patches it either.
		prefix = *spec.HostnamePrefix
	}
	if hostname == "" && prefix != "" {
		hostname = prefix + "{{ trunc 4 .MachineID }}"
	}
	return hostname
}

// kairosUser is the cloud-config's user: the spec's name (default kairos), groups, password and
// SSH keys (its own and its GitHub user's).
func kairosUser(spec kairosSpec, password string) map[string]any {
	user := map[string]any{"name": or(spec.UserName, "kairos"), "groups": spec.UserGroups}
	if password != "" {
		user["passwd"] = password
	}
	if spec.SSHPublicKey != "" {
		user["ssh_authorized_keys"] = []string{spec.SSHPublicKey}
	}
	if spec.GitHubUser != "" {
		user["ssh_authorized_keys"] = append(stringSlice(user["ssh_authorized_keys"]), "github:"+spec.GitHubUser)
	}
	return user
}

// stages are the cloud-config's stages: the spec's pre and post commands at boot, and the
// post-bootstrap step that patches the Node's providerID unless provider-id-missing is active
// on pool.
func (r *kairos) stages(s *scope, spec kairosSpec, pool standin.Pool) map[string]any {
	stages := map[string]any{}
	if len(spec.PreCommands)+len(spec.PostCommands) > 0 {
		stages["boot.before"] = []any{map[string]any{"commands": spec.PreCommands}}
		stages["boot.after"] = []any{map[string]any{"commands": spec.PostCommands}}
	}
	if !pool.Active(r.env, faults.ProviderIDMissing) {
		stages[postBootstrapStage] = []any{postBootstrap(names.ProviderID(s.machine.Spec.InfrastructureRef.Name))}
	}
	return stages
}

// validateKubeadm is the provider's admission of a kubeadm KairosConfig: the role and
// distribution checks of the readable provider (kairosconfig_webhook.go:97-113), with kubeadm the
// distribution the v0.2 line adds, and the kubeadm path's own rules.
func validateKubeadm(spec kairosSpec, join map[string]any) error {
	var errs []string
	if spec.Role != "control-plane" && spec.Role != "worker" {
		errs = append(errs, fmt.Sprintf("spec.role: Invalid value: %q: spec.role must be one of [control-plane, worker]", spec.Role))
	}
	if spec.Distribution != "kubeadm" {
		errs = append(errs, fmt.Sprintf("spec.distribution %q: the sim's Kairos provider joins kubeadm workers only", spec.Distribution))
	}
	if spec.Role == "control-plane" {
		errs = append(errs, "spec.role: kubeadm is supported only for worker nodes")
	}
	if spec.KubernetesVersion == "" {
		errs = append(errs, "spec.kubernetesVersion: Required value")
	}
	if spec.UserPassword == "" && spec.UserPasswordSecretRef == nil && spec.SSHPublicKey == "" && spec.GitHubUser == "" {
		errs = append(errs, "spec: a KairosConfig must set at least one of userPassword, userPasswordSecretRef, sshPublicKey or githubUser")
	}
	disc, _ := join["discovery"].(map[string]any)
	bt, _ := disc["bootstrapToken"].(map[string]any)
	if tok, _ := bt["token"].(string); tok != "" {
		errs = append(errs, "spec.kubeadm.joinConfiguration.discovery.bootstrapToken.token: inline bootstrap token is not allowed")
	}
	if skip, _ := bt["unsafeSkipCAVerification"].(bool); skip {
		errs = append(errs, "spec.kubeadm.joinConfiguration.discovery.bootstrapToken.unsafeSkipCAVerification: unsafeSkipCAVerification is not allowed")
	}
	if f, ok := disc["file"].(map[string]any); ok && len(f) > 0 {
		errs = append(errs, "spec.kubeadm.joinConfiguration.discovery.file: file-based discovery is not supported")
	}
	if js, _ := yaml.Marshal(join); strings.Contains(string(js), "{{") {
		errs = append(errs, "spec.kubeadm: must not contain '{{' (placeholders are not rendered)")
	}
	reg, _ := join["nodeRegistration"].(map[string]any)
	if name, _ := reg["name"].(string); name != "" && len(validation.IsDNS1123Subdomain(name)) > 0 {
		errs = append(errs, fmt.Sprintf("spec.kubeadm.joinConfiguration.nodeRegistration.name %q: nodeRegistration.name must be a valid DNS-1123 subdomain", name))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func stringSlice(v any) []string {
	s, _ := v.([]string)
	return s
}
