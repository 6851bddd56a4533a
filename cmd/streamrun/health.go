package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/streamrun/streamrun/admin"
)

func runHealth(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCmd("health", stdout, stderr)
	fs := pflag.NewFlagSet("streamrun health", pflag.ContinueOnError)
	url := fs.String("url", "http://127.0.0.1:8080/admin/v2/brokers/health", "the endpoint to ask")
	timeout := fs.Duration("timeout", 5*time.Second, "how long the request may take")
	quiet := fs.BoolP("quiet", "q", false, "print nothing when healthy")
	token := fs.String("token", "", "auth token for an admin API that asks for one: "+secretFlagHelp)
	tlsCA := fs.String("tls-ca", "", "PEM file of the CAs to trust for an https:// --url (default: the system's)")
	if code, done := cmd.parse(fs, args, helpText("health")); done {
		return code
	}
	if err := noArgs(fs); err != nil {
		return cmd.fail(err)
	}
	if *timeout <= 0 {
		return cmd.fail(usagef("--timeout must be positive, got %s", *timeout))
	}
	tok, hc, err := httpClient(*token, *tlsCA)
	if err != nil {
		return cmd.fail(err)
	}
	defer hc.CloseIdleConnections() // see httpClient
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	status, err := admin.Probe(ctx, hc, *url, tok)
	var oe *admin.OptionError
	switch {
	case errors.As(err, &oe):
		return cmd.fail(usagef("--url %v", oe.Err))
	case err != nil:
		return cmd.fail(err)
	}
	if !*quiet {
		fmt.Fprintf(stdout, "healthy: %s %s\n", *url, status)
	}
	return exitOK
}
