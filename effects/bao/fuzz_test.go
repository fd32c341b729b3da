package bao

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// FuzzAnswers serves arbitrary bytes as OpenBao's answer to each call the agent makes.
// Property: the client never panics, and a KV read that succeeds returns a value it found.
func FuzzAnswers(f *testing.F) {
	f.Add(uint16(200), []byte(`{"auth":{"client_token":"s.abc","lease_duration":3600,"renewable":true,"metadata":{"env_id":"env-qa-02"}}}`))
	f.Add(uint16(200), []byte(`{"data":{"ttl":10,"expire_time":"2026-11-30T14:00:00Z","meta":{"env_id":"x","grant_jti":"j"}}}`))
	f.Add(uint16(200), []byte(`{"data":{"data":{"value":"v"},"metadata":{"version":3,"deletion_time":""}}}`))
	f.Add(uint16(200), []byte(`{"data":{"data":null,"metadata":{"deletion_time":"2026-01-01T00:00:00Z"}}}`))
	f.Add(uint16(403), []byte(`{"errors":["permission denied"]}`))
	f.Add(uint16(200), []byte(`{"data":{"ttl":"nan","expire_time":7}}`))
	f.Add(uint16(200), []byte(`null`))
	var mu sync.Mutex
	var status int
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.WriteHeader(status)
		w.Write(body)
	}))
	defer srv.Close()
	c, err := New(srv.URL, srv.Client(), 2*time.Second)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, st uint16, raw []byte) {
		mu.Lock()
		status = 200 + int(st)%400
		body = raw
		mu.Unlock()
		ctx := context.Background()
		_, _ = c.Login(ctx, "jwt-tenancy", "see-env", "grant")
		_, _ = c.LookupSelf(ctx, "s.tok")
		_, _ = c.RenewSelf(ctx, "s.tok", time.Hour)
		_ = c.RevokeSelf(ctx, "s.tok")
		if _, err := c.ReadKV(ctx, "s.tok", "monky/data/env-qa-02/see/x", "value", 2); err == nil && status >= 300 {
			t.Fatalf("a KV read answered %d succeeded", status)
		}
	})
}
