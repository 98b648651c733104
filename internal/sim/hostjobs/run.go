package hostjobs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
)

// The kubelet's container restart back-off: 10 s doubling to 5 min (k8s.io/kubernetes v1.35.4
// pkg/kubelet/kubelet.go, initialBackOff and MaxContainerBackOff).
const (
	initialBackOff = 10 * time.Second
	maxBackOff     = 5 * time.Minute
)

// run runs pod's containers until they succeed, fail for good, or ctx ends.
func (r *runner) run(ctx context.Context, pod *corev1.Pod, dir string) {
	for restarts := int32(0); ; restarts++ {
		start := time.Now()
		name, code, err := r.runOnce(ctx, pod, dir, restarts)
		if ctx.Err() != nil {
			return
		}
		end := time.Now()
		if err != nil {
			// The pod could not be started as specified (a missing Secret key, say): the
			// kubelet reports CreateContainerConfigError and retries; so does this.
			r.logf("Job pod %s/%s: %v", pod.Namespace, pod.Name, err)
			code = -1
		}
		r.logf("Job pod %s/%s: container %s exited %d after %s (run %d)", pod.Namespace, pod.Name, name, code, end.Sub(start).Round(time.Millisecond), restarts+1)
		switch {
		case code == 0:
			r.finish(ctx, pod, corev1.PodSucceeded, restarts, start, end, 0)
			return
		case pod.Spec.RestartPolicy != corev1.RestartPolicyOnFailure:
			r.finish(ctx, pod, corev1.PodFailed, restarts, start, end, code)
			return
		}
		wait := min(initialBackOff<<min(restarts, 8), maxBackOff)
		r.restarting(ctx, pod, restarts+1, start, end, code, wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// runOnce runs the pod's init containers and containers in order; it returns the last one run
// and its exit code (the first non-zero one).
func (r *runner) runOnce(ctx context.Context, pod *corev1.Pod, dir string, restarts int32) (string, int, error) {
	mounts, err := r.materialise(ctx, pod, dir)
	if err != nil {
		return "", 0, err
	}
	var last string
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		last = c.Name
		code, err := r.runContainer(ctx, pod, &c, dir, mounts, restarts)
		if err != nil || code != 0 {
			return last, code, err
		}
	}
	return last, 0, nil
}

// runContainer runs one container's command with its environment and its volumes' paths
// rewritten; its output goes to the container's log.
func (r *runner) runContainer(ctx context.Context, pod *corev1.Pod, c *corev1.Container, dir string, mounts map[string]string, restarts int32) (int, error) {
	env, err := r.environment(ctx, pod, c)
	if err != nil {
		return 0, err
	}
	rewrite := rewriter(c, mounts)
	argv := append(append([]string{}, c.Command...), c.Args...)
	if len(argv) == 0 {
		return 0, fmt.Errorf("container %s has no command: the image's entrypoint is not known on the host", c.Name)
	}
	for i := range argv {
		argv[i] = rewrite(expand(argv[i], env))
	}
	bin, home, err := r.hostDirs(dir, argv)
	if err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = home
	if c.WorkingDir != "" {
		cmd.Dir = rewrite(c.WorkingDir)
	}
	cmd.Env = containerEnv(env, rewrite, mounts, bin, home)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	logPath, err := r.o.Logs.ContainerLog(pod.Namespace, pod.Name, c.Name)
	if err != nil {
		return 0, err
	}
	if restarts > 0 {
		// The kubelet keeps the last instance's log for `kubectl logs --previous`.
		_ = simenv.RestartContainerLog(logPath)
	}
	err = runLogged(cmd, logPath)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee):
		if code := ee.ExitCode(); code >= 0 {
			return code, nil
		}
		return 137, nil // killed
	default:
		return 0, fmt.Errorf("container %s: %w", c.Name, err)
	}
}

// hostDirs makes the container's bin (kubectl, and the host's bash as sh) and home folders
// under dir, and points argv at that sh when it runs /bin/sh.
func (r *runner) hostDirs(dir string, argv []string) (bin, home string, err error) {
	bin = filepath.Join(dir, "bin")
	home = filepath.Join(dir, "home")
	for _, d := range []string{bin, home} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", "", err
		}
	}
	if err := os.Symlink(r.o.Kubectl, filepath.Join(bin, "kubectl")); err != nil && !errors.Is(err, os.ErrExist) {
		return "", "", err
	}
	// The chart's image (alpine/k8s) has busybox ash as /bin/sh, which takes `set -o pipefail`;
	// the host's sh may not (dash), so its bash, run as sh (POSIX mode, pipefail kept), is.
	if bash, err := exec.LookPath("bash"); err == nil {
		if err := os.Symlink(bash, filepath.Join(bin, "sh")); err != nil && !errors.Is(err, os.ErrExist) {
			return "", "", err
		}
		if argv[0] == "/bin/sh" {
			argv[0] = filepath.Join(bin, "sh")
		}
	}
	return bin, home, nil
}

// containerEnv is the container's environment as KEY=value, sorted: its variables with the
// paths rewritten, the service account's kubeconfig unless it sets KUBECONFIG, bin first on
// the host's PATH, and home as HOME.
func containerEnv(env []corev1.EnvVar, rewrite func(string) string, mounts map[string]string, bin, home string) []string {
	vars := map[string]string{}
	for _, e := range env {
		vars[e.Name] = rewrite(e.Value)
	}
	if _, own := vars["KUBECONFIG"]; !own {
		if kc, ok := mounts[serviceAccountKubeconfig]; ok {
			vars["KUBECONFIG"] = kc
		}
	}
	vars["PATH"] = bin + string(os.PathListSeparator) + os.Getenv("PATH")
	vars["HOME"] = home
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		out = append(out, k+"="+vars[k])
	}
	return out
}

// runLogged runs cmd with its output written line by line, timestamped, into the container log
// at logPath, and returns when both the command and the copying ended.
func runLogged(cmd *exec.Cmd, logPath string) error {
	out, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	var copied sync.WaitGroup
	copied.Add(1)
	go func() {
		defer copied.Done()
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			_ = simenv.WriteContainerLog(logPath, time.Now(), sc.Text())
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	err := cmd.Run()
	_ = w.Close()
	copied.Wait()
	return err
}

// rewriter replaces each of the container's volume mount paths by the folder the volume is
// materialised in, longest first.
func rewriter(c *corev1.Container, mounts map[string]string) func(string) string {
	var pairs []string
	vms := append([]corev1.VolumeMount{}, c.VolumeMounts...)
	sort.Slice(vms, func(i, j int) bool { return len(vms[i].MountPath) > len(vms[j].MountPath) })
	for _, m := range vms {
		local, ok := mounts[m.Name]
		if !ok {
			continue
		}
		if m.SubPath != "" {
			local = filepath.Join(local, m.SubPath)
		}
		pairs = append(pairs, m.MountPath, local)
	}
	rep := strings.NewReplacer(pairs...)
	return rep.Replace
}

// expand resolves $(VAR) references to the container's earlier variables, as the kubelet does in
// commands, arguments and values; $$ escapes.
func expand(s string, env []corev1.EnvVar) string {
	if !strings.Contains(s, "$(") {
		return s
	}
	vals := map[string]string{}
	for _, e := range env {
		vals[e.Name] = e.Value
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '$' && i+1 < len(s) && s[i+1] == '$' {
			b.WriteByte('$')
			i++
			continue
		}
		if s[i] == '$' && i+1 < len(s) && s[i+1] == '(' {
			if end := strings.IndexByte(s[i:], ')'); end > 0 {
				name := s[i+2 : i+end]
				if v, ok := vals[name]; ok {
					b.WriteString(v)
					i += end
					continue
				}
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// finish reports the pod ended: phase and each container terminated with the exit code.
func (r *runner) finish(ctx context.Context, pod *corev1.Pod, phase corev1.PodPhase, restarts int32, start, end time.Time, code int) {
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	r.patchStatus(ctx, pod, func(st *corev1.PodStatus) {
		st.Phase = phase
		for i := range st.Conditions {
			if st.Conditions[i].Type == corev1.PodReady || st.Conditions[i].Type == corev1.ContainersReady {
				st.Conditions[i].Status, st.Conditions[i].Reason = corev1.ConditionFalse, "PodCompleted"
				st.Conditions[i].LastTransitionTime = metav1.NewTime(end)
			}
		}
		st.ContainerStatuses = containerStatuses(pod, restarts, func(corev1.Container) corev1.ContainerState {
			return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(code), Reason: reason,
				StartedAt: metav1.NewTime(start), FinishedAt: metav1.NewTime(end)}}
		}, nil)
	})
}

// restarting reports a container that failed and is restarted in place after wait.
func (r *runner) restarting(ctx context.Context, pod *corev1.Pod, restarts int32, start, end time.Time, code int, wait time.Duration) {
	last := &corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(code), Reason: "Error",
		StartedAt: metav1.NewTime(start), FinishedAt: metav1.NewTime(end)}}
	r.patchStatus(ctx, pod, func(st *corev1.PodStatus) {
		st.ContainerStatuses = containerStatuses(pod, restarts, func(c corev1.Container) corev1.ContainerState {
			return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
				Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", wait, c.Name, pod.Name, pod.Namespace, pod.UID)}}
		}, last)
	})
}

func containerStatuses(pod *corev1.Pod, restarts int32, state func(corev1.Container) corev1.ContainerState, last *corev1.ContainerState) []corev1.ContainerStatus {
	out := make([]corev1.ContainerStatus, 0, len(pod.Spec.Containers))
	for _, c := range pod.Spec.Containers {
		s := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image, RestartCount: restarts, State: state(c), Started: new(bool)}
		if last != nil {
			s.LastTerminationState = *last
		}
		out = append(out, s)
	}
	return out
}

// patchStatus changes the live pod's status with change.
func (r *runner) patchStatus(ctx context.Context, pod *corev1.Pod, change func(*corev1.PodStatus)) {
	live := &corev1.Pod{}
	if err := r.c.Get(ctx, client.ObjectKeyFromObject(pod), live); err != nil {
		return
	}
	patch := client.MergeFrom(live.DeepCopy())
	change(&live.Status)
	if err := r.c.Status().Patch(ctx, live, patch); err != nil {
		r.logf("Job pod %s/%s: status: %v", pod.Namespace, pod.Name, err)
	}
}
