package world

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	admissionapi "k8s.io/api/admission/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
)

// webhookServing is the TLS identity and address of the in-process webhook server: a CA of its
// own, a serving certificate for 127.0.0.1, and a free loopback port.
type webhookServing struct {
	dir    string
	port   int
	ca     *controlplane.CA
	server webhook.Server
}

func newWebhookServing(dir string) (*webhookServing, error) {
	ca, port, err := controlplane.WebhookServing(dir, "sim-webhooks")
	if err != nil {
		return nil, err
	}
	s := &webhookServing{dir: dir, port: port, ca: ca}
	s.server = webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: dir})
	return s, nil
}

// URL is the https URL of path on the webhook server.
func (s *webhookServing) URL(path string) string {
	return fmt.Sprintf("https://127.0.0.1:%d%s", s.port, path)
}

func (s *webhookServing) waitServing(ctx context.Context) error {
	check := s.server.StartedChecker()
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL("/"), nil)
		if last = check(req); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("world: webhook server on 127.0.0.1:%d not serving (%w); last check: %v", s.port, ctx.Err(), last)
		case <-time.After(pollInterval):
		}
	}
}

func (s *webhookServing) close() {}

// capiWebhooks are Cluster API's admission webhooks for the kinds the platform renders and the
// controllers create, as its kubebuilder markers declare them (internal/webhooks).
var capiWebhooks = []struct {
	resource       string
	validateDelete bool
}{
	{"clusters", true}, {"machines", false}, {"machinesets", false}, {"machinedeployments", false}, {"machinehealthchecks", false},
}

func installAdmissionWebhooks(ctx context.Context, c *cluster.Cluster, s *webhookServing) error {
	mutating := &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "sim-cluster-api-defaulting"}}
	validating := &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "sim-cluster-api-validating"}}
	for _, w := range capiWebhooks {
		kind := w.resource[:len(w.resource)-1]
		ops := []admissionv1.OperationType{admissionv1.Create, admissionv1.Update}
		rule := func(ops []admissionv1.OperationType) []admissionv1.RuleWithOperations {
			return []admissionv1.RuleWithOperations{{Operations: ops, Rule: admissionv1.Rule{
				APIGroups: []string{"cluster.x-k8s.io"}, APIVersions: []string{"v1beta2"}, Resources: []string{w.resource},
			}}}
		}
		cc := func(prefix string) admissionv1.WebhookClientConfig {
			return admissionv1.WebhookClientConfig{URL: ptr.To(s.URL("/" + prefix + "-cluster-x-k8s-io-v1beta2-" + kind)), CABundle: s.ca.CertPEM}
		}
		mutating.Webhooks = append(mutating.Webhooks, admissionv1.MutatingWebhook{
			Name: "default." + kind + ".cluster.x-k8s.io", ClientConfig: cc("mutate"), Rules: rule(ops),
			MatchPolicy: ptr.To(admissionv1.Equivalent), SideEffects: ptr.To(admissionv1.SideEffectClassNone),
			FailurePolicy: ptr.To(admissionv1.Fail), AdmissionReviewVersions: []string{"v1"},
		})
		vops := ops
		if w.validateDelete {
			vops = append(vops, admissionv1.Delete)
		}
		validating.Webhooks = append(validating.Webhooks, admissionv1.ValidatingWebhook{
			Name: "validation." + kind + ".cluster.x-k8s.io", ClientConfig: cc("validate"), Rules: rule(vops),
			MatchPolicy: ptr.To(admissionv1.Equivalent), SideEffects: ptr.To(admissionv1.SideEffectClassNone),
			FailurePolicy: ptr.To(admissionv1.Fail), AdmissionReviewVersions: []string{"v1"},
		})
	}
	for _, obj := range []client.Object{mutating, validating} {
		if err := c.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("world: installing Cluster API admission webhooks (%s): %w", obj.GetName(), err)
		}
	}
	return nil
}

// Validating serves the stand-in validating webhook v: its handler is registered on the
// world's webhook server now, its configuration is installed once the manager runs (Run).
func (w *World) Validating(v simenv.Webhook) error {
	cc := w.serveStandin("/validate-standin-"+v.Name, v)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.standinValidating = append(w.standinValidating, admissionv1.ValidatingWebhook{
		Name: v.Name, ClientConfig: cc, Rules: v.Rules, MatchPolicy: ptr.To(admissionv1.Equivalent),
		SideEffects: ptr.To(admissionv1.SideEffectClassNone), FailurePolicy: ptr.To(admissionv1.Fail), AdmissionReviewVersions: []string{"v1"},
	})
	return nil
}

// Mutating serves the stand-in mutating webhook m, as Validating serves a validating one. The
// apiserver calls it before any validating webhook, and again if a later mutating webhook
// changed the object (reinvocationPolicy IfNeeded), so its patch must be idempotent.
func (w *World) Mutating(m simenv.Webhook) error {
	cc := w.serveStandin("/mutate-standin-"+m.Name, m)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.standinMutating = append(w.standinMutating, admissionv1.MutatingWebhook{
		Name: m.Name, ClientConfig: cc, Rules: m.Rules, MatchPolicy: ptr.To(admissionv1.Equivalent),
		SideEffects: ptr.To(admissionv1.SideEffectClassNone), FailurePolicy: ptr.To(admissionv1.Fail), AdmissionReviewVersions: []string{"v1"},
		ReinvocationPolicy: ptr.To(admissionv1.IfNeededReinvocationPolicy),
	})
	return nil
}

// serveStandin registers the handler of the stand-in webhook h on path and says how the
// apiserver reaches it.
func (w *World) serveStandin(path string, h simenv.Webhook) admissionv1.WebhookClientConfig {
	var handler http.Handler = &admission.Webhook{Handler: h.Handler}
	if h.Unavailable != nil {
		handler = unavailable(handler, h.Unavailable)
	}
	w.mgr.GetWebhookServer().Register(path, handler)
	return admissionv1.WebhookClientConfig{URL: ptr.To(w.webhooks.URL(path)), CABundle: w.webhooks.ca.CertPEM}
}

// installStandinWebhooks installs the configuration of every stand-in webhook.
func (w *World) installStandinWebhooks(ctx context.Context) error {
	w.mu.Lock()
	var cfgs []client.Object
	if len(w.standinMutating) > 0 {
		cfgs = append(cfgs, &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "sim-standin-mutating"},
			Webhooks: append([]admissionv1.MutatingWebhook(nil), w.standinMutating...)})
	}
	if len(w.standinValidating) > 0 {
		cfgs = append(cfgs, &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "sim-standin-validating"},
			Webhooks: append([]admissionv1.ValidatingWebhook(nil), w.standinValidating...)})
	}
	w.mu.Unlock()
	for _, cfg := range cfgs {
		if err := w.Cluster.Client.Create(ctx, cfg); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("world: installing the stand-ins' admission webhooks (%s): %w", cfg.GetName(), err)
		}
	}
	return nil
}

// unavailable serves h, except to the requests down says find the webhook unavailable: their
// connection (or HTTP/2 stream) is ended without an answer, so the apiserver cannot read one
// and fails the request with "failed calling webhook" (k8s.io/apiserver v0.35.4
// pkg/admission/plugin/webhook/validating/dispatcher.go:295-312, 199-219).
func unavailable(h http.Handler, down func(admission.Request) bool) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		var review admissionapi.AdmissionReview
		if json.Unmarshal(body, &review) == nil && review.Request != nil && down(admission.Request{AdmissionRequest: *review.Request}) {
			panic(http.ErrAbortHandler)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(rw, r)
	})
}
