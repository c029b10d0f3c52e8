package guardwebhook

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Rules are the deletes the API server sends the webhook: only of kinds
// that hold data or can take it with them, so that no other request
// (a prune of ConfigMaps) ever waits for it. The chart renders the same
// (a test compares them).
func Rules() []admissionregistrationv1.RuleWithOperations {
	rule := func(group string, resources ...string) admissionregistrationv1.RuleWithOperations {
		return admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: resources,
				Scope: ptr.To(admissionregistrationv1.AllScopes)},
		}
	}
	return []admissionregistrationv1.RuleWithOperations{
		rule("", "persistentvolumes", "persistentvolumeclaims", "namespaces"),
		rule("snapshot.storage.k8s.io", "volumesnapshots", "volumesnapshotcontents"),
		rule("storage.strata.dev", "*"),
		rule("buildbarn.strata.dev", "buildbarnstorages"),
		rule("apiextensions.k8s.io", "customresourcedefinitions"),
	}
}

// MatchCondition sends only the deletes Flux makes: those of users
// (Flux's kustomize-controller), and those of an object a Kustomization
// applied (Flux's labels) by a service account (the one Flux impersonates
// for it) or by a garbage collector of gcs. A person's kubectl delete
// never waits for the webhook; the handler narrows the service accounts
// to the one each Kustomization applies as.
func MatchCondition(users, gcs []string) admissionregistrationv1.MatchCondition {
	return admissionregistrationv1.MatchCondition{Name: "flux-kustomize-controller",
		Expression: fmt.Sprintf(`request.userInfo.username in [%s] || (oldObject != null && has(oldObject.metadata.labels) && "%s" in oldObject.metadata.labels && `+
			`(request.userInfo.username.startsWith("%s") || request.userInfo.username in [%s]))`,
			quoted(users), fluxNameLabel, serviceAccountPrefix, quoted(gcs))}
}

func quoted(list []string) string {
	out := make([]string, len(list))
	for i, u := range list {
		out[i] = fmt.Sprintf("%q", u)
	}
	return strings.Join(out, ", ")
}

// Configuration is the webhook's configuration, calling client. It fails
// closed: a delete of those kinds by those users is refused while the
// webhook cannot answer, and Flux tries again at its next reconcile.
func Configuration(name string, client admissionregistrationv1.WebhookClientConfig, users, gcs []string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "guard-flux-prunes.strata.dev",
			ClientConfig:            client,
			Rules:                   Rules(),
			MatchConditions:         []admissionregistrationv1.MatchCondition{MatchCondition(users, gcs)},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](10),
		}},
	}
}
