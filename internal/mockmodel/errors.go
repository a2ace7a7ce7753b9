package mockmodel

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Error is an API error in the shape the provider sends it.
//
// OpenAI:    {"error":{"message":…,"type":…,"param":…,"code":…}}
// Anthropic: {"type":"error","error":{"type":…,"message":…},"request_id":…}
type Error struct {
	Status  int
	API     API
	Type    string // OpenAI error.type / Anthropic error.type
	Code    string // OpenAI error.code (empty: null)
	Param   string // OpenAI error.param (empty: null)
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Type, e.Message)
}

// Body is the JSON body of the error; requestID is used by the Anthropic shape.
func (e *Error) Body(requestID string) []byte {
	var v any
	if e.API == Anthropic {
		m := map[string]any{
			"type":  "error",
			"error": map[string]any{"type": e.Type, "message": e.Message},
		}
		if requestID != "" {
			m["request_id"] = requestID
		}
		v = m
	} else {
		v = map[string]any{"error": map[string]any{
			"message": e.Message,
			"type":    e.Type,
			"param":   nullable(e.Param),
			"code":    nullable(e.Code),
		}}
	}
	b, _ := json.Marshal(v)
	return b
}

// Write sends the error. Headers already set on w are kept.
func (e *Error) Write(w http.ResponseWriter, requestID string) {
	w.Header().Set("Content-Type", "application/json")
	if requestID != "" {
		if e.API == Anthropic {
			w.Header().Set("request-id", requestID)
		} else {
			w.Header().Set("x-request-id", requestID)
		}
	}
	w.WriteHeader(e.Status)
	_, _ = w.Write(append(e.Body(requestID), '\n'))
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func invalid(api API, param, code, msg string) *Error {
	t := "invalid_request_error"
	return &Error{Status: http.StatusBadRequest, API: api, Type: t, Code: code, Param: param, Message: msg}
}

// NotFound is the provider's answer to an unknown route.
func NotFound(api API, method, path string) *Error {
	if api == Anthropic {
		return &Error{Status: http.StatusNotFound, API: api, Type: "not_found_error", Message: "Not Found"}
	}
	return &Error{Status: http.StatusNotFound, API: api, Type: "invalid_request_error",
		Message: fmt.Sprintf("Invalid URL (%s %s)", method, path)}
}

// AuthError is the provider's 401 for a missing or wrong API key.
func AuthError(api API, sent string) *Error {
	if api == Anthropic {
		if sent == "" {
			return &Error{Status: http.StatusUnauthorized, API: api, Type: "authentication_error", Message: "x-api-key header is required (or an Authorization: Bearer header)"}
		}
		return &Error{Status: http.StatusUnauthorized, API: api, Type: "authentication_error", Message: "invalid x-api-key"}
	}
	if sent == "" {
		return &Error{Status: http.StatusUnauthorized, API: api, Type: "invalid_request_error",
			Message: "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."}
	}
	return &Error{Status: http.StatusUnauthorized, API: api, Type: "invalid_request_error", Code: "invalid_api_key",
		Message: fmt.Sprintf("Incorrect API key provided: %s. You can find your API key at https://platform.openai.com/account/api-keys.", redact(sent))}
}

// redact shows a key the way OpenAI does: its start and its last four characters.
func redact(k string) string {
	if len(k) <= 8 {
		return "****"
	}
	return k[:3] + "*****" + k[len(k)-4:]
}
