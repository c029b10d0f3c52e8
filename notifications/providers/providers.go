// Package providers turns one event into the request a notification
// service expects, as Flux's notification-controller sends it for a
// Provider of that type: generic and generic-hmac webhooks, Slack,
// Discord, Microsoft Teams, Matrix, and commit statuses on GitHub and
// Gitea. It builds and sends requests; which events reach which Provider
// is package alerts' business.
package providers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"unicode"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
)

// Target is a Provider with its Secret read: where and how to send.
type Target struct {
	// Type is the Provider's spec.type.
	Type string
	// Address is spec.address, or the Secret's address.
	Address string
	// Channel is spec.channel: a Slack channel, a Matrix room.
	Channel string
	// Username is spec.username, or the Secret's username.
	Username string
	// Token is the Secret's token: a bearer token, the HMAC key, an API
	// token for commit statuses.
	Token string
	// Headers are the Secret's headers, sent by the generic types.
	Headers map[string]string
	// ProviderUID names the commit status of this Provider, so two
	// clusters reporting on one commit do not overwrite each other.
	ProviderUID string
}

// Types are the provider types strata sends to.
var Types = []string{"generic", "generic-hmac", "slack", "discord", "msteams", "matrix", "github", "gitea"}

// Supported reports whether strata sends to providers of type t.
func Supported(t string) bool { return slices.Contains(Types, t) }

// ErrNothingToSend is returned by Request for an event its target does
// not report, such as a progressing event for a GitHub commit status.
var ErrNothingToSend = errors.New("nothing to send for this event")

// Request builds the request that tells the target of e.
func Request(ctx context.Context, t Target, e eventv1.Event) (*http.Request, error) {
	switch t.Type {
	case "generic":
		return genericRequest(ctx, t, e, false)
	case "generic-hmac":
		return genericRequest(ctx, t, e, true)
	case "slack":
		return slackRequest(ctx, t, e, t.Address, t.Channel)
	case "discord":
		return slackRequest(ctx, t, e, discordSlackURL(t.Address), "")
	case "msteams":
		return teamsRequest(ctx, t, e)
	case "matrix":
		return matrixRequest(ctx, t, e)
	case "github", "gitea":
		return commitStatusRequest(ctx, t, e)
	}
	return nil, fmt.Errorf("provider type %q is not one strata sends to; it sends to %s", t.Type, strings.Join(Types, ", "))
}

// responseLimit bounds what is read of a service's answer: enough to say
// why it refused.
const responseLimit = 4 << 10

// Send does req with c and checks the answer: any status but 2xx is an
// error quoting the start of the service's answer.
func Send(c *http.Client, req *http.Request) error {
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, responseLimit))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s answered %s: %s", req.Method, req.URL.Redacted(), resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// objectName is how the chat providers name the event's object, as Flux
// does: kind/name.namespace, the kind in lower case.
func objectName(e eventv1.Event) string {
	return fmt.Sprintf("%s/%s.%s", strings.ToLower(e.InvolvedObject.Kind), e.InvolvedObject.Name, e.InvolvedObject.Namespace)
}

// sortedKeys are the metadata's keys in order, so that a message lists
// them the same way each time.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// words splits a reason written in CamelCase into lower-case words, as
// Flux's commit statuses describe an event: "ReconciliationSucceeded"
// becomes "reconciliation succeeded".
func words(reason string) string {
	var b strings.Builder
	runes := []rune(reason)
	for i, r := range runes {
		if i > 0 && startsWord(runes, i) {
			b.WriteByte(' ')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// startsWord reports whether runes[i] begins a new word: an upper-case
// letter after a lower-case one, or the last capital of an acronym
// followed by lower case ("HTTPServer": "http server").
func startsWord(runes []rune, i int) bool {
	r, prev := runes[i], runes[i-1]
	if !unicode.IsUpper(r) {
		return false
	}
	if unicode.IsLower(prev) || unicode.IsDigit(prev) {
		return true
	}
	return unicode.IsUpper(prev) && i+1 < len(runes) && unicode.IsLower(runes[i+1])
}
