// Package traefik holds the test of the Traefik example (dynamic.yaml).
// Traefik is not packaged for Debian 12, so the test does not run it: it
// decodes the file strictly against the fields of Traefik's dynamic
// configuration that it uses (a misspelt key fails) and asks the real
// agent, started with the flag the example names, at the forwardAuth
// address with the one header forwardAuth is told to send.
package traefik

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"testing"

	"github.com/obol-dev/obol/internal/proxytest"
	"go.yaml.in/yaml/v3"
)

// The part of Traefik's dynamic configuration the example uses, with the
// field names of Traefik's documentation.
type dynamic struct {
	HTTP struct {
		Middlewares map[string]struct {
			ForwardAuth *struct {
				Address                  string   `yaml:"address"`
				TrustForwardHeader       bool     `yaml:"trustForwardHeader"`
				AuthResponseHeaders      []string `yaml:"authResponseHeaders"`
				AuthResponseHeadersRegex string   `yaml:"authResponseHeadersRegex"`
				AuthRequestHeaders       []string `yaml:"authRequestHeaders"`
				AddAuthCookiesToResponse []string `yaml:"addAuthCookiesToResponse"`
			} `yaml:"forwardAuth"`
		} `yaml:"middlewares"`
		Routers map[string]struct {
			EntryPoints []string `yaml:"entryPoints"`
			Rule        string   `yaml:"rule"`
			Priority    int      `yaml:"priority"`
			Middlewares []string `yaml:"middlewares"`
			Service     string   `yaml:"service"`
		} `yaml:"routers"`
		Services map[string]struct {
			LoadBalancer struct {
				Servers []struct {
					URL string `yaml:"url"`
				} `yaml:"servers"`
			} `yaml:"loadBalancer"`
		} `yaml:"services"`
	} `yaml:"http"`
}

func TestTraefikForwardAuthConfig(t *testing.T) {
	b, err := os.ReadFile("dynamic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var d dynamic
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("dynamic.yaml: %v", err)
	}
	for name, r := range d.HTTP.Routers {
		if _, ok := d.HTTP.Services[r.Service]; !ok {
			t.Errorf("router %s: service %q is not defined", name, r.Service)
		}
		for _, m := range r.Middlewares {
			if _, ok := d.HTTP.Middlewares[m]; !ok {
				t.Errorf("router %s: middleware %q is not defined", name, m)
			}
		}
	}
	fa := d.HTTP.Middlewares["obol-api-search"].ForwardAuth
	if fa == nil {
		t.Fatal("no forwardAuth middleware obol-api-search")
	}
	if len(fa.AuthRequestHeaders) != 1 || fa.AuthRequestHeaders[0] != "X-Forwarded-For" || fa.TrustForwardHeader {
		t.Errorf("forwardAuth sends %q (trustForwardHeader %v): want only X-Forwarded-For, set by Traefik itself", fa.AuthRequestHeaders, fa.TrustForwardHeader)
	}

	// The agent as the example runs it, asked at the example's address.
	dir := t.TempDir()
	port := proxytest.FreePort(t)
	proxytest.StartBackends(t, dir, "--http", fmt.Sprintf("127.0.0.1:%d", port), "--check-domain-header", "X-Forwarded-For")
	u, err := url.Parse(fa.Address)
	if err != nil {
		t.Fatalf("forwardAuth address %q: %v", fa.Address, err)
	}
	if u.Host != "127.0.0.1:7070" {
		t.Fatalf("forwardAuth address %q: want the agent's default loopback listener 127.0.0.1:7070", fa.Address)
	}
	u.Host = fmt.Sprintf("127.0.0.1:%d", port)
	ask := func(client string) *http.Response {
		t.Helper()
		resp, _ := proxytest.Get(t, http.DefaultClient, u.String(), "X-Forwarded-For", client)
		return resp
	}
	for i := range 3 {
		if resp := ask("192.0.2.7"); resp.StatusCode != http.StatusNoContent || resp.Header.Get("RateLimit") == "" {
			t.Fatalf("check %d: status %d, RateLimit %q: want 204 with the fields", i+1, resp.StatusCode, resp.Header.Get("RateLimit"))
		}
	}
	proxytest.WantLimited(t, "check 4", ask("192.0.2.7"), proxytest.SearchPolicy, 20)
	if resp := ask("192.0.2.8"); resp.StatusCode != http.StatusNoContent {
		t.Errorf("another client address: status %d, want 204", resp.StatusCode)
	}
}
