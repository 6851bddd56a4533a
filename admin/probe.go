package admin

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// maxProbeLine bounds what is read of an unhealthy answer to quote it.
const maxProbeLine = 1024

// Probe asks an HTTP health endpoint (the broker health both brokers
// serve, a run's /readyz) with a GET, with token as a bearer token when
// not "", through hc (HTTPClient makes one for a private CA). It returns
// the answer's status when it is 2xx; else an error with the URL, the
// status and the first line of the answer, which says why when the
// endpoint says anything (a run's /readyz does): what a container's
// health log keeps. `streamrun health` is this.
func Probe(ctx context.Context, hc *http.Client, url, token string) (status string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", &OptionError{Field: "URL", Err: fmt.Errorf("%q: %w", url, err)}
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	first, _ := bufio.NewReader(io.LimitReader(resp.Body, maxProbeLine)).ReadString('\n')
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		if why := strings.TrimSpace(strings.ToValidUTF8(first, "")); why != "" {
			return "", fmt.Errorf("%s: %s: %s", url, resp.Status, why)
		}
		return "", fmt.Errorf("%s: %s", url, resp.Status)
	}
	return resp.Status, nil
}
