package main

import (
	"github.com/spf13/pflag"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/auth"
)

// securityFlags are `streamrun broker`'s authentication and
// authorization flags (docs/security.md).
type securityFlags struct {
	secretKey    string
	publicKey    string
	authClaim    string
	authz        bool
	superUsers   []string
	oldTokens    []string
	oldTokenFile string
}

func (f *securityFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.secretKey, "token-secret-key", "", "verify HS256 JWTs with this key (Apache Pulsar's tokenSecretKey): file:PATH (raw bytes) or env:VAR (base64)")
	fs.StringVar(&f.publicKey, "token-public-key", "", "verify RS256/ES256 JWTs with this public key (Apache Pulsar's tokenPublicKey): file:PATH (PEM or DER) or env:VAR")
	fs.StringVar(&f.authClaim, "token-auth-claim", "sub", "the JWT claim naming the role")
	fs.BoolVar(&f.authz, "authorization", false, "allow a role to produce or consume only where its namespace permissions say (needs a token key)")
	fs.StringArrayVar(&f.superUsers, "superuser-role", nil, "a role allowed everything, the admin API included (repeatable)")
	// The literal token list is gone (docs/security.md): its flags stay
	// only to say so.
	fs.StringArrayVar(&f.oldTokens, "token", nil, "removed: see --token-secret-key")
	fs.StringVar(&f.oldTokenFile, "token-file", "", "removed: see --token-secret-key")
	_ = fs.MarkHidden("token")
	_ = fs.MarkHidden("token-file")
}

// errTokenListRemoved answers --token and --token-file.
var errTokenListRemoved = usagef("--token and --token-file (a list of literal tokens) were removed: such tokens never expire and name no role. " +
	"Make JWTs with `pulsar tokens create` (or any JWT library) and pass the key that verifies them: " +
	"--token-secret-key file:PATH or --token-public-key file:PATH")

// apply checks the flags and sets o's security options.
func (f *securityFlags) apply(o *broker.Options) error {
	if len(f.oldTokens) > 0 || f.oldTokenFile != "" {
		return errTokenListRemoved
	}
	if f.secretKey != "" && f.publicKey != "" {
		return usagef("--token-secret-key and --token-public-key exclude each other")
	}
	var err error
	if f.secretKey != "" {
		if o.TokenSecretKey, err = readTokenKey("--token-secret-key", f.secretKey); err != nil {
			return err
		}
	}
	if f.publicKey != "" {
		if o.TokenPublicKey, err = readTokenKey("--token-public-key", f.publicKey); err != nil {
			return err
		}
		if _, err := auth.ParsePublicKey(o.TokenPublicKey); err != nil {
			return usagef("--token-public-key: %v", err)
		}
	}
	if f.authz && f.secretKey == "" && f.publicKey == "" {
		return usagef("--authorization needs --token-secret-key or --token-public-key: without authentication every client is anonymous")
	}
	if len(f.superUsers) > 0 && !f.authz {
		return usagef("--superuser-role needs --authorization")
	}
	o.TokenAuthClaim = f.authClaim
	o.Authorization = f.authz
	o.SuperUserRoles = f.superUsers
	return nil
}

// checkTLSOnly refuses a broker that would listen on nothing, or an
// admin API over HTTPS without a certificate.
func checkTLSOnly(o broker.Options) error {
	switch {
	case o.Listen == "-" && o.TLSCertFile == "":
		return usagef("--listen - turns the plain port off: give --tls-cert and --tls-key, or nothing listens")
	case o.HTTPS != "" && o.TLSCertFile == "":
		return usagef("--https needs --tls-cert and --tls-key")
	}
	return nil
}
