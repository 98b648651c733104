// Command incluster is the test's in-cluster client: it dials the apiserver as client-go's
// rest.InClusterConfig does (KUBERNETES_SERVICE_HOST and _PORT, the projected service account
// token and CA under /var/run/secrets/kubernetes.io/serviceaccount), asks who it is with a
// SelfSubjectReview, and writes the answer to its termination message (or why it could not).
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

const sa = "/var/run/secrets/kubernetes.io/serviceaccount/"

func main() {
	msg, err := review()
	if err != nil {
		msg = "error: " + err.Error()
	}
	_ = os.WriteFile("/dev/termination-log", []byte(msg), 0o644)
	fmt.Println(msg)
	if err != nil {
		os.Exit(1)
	}
}

func review() (string, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return "", fmt.Errorf("KUBERNETES_SERVICE_HOST/_PORT not set")
	}
	token, err := os.ReadFile(sa + "token")
	if err != nil {
		return "", err
	}
	ca, err := os.ReadFile(sa + "ca.crt")
	if err != nil {
		return "", err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return "", fmt.Errorf("no certificate in %sca.crt", sa)
	}
	url := "https://" + net.JoinHostPort(host, port) + "/apis/authentication.k8s.io/v1/selfsubjectreviews"
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+string(token))
	req.Header.Set("Content-Type", "application/json")
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("%s: %s: %s", url, resp.Status, body)
	}
	var out struct {
		Status struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return "", err
	}
	return fmt.Sprintf("authenticated as %s through %s", out.Status.UserInfo.Username, net.JoinHostPort(host, port)), nil
}
