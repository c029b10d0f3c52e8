package providers

import (
	"context"
	"crypto/sha1" //nolint:gosec // Matrix's transaction ID needs uniqueness, not secrecy, and Flux names it so
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
)

// slackMessage is a Slack incoming webhook's (or chat.postMessage's)
// body: one attachment per event, green or red, with the metadata as
// fields.
type slackMessage struct {
	Channel     string            `json:"channel"`
	Username    string            `json:"username"`
	IconURL     string            `json:"icon_url"`
	IconEmoji   string            `json:"icon_emoji"`
	Attachments []slackAttachment `json:"attachments"`
}

type slackAttachment struct {
	Color      string       `json:"color"`
	AuthorName string       `json:"author_name"`
	Text       string       `json:"text"`
	MrkdwnIn   []string     `json:"mrkdwn_in"`
	Fields     []slackField `json:"fields"`
}

type slackField struct {
	Title string `json:"title"`
	Value string `json:"value"`
	Short bool   `json:"short"`
}

// slackRequest posts e to a Slack webhook, or to Discord's
// Slack-compatible one; a token goes as a bearer token (chat.postMessage).
func slackRequest(ctx context.Context, t Target, e eventv1.Event, address, channel string) (*http.Request, error) {
	color := "good"
	if e.Severity == eventv1.EventSeverityError {
		color = "danger"
	}
	fields := []slackField{}
	for _, k := range sortedKeys(e.Metadata) {
		fields = append(fields, slackField{Title: k, Value: e.Metadata[k]})
	}
	msg := slackMessage{
		Channel:  channel,
		Username: orDefault(t.Username, e.ReportingController),
		Attachments: []slackAttachment{{
			Color: color, AuthorName: objectName(e), Text: e.Message, MrkdwnIn: []string{"text"}, Fields: fields,
		}},
	}
	req, err := marshalRequest(ctx, http.MethodPost, address, msg)
	if err != nil {
		return nil, err
	}
	if t.Token != "" {
		req.Header.Set("Authorization", "Bearer "+t.Token)
	}
	return req, nil
}

// discordSlackURL is a Discord webhook's Slack-compatible address: the
// webhook's own with "/slack" added.
func discordSlackURL(address string) string {
	u, err := url.Parse(address)
	if err != nil || strings.HasSuffix(u.Path, "/slack") {
		return address
	}
	u.Path = path.Join(u.Path, "slack")
	return u.String()
}

// teamsRequest posts e to a Microsoft Teams workflow webhook as an
// Adaptive Card, or, to an old Office 365 connector (*.webhook.office.com),
// as a MessageCard.
func teamsRequest(ctx context.Context, t Target, e eventv1.Event) (*http.Request, error) {
	u, err := url.Parse(t.Address)
	if err != nil {
		return nil, fmt.Errorf("the msteams address is not a URL: %w", err)
	}
	if strings.HasSuffix(u.Hostname(), ".webhook.office.com") {
		return marshalRequest(ctx, http.MethodPost, t.Address, messageCard(e))
	}
	return marshalRequest(ctx, http.MethodPost, t.Address, adaptiveCard(e))
}

// messageCard is the Office 365 connector's card.
func messageCard(e eventv1.Event) map[string]any {
	facts := []map[string]string{}
	for _, k := range sortedKeys(e.Metadata) {
		facts = append(facts, map[string]string{"name": k, "value": e.Metadata[k]})
	}
	color := "0076D7"
	if e.Severity == eventv1.EventSeverityError {
		color = "FF0000"
	}
	return map[string]any{
		"@type": "MessageCard", "@context": "http://schema.org/extensions", "themeColor": color, "summary": objectName(e),
		"sections": []map[string]any{{"activityTitle": e.Message, "activitySubtitle": objectName(e), "facts": facts}},
	}
}

// adaptiveCard is a Teams message holding one Adaptive Card (version 1.4,
// the newest Teams shows): the object, the message (red for an error),
// and the metadata as facts, the summary first.
func adaptiveCard(e eventv1.Event) map[string]any {
	facts := []map[string]string{}
	if s, ok := e.Metadata["summary"]; ok {
		facts = append(facts, map[string]string{"title": "summary", "value": s})
	}
	for _, k := range sortedKeys(e.Metadata) {
		if k != "summary" {
			facts = append(facts, map[string]string{"title": k, "value": e.Metadata[k]})
		}
	}
	message := map[string]any{"type": "TextBlock", "text": e.Message, "wrap": true}
	if e.Severity == eventv1.EventSeverityError {
		message["color"] = "attention"
	}
	card := map[string]any{
		"$schema": "http://adaptivecards.io/schemas/adaptive-card.json", "type": "AdaptiveCard", "version": "1.4",
		"msteams": map[string]string{"width": "Full"},
		"body": []map[string]any{{"type": "Container", "items": []map[string]any{
			{"type": "TextBlock", "text": objectName(e), "size": "large", "weight": "bolder", "wrap": true},
			message,
			{"type": "FactSet", "facts": facts},
		}}},
	}
	return map[string]any{"type": "message", "attachments": []map[string]any{
		{"contentType": "application/vnd.microsoft.card.adaptive", "content": card},
	}}
}

// matrixRequest sends e to the room spec.channel names, through the
// Client-Server API, with the event's own digest as the transaction ID so
// that a retry is not posted twice.
func matrixRequest(ctx context.Context, t Target, e eventv1.Event) (*http.Request, error) {
	if t.Channel == "" {
		return nil, fmt.Errorf("a matrix provider needs the room ID in spec.channel")
	}
	raw, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	sum := sha1.Sum(raw) //nolint:gosec // see the import
	address := fmt.Sprintf("%s/_matrix/client/r0/rooms/%s/send/m.room.message/%s",
		strings.TrimSuffix(t.Address, "/"), url.PathEscape(t.Channel), hex.EncodeToString(sum[:]))
	mark := "💫"
	if e.Severity == eventv1.EventSeverityError {
		mark = "🚨"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n%s\n", mark, objectName(e), e.Message)
	for _, k := range sortedKeys(e.Metadata) {
		fmt.Fprintf(&b, "- %s: %s\n", k, e.Metadata[k])
	}
	req, err := marshalRequest(ctx, http.MethodPut, address, map[string]string{"msgtype": "m.text", "body": b.String()})
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+t.Token)
	return req, nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
