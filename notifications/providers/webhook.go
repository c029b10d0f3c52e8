package providers

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
)

// componentHeader names the controller that reported the event, on every
// generic request, as Flux sends it.
const componentHeader = "gotk-component"

// signatureHeader carries generic-hmac's signature of the body:
// "sha256=" and the hex HMAC-SHA256 under the Secret's token.
const signatureHeader = "X-Signature"

// genericRequest posts the event itself, as JSON, with the Secret's
// headers; signed, it carries the body's HMAC.
func genericRequest(ctx context.Context, t Target, e eventv1.Event, signed bool) (*http.Request, error) {
	body, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	req, err := jsonRequest(ctx, http.MethodPost, t.Address, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set(componentHeader, e.ReportingController)
	for k, v := range t.Headers {
		req.Header.Set(k, v)
	}
	if signed {
		if t.Token == "" {
			return nil, errors.New("a generic-hmac provider needs the key in its Secret's token")
		}
		req.Header.Set(signatureHeader, Sign([]byte(t.Token), body))
	}
	return req, nil
}

// Sign is generic-hmac's signature of body under key, as the header
// carries it; a receiver computes the same to check a request.
func Sign(key, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// jsonRequest is a request carrying body as JSON.
func jsonRequest(ctx context.Context, method, url string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return req, nil
}

// marshalRequest is a request carrying v, marshalled to JSON.
func marshalRequest(ctx context.Context, method, url string, v any) (*http.Request, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonRequest(ctx, method, url, body)
}
