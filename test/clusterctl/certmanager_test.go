package clusterctl

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"nodepool.dev/nodepool/internal/payloadserver/testpki"
)

// certManagerCRDs are cert-manager's Issuer and Certificate kinds, which
// clusterctl init checks for (it creates and deletes a test Issuer and
// Certificate) and nodepool's components use. No cert-manager controller
// runs: issueCertificates stands in for it.
func certManagerCRDs() []*apiextensionsv1.CustomResourceDefinition {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, kind := range []string{"Issuer", "Certificate"} {
		plural := strings.ToLower(kind) + "s"
		out = append(out, &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: plural + ".cert-manager.io"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "cert-manager.io",
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind)},
				Scope: apiextensionsv1.NamespaceScoped,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", XPreserveUnknownFields: ptr.To(true),
					}},
				}},
			},
		})
	}
	return out
}

// issueCertificates does what cert-manager does for the serving
// Certificates (those not isCA) of namespace ns: a Secret spec.secretName
// with tls.crt and tls.key for spec.dnsNames and ca.crt, signed by a CA of
// the test (cert-manager signs with the CA Certificate's key; the CA itself
// is not mounted by anything). It returns how many it issued.
func issueCertificates(ctx context.Context, c client.Client, ns string) (int, error) {
	ca, err := testpki.NewCA("nodepool clusterctl test CA")
	if err != nil {
		return 0, err
	}
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion("cert-manager.io/v1")
	list.SetKind("CertificateList")
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	n := 0
	for _, cert := range list.Items {
		if isCA, _, _ := unstructured.NestedBool(cert.Object, "spec", "isCA"); isCA {
			continue
		}
		secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
		names, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
		if secret == "" || len(names) == 0 {
			return 0, fmt.Errorf("certificate %s has no secretName or dnsNames", cert.GetName())
		}
		certPEM, keyPEM, err := ca.Issue(names...)
		if err != nil {
			return 0, err
		}
		if err := c.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret, Annotations: map[string]string{"cert-manager.io/certificate-name": cert.GetName()}},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM, "ca.crt": ca.PEM},
		}); err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}
