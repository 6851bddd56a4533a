package control

import (
	"log/slog"
	"time"

	"github.com/streamrun/streamrun/broker/auth"
	"github.com/streamrun/streamrun/pipelines"
)

// Options configure a Server.
type Options struct {
	// Addr is the listen address; a missing host (":9470") means
	// loopback. An address beyond loopback needs CertFile, KeyFile and a
	// token key. Required.
	Addr string
	// CertFile and KeyFile are the TLS certificate and key (PEM).
	// Default none: plain HTTP.
	CertFile, KeyFile string
	// TokenSecretKey (HS256/384/512) or TokenPublicKey (RS*, PS*, ES*;
	// PEM or DER) verify the JWT every API request carries
	// (Authorization: Bearer, or access_token=... where a browser cannot
	// set a header: the tap's event stream), as the embedded broker
	// verifies its clients' tokens. At most one. Default none: no token
	// asked for.
	TokenSecretKey, TokenPublicKey []byte
	// TokenAuthClaim is the claim naming the role. Default "sub".
	TokenAuthClaim string
	// ReadOnly refuses every change (reload, pause, resume) with 403;
	// looking and the tap stay. Default false.
	ReadOnly bool
	// RateInterval is how often rates and backlogs are sampled. Default
	// DefaultRateInterval.
	RateInterval time.Duration
	// TapMaxRate caps the events per second a tap may ask for. Default
	// 50.
	TapMaxRate float64
	// TapMaxPayload is how much of a payload a tap event carries.
	// Default 256 bytes.
	TapMaxPayload int
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// DefaultRateInterval is Options.RateInterval's default.
const DefaultRateInterval = time.Second

func (o Options) withDefaults() Options {
	if o.RateInterval <= 0 {
		o.RateInterval = DefaultRateInterval
	}
	if o.TapMaxRate <= 0 {
		o.TapMaxRate = 50
	}
	if o.TapMaxPayload <= 0 {
		o.TapMaxPayload = 256
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// FromFile is the Options a file's control section asks for: its keys
// read (auth.ReadKey). lookupEnv nil means os.LookupEnv.
func FromFile(c pipelines.Control, lookupEnv func(string) (string, bool)) (Options, error) {
	o := Options{Addr: c.HTTP, CertFile: c.CertFile, KeyFile: c.KeyFile, ReadOnly: c.ReadOnly}
	var err error
	if c.TokenSecretKey != "" {
		if o.TokenSecretKey, err = auth.ReadKey("control.token_secret_key", c.TokenSecretKey, lookupEnv); err != nil {
			return o, err
		}
	}
	if c.TokenPublicKey != "" {
		if o.TokenPublicKey, err = auth.ReadKey("control.token_public_key", c.TokenPublicKey, lookupEnv); err != nil {
			return o, err
		}
	}
	return o, nil
}
