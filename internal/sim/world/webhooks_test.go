package world

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionapi "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// A stand-in webhook unavailable for a request ends its connection without an answer, as an
// unreachable webhook does to the apiserver's call; other requests are answered.
func TestAnUnavailableWebhookAnswersNothing(t *testing.T) {
	hook := &admission.Webhook{Handler: admission.HandlerFunc(func(_ context.Context, _ admission.Request) admission.Response {
		return admission.Allowed("")
	})}
	srv := httptest.NewServer(unavailable(hook, func(r admission.Request) bool { return r.Name == "down" }))
	defer srv.Close()
	post := func(name string) (*http.Response, error) {
		body, _ := json.Marshal(admissionapi.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionapi.AdmissionRequest{UID: "1", Name: name}})
		return http.Post(srv.URL, "application/json", bytes.NewReader(body))
	}
	if resp, err := post("down"); err == nil {
		resp.Body.Close()
		t.Fatalf("the unavailable webhook answered %s", resp.Status)
	}
	resp, err := post("up")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var review admissionapi.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&review); err != nil || review.Response == nil || !review.Response.Allowed {
		t.Fatalf("%+v %v", review.Response, err)
	}
}
