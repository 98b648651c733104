package kind

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// What `ip link add ... type dummy` answers decides the finding: the link type missing is
// refused in the kernel's words, a probe that could not run holds nothing up and says so.
func TestDummyLinkFindings(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		err    error
		out    string
		ok     bool
		detail string
	}{
		{"created", nil, "", true, "the kernel creates one"},
		{"unknown type (iproute2)", errors.New("exit status 2"), "Error: Unknown device type.\n", false, "cannot create a link of type dummy"},
		{"unsupported (the kernel)", errors.New("exit status 2"), "RTNETLINK answers: Operation not supported\n", false, "Operation not supported"},
		{"no user namespaces", errors.New("exit status 1"), "unshare: unshare failed: Operation not permitted\n", true, "not probed (the probe did not run: unshare: unshare failed: Operation not permitted)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := fakeHost()
			h.DummyLink = func(context.Context) error { return dummyLinkAnswer(tc.err, tc.out) }
			f := checkDummyLink(ctx, h)
			if f.OK != tc.ok || !strings.Contains(f.Detail, tc.detail) {
				t.Errorf("finding %+v, want OK %v with %q", f, tc.ok, tc.detail)
			}
		})
	}
}

// The probe runs on this machine and gets the kernel's answer (either), touching nothing of the
// host: its link lives in a network namespace that goes with the command.
func TestProbeDummyLinkRunsHere(t *testing.T) {
	for _, bin := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s: %v (.ci/run installs util-linux and iproute2)", bin, err)
			}
			t.Skip(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := probeDummyLink(ctx)
	if err != nil && !errors.Is(err, errNoDummyLink) {
		t.Fatalf("the probe did not get the kernel's answer: %v", err)
	}
	t.Logf("this kernel: %v", err)
	if out, _ := exec.Command("ip", "link", "show", "cze-probe0").CombinedOutput(); !strings.Contains(string(out), "does not exist") {
		t.Errorf("the probe's link is on the host: %s", out)
	}
}
