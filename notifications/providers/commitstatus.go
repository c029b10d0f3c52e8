package providers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/fluxcd/pkg/apis/meta"
)

// commitStatusRequest sets a status on the commit the event's revision
// names, in the repository spec.address names (https://host/owner/repo):
// success for an info event, failure for an error, pending (Gitea only,
// as in Flux) while progressing. Its context is kind/name/ and the
// Provider's UID's first part, so each cluster keeps its own.
func commitStatusRequest(ctx context.Context, t Target, e eventv1.Event) (*http.Request, error) {
	if t.Token == "" {
		return nil, fmt.Errorf("a %s provider needs an API token in its Secret's token", t.Type)
	}
	progressing := e.Reason == meta.ProgressingReason
	if progressing && t.Type == "github" {
		return nil, ErrNothingToSend
	}
	revision, ok := e.GetRevision()
	if !ok {
		return nil, errors.New("the event has no revision to set a commit status on")
	}
	sha := commitOf(revision)
	if !commitHash.MatchString(sha) {
		// The revision comes with the event, which anything reaching the
		// events endpoint can post: it must not steer the request's path.
		return nil, fmt.Errorf("the event's revision %q names no commit hash", revision)
	}
	host, owner, repo, err := repository(t.Address)
	if err != nil {
		return nil, err
	}
	state := "success"
	switch {
	case progressing:
		state = "pending"
	case e.Severity == eventv1.EventSeverityError:
		state = "failure"
	}
	status := map[string]string{"state": state, "description": words(e.Reason), "context": statusContext(t.ProviderUID, e)}
	if t.Type == "gitea" {
		status["target_url"] = ""
		req, err := marshalRequest(ctx, http.MethodPost, fmt.Sprintf("%s/api/v1/repos/%s/%s/statuses/%s", host, owner, repo, sha), status)
		if err == nil {
			req.Header.Set("Authorization", "token "+t.Token)
		}
		return req, err
	}
	req, err := marshalRequest(ctx, http.MethodPost, fmt.Sprintf("%s/repos/%s/%s/statuses/%s", gitHubAPI(host), owner, repo, sha), status)
	if err == nil {
		req.Header.Set("Authorization", "Bearer "+t.Token)
		req.Header.Set("Accept", "application/vnd.github+json")
	}
	return req, err
}

// commitHash is a git commit's hash, SHA-1 or SHA-256, whole or short.
var commitHash = regexp.MustCompile(`^[0-9a-f]{7,64}$`)

// statusContext names the status: the object's kind and name and the
// first part of the Provider's UID, in lower case.
func statusContext(providerUID string, e eventv1.Event) string {
	uid, _, _ := strings.Cut(providerUID, "-")
	return strings.ToLower(fmt.Sprintf("%s/%s/%s", e.InvolvedObject.Kind, e.InvolvedObject.Name, uid))
}

// commitOf is the commit hash in a Flux revision: "main@sha1:abc" and
// "sha1:abc" give "abc", as does the older "main/abc".
func commitOf(revision string) string {
	if _, digest, ok := strings.Cut(revision, ":"); ok {
		return digest
	}
	if i := strings.LastIndex(revision, "/"); i >= 0 {
		return revision[i+1:]
	}
	return revision
}

// repository splits a repository's address into its server, owner and
// name; ssh:// addresses are taken as the server's https.
func repository(address string) (host, owner, repo string, err error) {
	u, err := url.Parse(address)
	if err != nil || u.Host == "" {
		return "", "", "", fmt.Errorf("spec.address %q is not a repository URL such as https://github.com/owner/repo", address)
	}
	scheme := u.Scheme
	if scheme == "ssh" {
		scheme = "https"
	}
	parts := strings.Split(strings.TrimSuffix(strings.Trim(u.Path, "/"), ".git"), "/")
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return "", "", "", fmt.Errorf("spec.address %q does not name one repository as https://host/owner/repo", address)
	}
	return scheme + "://" + u.Host, parts[0], parts[1], nil
}

// gitHubAPI is the REST API of a GitHub server: api.github.com for
// github.com, /api/v3 on the server for GitHub Enterprise.
func gitHubAPI(host string) string {
	if host == "https://github.com" {
		return "https://api.github.com"
	}
	return host + "/api/v3"
}
