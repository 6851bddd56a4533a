package main

import (
	"errors"

	"github.com/spf13/pflag"

	"github.com/streamrun/streamrun/broker"
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

// apply sets o's security options (broker.Options.Check checks them).
func (f *securityFlags) apply(o *broker.Options) error {
	if len(f.oldTokens) > 0 || f.oldTokenFile != "" {
		return errTokenListRemoved
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
	}
	o.TokenAuthClaim, o.Authorization, o.SuperUserRoles = f.authClaim, f.authz, f.superUsers
	return nil
}

// brokerOptionFlags are the flags behind the fields
// broker.Options.Check names.
var brokerOptionFlags = map[string]string{
	"DataDir": "data", "Memory": "memory", "Listen": "listen", "HTTPS": "https", "TLSCertFile": "tls-cert", "TLSKeyFile": "tls-key",
	"TokenSecretKey": "token-secret-key", "TokenPublicKey": "token-public-key", "Authorization": "authorization",
	"SuperUserRoles": "superuser-role", "MaxConnections": "max-connections", "MaxConnectionsPerIP": "max-connections-per-ip",
	"TLSListen": "tls-listen", "HTTP": "http", "Pprof": "pprof", "AdvertisedHost": "advertised-host",
}

// checkBrokerOptions is broker.Options.Check, its refusal a usage error
// naming the flags.
func checkBrokerOptions(o broker.Options) error {
	var oe *broker.OptionError
	if err := o.Check(); errors.As(err, &oe) {
		return usagef("%s", oe.Text(func(field string) string { return "--" + brokerOptionFlags[field] }))
	} else if err != nil {
		return err
	}
	return nil
}
