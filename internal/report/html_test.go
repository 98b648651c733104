package report

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/internal/testkit"
)

const kairosConsole = "[    1.000000] Linux version 6.12.0 (kairos)\n[    2.000000] kairos-agent: registry answered 401 <Unauthorized> & gave up\n"

// redRun is a failed run's folder with a console for the failed pool, its reports written.
func redRun(t *testing.T) string {
	t.Helper()
	dir, o := fakeRun(t, true)
	rel := filepath.Join("pools", "kairos", "consoles", "kubernetes-pools-abc12-kairos-x-aaaaa", "virt-launcher-kubernetes-pools-abc12-kairos-x-aaaaa-zz9-0.log")
	if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, rel), []byte("# serial console of VMI kubernetes-pools-abc12-kairos-x-aaaaa\n"+kairosConsole), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(o); err != nil {
		t.Fatal(err)
	}
	return dir
}

// report.html is one file that asks nothing of the network: no script, style, image or font
// from anywhere; every link is relative to the artifacts folder.
func TestReportHTMLIsSelfContained(t *testing.T) {
	page := read(t, redRun(t), HTMLFile)
	for _, m := range regexp.MustCompile(`(?i)(src|href)\s*=\s*"([^"]*)"`).FindAllStringSubmatch(page, -1) {
		if strings.Contains(m[2], "://") || strings.HasPrefix(m[2], "//") || strings.HasPrefix(m[2], "/") {
			t.Errorf("%s=%q reaches outside the artifacts folder", m[1], m[2])
		}
	}
	if n := strings.Count(page, "://"); n != strings.Count(page, "http://www.w3.org/2000/svg") {
		t.Errorf("an address other than the SVG namespace is in the page")
	}
	for _, want := range []string{
		`<g class="pool" data-pool="kairos" id="timeline-pool-kairos">`, `<g class="pool" data-pool="md0" id="timeline-pool-md0">`,
		`<a href="pools/kairos/datavolumes.txt">pools/kairos/datavolumes.txt</a>`,
		"registry answered 401 &lt;Unauthorized&gt; &amp; gave up", // the failed VMI's console, inline and escaped
		"serial console of VMI kubernetes-pools-abc12-kairos-x-aaaaa",
		`<a href="pools/kairos/cluster-tree.txt">`,
		`<td>platform virt-controller</td><td class="failed">restarted</td><td>signal 9, exit 137: &lt;killed&gt;</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
}

// report.html renders in a real browser engine (headless Chromium) and its timeline draws a row
// for every pool: the page's own script lists the pool rows the browser laid out with a size.
func TestReportHTMLRendersInABrowser(t *testing.T) {
	browser := findBrowser(t)
	dir := redRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir="+t.TempDir(), "--dump-dom", "file://"+filepath.Join(dir, HTMLFile))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s --dump-dom: %v\n%s", browser, err, stderr.String())
	}
	m := regexp.MustCompile(`<body[^>]*data-drawn-pools="([^"]*)"`).FindSubmatch(dom)
	if m == nil {
		t.Fatalf("the page's script did not run, or found no pool row (no data-drawn-pools on <body>):\n%.2000s", dom)
	}
	if got := string(m[1]); got != "kairos,md0" {
		t.Fatalf("the browser drew the timeline rows of pools %q, want kairos,md0", got)
	}
	if !strings.Contains(string(dom), "registry answered 401") {
		t.Error("the rendered page lacks the failed VMI's console")
	}
}

// findBrowser is a headless-capable Chromium: a failure under CI, elsewhere a skip saying how to
// install it.
func findBrowser(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("E2E_CHROMIUM"), "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const how = "no Chromium to render report.html in: apt-get install chromium (Debian), or set E2E_CHROMIUM to a Chromium or Chrome binary"
	testkit.Unavailable(t, how)
	return ""
}
