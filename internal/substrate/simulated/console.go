package simulated

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/gorilla/websocket"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
)

// consolePath is KubeVirt's console subresource of a VMI, as virt-api serves it through the
// aggregator (kubevirt/kubevirt d923fdb815 pkg/virt-api/rest/console.go:35-49).
var consolePath = regexp.MustCompile(`^/apis/subresources\.kubevirt\.io/v1/namespaces/([^/]+)/virtualmachineinstances/([^/]+)/console$`)

var vmiResource = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}

// consoleServer is the stand-in of virt-api's and virt-handler's console path: it authorizes
// the caller for virtualmachineinstances/console in subresources.kubevirt.io, refuses a VMI
// that does not run as virt-api does (validateVMIForConsole, console.go:51-64), and connects
// the caller's websocket (subprotocol plain.kubevirt.io) to the guest's serial port, where a
// new connection closes the one before.
type consoleServer struct {
	admin *rest.Config
	dyn   dynamic.Interface
	ports *simenv.SerialPorts
	up    websocket.Upgrader
}

func newConsoleServer(admin *rest.Config, ports *simenv.SerialPorts) (*consoleServer, error) {
	dyn, err := dynamic.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	return &consoleServer{admin: admin, dyn: dyn, ports: ports, up: websocket.Upgrader{
		Subprotocols: []string{"plain.kubevirt.io"}, CheckOrigin: func(*http.Request) bool { return true }}}, nil
}

// onRealNode reports whether the VMI runs on a real Node (simenv.Env.RealNode), where the real
// virt-api and virt-handler serve its console.
func (s *consoleServer) onRealNode(ctx context.Context, env *simenv.Env, namespace, name string) bool {
	if len(env.RealNodeVolumes) == 0 {
		return false
	}
	vmi, err := s.dyn.Resource(vmiResource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	nodeName, _, _ := unstructured.NestedString(vmi.Object, "status", "nodeName")
	return env.RealNode(nodeName)
}

func (s *consoleServer) serve(w http.ResponseWriter, r *http.Request, namespace, name string) {
	if err := s.authorize(r, namespace, name); err != nil {
		writeAPIError(w, err)
		return
	}
	vmi, err := s.dyn.Resource(vmiResource).Namespace(namespace).Get(r.Context(), name, metav1.GetOptions{})
	if err != nil {
		writeAPIError(w, err)
		return
	}
	if err := consoleRefusal(vmi); err != nil {
		writeAPIError(w, err)
		return
	}
	ws, err := s.up.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered
	}
	uid := string(vmi.GetUID())
	conn := s.ports.Connect(namespace, name, uid)
	defer s.ports.Disconnect(namespace, name, uid, conn)
	// The caller's input is read and dropped (the guest reads no console input here); its
	// end ends the connection.
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	data := make(chan []byte)
	go func() {
		defer close(data)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			select {
			case data <- append([]byte(nil), buf[:n]...):
			case <-gone:
				return
			}
		}
	}()
	for {
		select {
		case b, ok := <-data:
			if !ok {
				// Another connection took the port, or the VMI stopped: the socket closes
				// under the caller, with no close message.
				_ = ws.UnderlyingConn().Close()
				return
			}
			if err := ws.WriteMessage(websocket.BinaryMessage, b); err != nil {
				return
			}
		case <-gone:
			_ = ws.Close()
			return
		}
	}
}

// consoleRefusal is virt-api's validateVMIForConsole: no serial console attached, a Failed
// VMI, or one that does not run.
func consoleRefusal(vmi *unstructured.Unstructured) error {
	gr := schema.GroupResource{Group: "kubevirt.io", Resource: "virtualmachineinstance"}
	if attach, found, _ := unstructured.NestedBool(vmi.Object, "spec", "domain", "devices", "autoattachSerialConsole"); found && !attach {
		return apierrors.NewBadRequest("No serial consoles are present.")
	}
	phase, _, _ := unstructured.NestedString(vmi.Object, "status", "phase")
	switch {
	case phase == "Failed":
		return apierrors.NewConflict(gr, vmi.GetName(), fmt.Errorf("VMI is in failed status"))
	case phase != "Running" || vmi.GetDeletionTimestamp() != nil:
		return apierrors.NewBadRequest("VMI is not running")
	}
	return nil
}

// authorize asks the management apiserver whether the caller may get
// virtualmachineinstances/console of the VMI (KubeVirt's RBAC for the console,
// pkg/virt-operator/resource/generate/rbac/cluster.go:83), as the aggregator does.
func (s *consoleServer) authorize(r *http.Request, namespace, name string) error {
	cfg := rest.AnonymousClientConfig(s.admin)
	if auth := r.Header.Get("Authorization"); strings.HasPrefix(auth, "Bearer ") {
		cfg.BearerToken = strings.TrimPrefix(auth, "Bearer ")
	}
	caller, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	review, err := caller.AuthorizationV1().SelfSubjectAccessReviews().Create(r.Context(), &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: "get", Group: "subresources.kubevirt.io", Resource: "virtualmachineinstances",
			Subresource: "console", Name: name,
		}}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	if !review.Status.Allowed {
		return apierrors.NewForbidden(schema.GroupResource{Group: "subresources.kubevirt.io", Resource: "virtualmachineinstances/console"}, name,
			fmt.Errorf("%s", orText(review.Status.Reason, "no RBAC rule allows it")))
	}
	return nil
}

func writeAPIError(w http.ResponseWriter, err error) {
	if st, ok := err.(apierrors.APIStatus); ok {
		s := st.Status()
		writeStatus(w, int(s.Code), s.Message)
		return
	}
	writeStatus(w, http.StatusInternalServerError, err.Error())
}

func orText(s, otherwise string) string {
	if s != "" {
		return s
	}
	return otherwise
}
