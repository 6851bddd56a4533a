package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Client speaks the control API of a running host: what `streamrun ctl`
// does, for Go programs.
type Client struct {
	// URL is the server's base, such as "http://127.0.0.1:9470". Required.
	URL string
	// Token is sent as a Bearer token when set. Default "": none.
	Token string
	// HTTP sends the requests. Default http.DefaultClient.
	HTTP *http.Client
}

// A StatusError is a refusal: the status and what the server said.
type StatusError struct {
	Status int
	// Msg is the server's error, Problems the file's problems
	// (FILE:LINE:COL: ...) when a file does not load.
	Msg      string
	Problems []string
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("%d %s: %s", e.Status, http.StatusText(e.Status), e.Msg)
	if len(e.Problems) > 0 {
		s += "\n" + strings.Join(e.Problems, "\n")
	}
	return s
}

// Do sends a request to the API (path under /api/v1, body JSON-encoded
// when not nil) and returns the answer's body, or a *StatusError for a
// refusal.
func (c *Client) Do(ctx context.Context, method, path string, body any) (json.RawMessage, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	resp, err := c.send(ctx, method, path, rd)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, statusError(resp.StatusCode, b)
	}
	return b, nil
}

func (c *Client) send(ctx context.Context, method, path string, body io.Reader) (*http.Response, error) {
	base := strings.TrimSuffix(c.URL, "/")
	if base == "" {
		return nil, errors.New("control: no server URL")
	}
	req, err := http.NewRequestWithContext(ctx, method, base+APIPrefix+path, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("control: %s %s: %w", method, path, err)
	}
	return resp, nil
}

func statusError(code int, body []byte) error {
	var e apiError
	if json.Unmarshal(body, &e) != nil || e.Error == "" {
		e.Error = strings.TrimSpace(string(body))
	}
	return &StatusError{Status: code, Msg: e.Error, Problems: e.Problems}
}

// Tap streams pipeline's tap (at most rate events a second; 0 for the
// server's default), calling fn with each event's JSON, until ctx ends or
// the server ends the stream.
func (c *Client) Tap(ctx context.Context, pipeline string, rate float64, fn func(json.RawMessage)) error {
	path := "/pipelines/" + url.PathEscape(pipeline) + "/tap"
	if rate > 0 {
		path += fmt.Sprintf("?rate=%g", rate)
	}
	resp, err := c.send(ctx, "GET", path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		return statusError(resp.StatusCode, b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			fn(json.RawMessage(data))
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return sc.Err()
}

// Pipelines is every pipeline of the run with its state, counts, rates
// and instances.
func (c *Client) Pipelines(ctx context.Context) ([]PipelineStatus, error) {
	var out struct{ Pipelines []PipelineStatus }
	return out.Pipelines, c.call(ctx, "GET", "/pipelines", nil, &out)
}

// SetPaused pauses (or resumes) pipeline through its file, as the
// console's button does, and returns its status after.
func (c *Client) SetPaused(ctx context.Context, pipeline string, paused bool) (PipelineStatus, error) {
	action := "resume"
	if paused {
		action = "pause"
	}
	var out PipelineStatus
	return out, c.call(ctx, "POST", "/pipelines/"+url.PathEscape(pipeline)+"/"+action, nil, &out)
}

// Reload reloads the run's file of path with content, as SIGHUP does
// when the file on disk says so; with dryRun only what it would change is
// answered. A file that does not load is a *StatusError with its
// problems.
func (c *Client) Reload(ctx context.Context, path string, content []byte, dryRun bool) (Plan, error) {
	endpoint := "/reload"
	if dryRun {
		endpoint = "/reload/dry-run"
	}
	var out Plan
	return out, c.call(ctx, "POST", endpoint, map[string]string{"file": path, "content": string(content)}, &out)
}

// ReloadFile is Reload of the file at path as it is on disk now, sent
// for the run's file of the same absolute path (a run names its files
// so; a relative path is taken from the working directory). A file that
// does not read is the *os.PathError, before anything is sent.
func (c *Client) ReloadFile(ctx context.Context, path string, dryRun bool) (Plan, error) {
	content, err := os.ReadFile(path)
	if err != nil {
		return Plan{}, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return Plan{}, fmt.Errorf("the absolute path of %s: %w", path, err)
	}
	return c.Reload(ctx, abs, content, dryRun)
}

// call is Do with the answer decoded into out.
func (c *Client) call(ctx context.Context, method, path string, body, out any) error {
	b, err := c.Do(ctx, method, path, body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}
