// Package admin is a client of the admin REST API: the part of Apache
// Pulsar's /admin/v2 that the embedded broker serves too, so that the
// same calls work against both (docs/admin.md). `streamrun topics`,
// `streamrun health` and `streamrun bench` use it.
//
//	a, err := admin.New(admin.Options{URL: "http://127.0.0.1:8080"})
//	...
//	err = a.CreateTopic(ctx, "orders", 4)
//	st, err := a.TopicStats(ctx, "orders")
package admin

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Options configure a Client.
type Options struct {
	// URL of the admin API: http://host:port or https://host:port.
	// Required.
	URL string
	// Token is sent as a bearer token. Default "": none.
	Token string
	// CAFile is a PEM file of the authorities to trust for an https://
	// URL; host names are verified. Default "": the system's roots.
	CAFile string
	// Timeout bounds each request. Default 30 s.
	Timeout time.Duration
}

// DefaultTimeout is Options.Timeout's default.
const DefaultTimeout = 30 * time.Second

// Client makes admin REST requests over connections of its own, kept
// open between requests until Close. It is safe for concurrent use.
type Client struct {
	base    string
	token   string
	timeout time.Duration
	http    *http.Client
}

// An OptionError is a bad Options field.
type OptionError struct {
	Field string // "URL", "CAFile"
	Err   error
}

func (e *OptionError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *OptionError) Unwrap() error { return e.Err }

// New checks o and returns its client; it sends nothing.
func New(o Options) (*Client, error) {
	u, err := url.Parse(o.URL)
	switch {
	case err == nil && (u.Scheme == "pulsar" || u.Scheme == "pulsar+ssl"):
		return nil, &OptionError{"URL", fmt.Errorf("%q: this is a service URL; the admin API is HTTP, e.g. http://127.0.0.1:8080", o.URL)}
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return nil, &OptionError{"URL", fmt.Errorf("%q: want http://host:port or https://host:port", o.URL)}
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	hc, err := HTTPClient(o.CAFile)
	if err != nil {
		return nil, &OptionError{"CAFile", err}
	}
	return &Client{base: strings.TrimSuffix(o.URL, "/"), token: o.Token, timeout: o.Timeout, http: hc}, nil
}

// HTTPClient is the HTTP client the admin API is asked with: net/http's
// defaults, trusting the authorities in caFile ("": the system's), host
// names verified.
func HTTPClient(caFile string) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if caFile == "" {
		return &http.Client{Transport: tr}, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr}, nil
}

// Close closes the client's idle connections; a request after it opens
// new ones.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// StatusError is an answer other than 2xx, with the server's reason.
type StatusError struct {
	Status int
	Reason string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, http.StatusText(e.Status), e.Reason)
}

// Do sends a request to path (under the URL) with body as JSON (nil:
// none) and returns the body of a 2xx answer; another answer is a
// *StatusError, wrapped with the method and path.
func (c *Client) Do(ctx context.Context, method, path string, body any) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// net/http's error names the method and URL again.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%s %s: %w", method, c.base+path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, c.base+path, err)
	}
	if resp.StatusCode/100 != 2 {
		var r struct {
			Reason string `json:"reason"`
		}
		if json.Unmarshal(b, &r) != nil || r.Reason == "" {
			r.Reason = strings.TrimSpace(string(b))
		}
		return nil, fmt.Errorf("%s %s: %w", method, path, &StatusError{resp.StatusCode, r.Reason})
	}
	return b, nil
}

// Get decodes a GET's JSON answer into v.
func (c *Client) Get(ctx context.Context, path string, v any) error {
	b, err := c.Do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}

// Health asks the broker health endpoint both brokers serve
// (/admin/v2/brokers/health): nil when it answers 2xx.
func (c *Client) Health(ctx context.Context) error {
	_, err := c.Do(ctx, http.MethodGet, "/admin/v2/brokers/health", nil)
	return err
}
