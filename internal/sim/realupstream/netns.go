package realupstream

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// inNetns runs f on a thread of its own inside pid's network namespace, then returns the thread
// to this process's namespace. What f opens there (a listener, a connection, an address) stays
// in that namespace and serves from any thread after. Joining needs CAP_SYS_ADMIN (root).
func inNetns(pid int, f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer own.Close()
		target, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("joining the network namespace of process %d (this needs root): %w", pid, err)
			return
		}
		err = f()
		if rerr := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); rerr != nil {
			// The thread stays locked and ends with this goroutine, never serving another.
			done <- errors.Join(err, fmt.Errorf("returning to the harness's network namespace: %w", rerr))
			return
		}
		runtime.UnlockOSThread()
		done <- err
	}()
	return <-done
}

// splice copies a to b and b to a, byte for byte, each direction's end passed on as a half
// close, until both directions ended.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}
	go cp(b, a)
	go cp(a, b)
	wg.Wait()
}
