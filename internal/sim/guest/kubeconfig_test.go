package guest_test

import clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

type clientcmdapiConfig = clientcmdapi.Config

func newKubeconfig(host string, ca, cert, key []byte) *clientcmdapi.Config {
	c := clientcmdapi.NewConfig()
	c.Clusters["t"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: ca}
	c.AuthInfos["t"] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	c.Contexts["t"] = &clientcmdapi.Context{Cluster: "t", AuthInfo: "t"}
	c.CurrentContext = "t"
	return c
}
