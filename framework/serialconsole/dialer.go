package serialconsole

import (
	"context"
	"io"
	"net/url"

	"k8s.io/client-go/rest"
	kvcorev1 "kubevirt.io/client-go/kubevirt/typed/core/v1"
)

// SubresourceDialer opens VMI consoles through KubeVirt's console subresource
// (GET /apis/subresources.kubevirt.io/v1/namespaces/<ns>/virtualmachineinstances/<vmi>/console,
// a websocket of subprotocol plain.kubevirt.io: kubevirt.io/client-go v1.9.0
// kubevirt/typed/core/v1/async.go AsyncSubresourceHelper and RequestFromConfig). Nothing is
// ever written to the console: the harness only reads.
func SubresourceDialer(cfg *rest.Config) Dialer {
	return func(_ context.Context, namespace, vmi string) (Conn, error) {
		s, err := kvcorev1.AsyncSubresourceHelper(cfg, "virtualmachineinstances", namespace, vmi, "console", url.Values{})
		if err != nil {
			return nil, err
		}
		out, outW := io.Pipe()
		in, inW := io.Pipe() // never written: closing it ends the stream
		go func() {
			err := s.Stream(kvcorev1.StreamOptions{In: in, Out: outW})
			if err == nil {
				err = io.EOF
			}
			_ = outW.CloseWithError(err)
		}()
		return &subresourceConn{out: out, in: inW}, nil
	}
}

type subresourceConn struct {
	out *io.PipeReader
	in  *io.PipeWriter
}

func (c *subresourceConn) Read(p []byte) (int, error) { return c.out.Read(p) }

// Close ends the websocket: the empty input ends (client-go then closes the connection) and
// any console bytes still in flight are dropped.
func (c *subresourceConn) Close() error {
	_ = c.in.Close()
	return c.out.Close()
}
