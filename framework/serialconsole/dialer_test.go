package serialconsole

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/client-go/rest"
)

// The dialer asks for the VMI's console subresource at KubeVirt's path with KubeVirt's
// subprotocol and the caller's credentials, hands the console's bytes on, writes nothing to
// the console, and its Close ends the websocket.
func TestSubresourceDialerReadsAndNeverWrites(t *testing.T) {
	var (
		mu      sync.Mutex
		path    string
		auth    string
		proto   string
		written []string
	)
	closed := make(chan struct{})
	up := websocket.Upgrader{Subprotocols: []string{"plain.kubevirt.io"}}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		path, auth = r.URL.Path, r.Header.Get("Authorization")
		mu.Unlock()
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer close(closed)
		defer ws.Close()
		mu.Lock()
		proto = ws.Subprotocol()
		mu.Unlock()
		_ = ws.WriteMessage(websocket.BinaryMessage, []byte("[talos] booting\r\nsecond "))
		_ = ws.WriteMessage(websocket.BinaryMessage, []byte("line\r\n"))
		for {
			_, data, err := ws.ReadMessage()
			if err != nil {
				return
			}
			mu.Lock()
			written = append(written, string(data))
			mu.Unlock()
		}
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, BearerToken: "tok", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	conn, err := SubresourceDialer(cfg)(context.Background(), "tenant-x", "vm-1")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 64)
	tmp := make([]byte, 64)
	for !strings.Contains(string(buf), "line\r\n") {
		n, err := conn.Read(tmp)
		if err != nil {
			t.Fatalf("read %q, then %v", buf, err)
		}
		buf = append(buf, tmp[:n]...)
	}
	if got := string(buf); got != "[talos] booting\r\nsecond line\r\n" {
		t.Fatalf("read %q", got)
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the websocket")
	}
	if _, err := conn.Read(tmp); err == nil || err == io.ErrShortBuffer {
		t.Fatalf("a closed connection reads on: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if path != "/apis/subresources.kubevirt.io/v1/namespaces/tenant-x/virtualmachineinstances/vm-1/console" {
		t.Errorf("dialled %s", path)
	}
	if auth != "Bearer tok" {
		t.Errorf("Authorization %q", auth)
	}
	if proto != "plain.kubevirt.io" {
		t.Errorf("subprotocol %q", proto)
	}
	if len(written) != 0 {
		t.Errorf("the dialer wrote to the console: %q", written)
	}
}
