package diag

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

const canary = "canary-7f3a9c1e5b2d4f60"

func TestRedactorScrubsLearnedValuesRawAndEncoded(t *testing.T) {
	r := NewRedactor()
	r.LearnSecret(&corev1.Secret{Data: map[string][]byte{"v": []byte(canary), "short": []byte("true")}})
	in := "env CANARY=" + canary + " b64 " + base64.StdEncoding.EncodeToString([]byte(canary)) + " short true\n"
	out := string(r.Scrub([]byte(in)))
	if strings.Contains(out, canary) || strings.Contains(out, base64.StdEncoding.EncodeToString([]byte(canary))) {
		t.Fatalf("learned value left in %q", out)
	}
	if !strings.Contains(out, "short true") {
		t.Fatalf("a value under %d bytes must not be scrubbed as a word: %q", minSecretLen, out)
	}
}

// A kubeconfig stored in a Secret is learned piece by piece, so its credentials are scrubbed
// wherever they show up, even outside the kubeconfig; its ordinary lines are left alone.
func TestRedactorLearnsThePiecesOfAMultiLineValue(t *testing.T) {
	key := "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWprbG1ub3A="
	kubeconfig := "apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n    token: " + "s3cr3tT0kenValue42xyz" + "\n    client-key-data: " + key + "\n"
	r := NewRedactor()
	r.Learn(kubeconfig)
	out := string(r.Scrub([]byte("seen s3cr3tT0kenValue42xyz and " + key + "\napiVersion: v1\n")))
	if strings.Contains(out, "s3cr3tT0kenValue42xyz") || strings.Contains(out, key) {
		t.Fatalf("piece of a learned kubeconfig left: %q", out)
	}
	if !strings.Contains(out, "apiVersion: v1") {
		t.Fatalf("an ordinary line was scrubbed: %q", out)
	}
}

func TestRedactorScrubsCredentialShapes(t *testing.T) {
	pem := "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAzz\nabcdef\n-----END RSA PRIVATE KEY-----\n"
	jwtTok := "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEyMyJ9.eyJzdWIiOiJzeXN0ZW06c2EifQ.c2lnbmF0dXJlLXZhbHVlLWhlcmU"
	b64key := base64.StdEncoding.EncodeToString([]byte("-----BEGIN EC PRIVATE KEY-----\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n-----END EC PRIVATE KEY-----\n"))
	cases := map[string]struct{ in, gone, kept string }{
		"private key block":   {"before\n" + pem + "after\n", "MIIEowIBAAKCAQEAzz", "after"},
		"client key data":     {"    client-key-data: QUJDREVGR0hJSktMTU5PUFFSU1RVVldY\n", "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY", "client-key-data"},
		"token field":         {`{"token":"AbCdEf0123456789xyzTOKEN"}` + "\n", "AbCdEf0123456789xyzTOKEN", `"token"`},
		"bearer header":       {"Authorization: Bearer abc.def-ghi_jkl\n", "abc.def-ghi_jkl", "Authorization"},
		"bootstrap token":     {"kubeadm join --token abcdef.0123456789abcdef host\n", "abcdef.0123456789abcdef", "host"},
		"service account jwt": {"token " + jwtTok + "\n", jwtTok, "token"},
		"encoded private key": {"key: " + b64key + "\n", b64key, "key:"},
		"label key is kept":   {"key: app.kubernetes.io/name\n", "", "app.kubernetes.io/name"},
		"secret name is kept": {"secretRef: kubernetes-x-kubeconfig\nsecret: kubernetes-x-admin-kubeconfig\n", "", "kubernetes-x-admin-kubeconfig"},
	}
	r := NewRedactor()
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			out := string(r.Scrub([]byte(c.in)))
			if c.gone != "" && strings.Contains(out, c.gone) {
				t.Fatalf("credential left: %q", out)
			}
			if !strings.Contains(out, c.kept) {
				t.Fatalf("%q lost: %q", c.kept, out)
			}
		})
	}
}

// A value split across two writes of a long line without a newline is still scrubbed.
func TestFileScrubsAValueSplitAcrossWrites(t *testing.T) {
	dir := t.TempDir()
	r := NewRedactor(canary)
	a, err := NewArtifacts(dir, r, 0)
	if err != nil {
		t.Fatal(err)
	}
	f, err := a.Create("long.log", 0)
	if err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", maxLine-5)
	_, _ = f.Write([]byte(pad + canary[:10]))
	_, _ = f.Write([]byte(canary[10:] + " end\n"))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := Scan(dir, canary); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "long.log"))
	if !strings.HasSuffix(string(data), Redacted+" end\n") {
		t.Fatalf("tail %q", string(data[len(data)-40:]))
	}
}

func TestFileAndFolderBytesAreBounded(t *testing.T) {
	dir := t.TempDir()
	a, _ := NewArtifacts(dir, NewRedactor(), 100)
	f, _ := a.Create("a.log", 30)
	_, err := f.Write([]byte("0123456789\n0123456789\n0123456789\n"))
	if !errors.Is(err, ErrLimit) || !f.Truncated() {
		t.Fatalf("file bound not reported: %v", err)
	}
	_ = f.Close()
	if got := f.Size(); got != 22 {
		t.Fatalf("a file cut at its bound keeps whole lines only: %d bytes", got)
	}
	cut, err := a.WriteFile("b.log", []byte(strings.Repeat("y", 99)+"\n"), 0)
	if err != nil || !cut {
		t.Fatalf("folder bound: cut %v err %v", cut, err)
	}
	if a.Written() > 100 {
		t.Fatalf("folder holds %d bytes over its bound of 100", a.Written())
	}
	if _, err := a.Create("../escape", 0); err == nil {
		t.Fatal("a path outside the folder was accepted")
	}
}

func TestScanFindsRawAndEncodedLeaksAndScrubTreeRemovesThem(t *testing.T) {
	dir := t.TempDir()
	_ = os.MkdirAll(filepath.Join(dir, "pools", "md0"), 0o755)
	_ = os.WriteFile(filepath.Join(dir, "pools", "md0", "a.txt"), []byte("x "+canary+"\n"), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "b.txt"), []byte(base64.StdEncoding.EncodeToString([]byte(canary))+"\n"), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "c.txt"), []byte("clean\n"), 0o644)
	err := Scan(dir, canary)
	var le *LeakError
	if !errors.As(err, &le) || len(le.Leaks) != 2 {
		t.Fatalf("want 2 leaks, got %v", err)
	}
	if strings.Contains(err.Error(), canary) {
		t.Fatal("the leak report repeats the secret it found")
	}
	changed, err := ScrubTree(dir, NewRedactor(canary))
	if err != nil || len(changed) != 2 {
		t.Fatalf("scrub changed %v, %v", changed, err)
	}
	if err := Scan(dir, canary); err != nil {
		t.Fatal(err)
	}
	if err := Scan(dir, "short"); err == nil {
		t.Fatal("a needle too short to be scrubbed must be refused")
	}
}

// Secret values that are names the API shows anyway are not scrubbed: a bootstrap config's
// hostname, a values Secret's cluster name. Blanking them would blank the evidence itself.
func TestRedactorKeepsNamesTheAPIShows(t *testing.T) {
	machine := "kubernetes-pools-6j20a-kairos-ln64q-nplmz"
	userdata := "#cloud-config\nhostname: " + machine + "\nkubeadm:\n  token: abcdef.0123456789abcdef\n  caKey: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n"
	r := NewRedactor()
	r.Learn(userdata, "kubernetes-pools-6j20a", canary)
	r.Public("kubernetes-pools-6j20a")
	out := string(r.Scrub([]byte("Machine " + machine + " of kubernetes-pools-6j20a: " + canary + " 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n")))
	if !strings.Contains(out, "Machine "+machine+" of kubernetes-pools-6j20a") {
		t.Fatalf("names scrubbed: %q", out)
	}
	if strings.Contains(out, canary) || strings.Contains(out, "9f86d081884c7d659a2f") {
		t.Fatalf("secrets left: %q", out)
	}
}

func TestRedactorKeepsPathsAndSecretKeyNames(t *testing.T) {
	r := NewRedactor()
	r.Learn("machine:\n  patches:\n    directory: /etc/kubernetes/patches\n  token: Zm9vYmFyYmF6cXV4MTIzNDU2\n")
	in := "kamaji.clastix.io/kubeconfig-secret-key: super-admin.svc\npatches:\n  directory: /etc/kubernetes/patches\n"
	if out := string(r.Scrub([]byte(in))); out != in {
		t.Fatalf("scrubbed a path or a Secret key name: %q", out)
	}
}
