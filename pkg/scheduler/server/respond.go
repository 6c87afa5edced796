package server

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// ErrorBody is the JSON of every error answer.
type ErrorBody struct {
	Error string `json:"error"`
}

// WriteError answers status with err in an ErrorBody.
func WriteError(w http.ResponseWriter, status int, err error) {
	WriteJSON(w, status, ErrorBody{Error: err.Error()})
}

// WriteJSON answers v as JSON with its Content-Length. Without it a large answer goes out
// chunked, and kube-scheduler, which decodes the JSON value and closes the body without reading
// the closing chunk, then closes the connection instead of reusing it: a new TLS handshake for
// nearly every call.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	WriteBody(w, status, body, err)
}

// WriteBody answers status with an encoded JSON body, or 500 if encoding it failed (err).
func WriteBody(w http.ResponseWriter, status int, body []byte, err error) {
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"error":"encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
