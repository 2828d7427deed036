package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/obol-dev/obol/internal/tlsfiles"
)

// tls.go is TLS on the listeners that face the network: its flags and
// environment, the files loaded and checked at the start (a bad pair stops
// the start, exit 2), the rule that a bearer token does not cross the
// network in the clear (--http-public needs --tls-cert, or
// --insecure-token), and the watch that reloads the files when their
// content changes (the same polling as the config file's: watch.go).
//
// TLS serves --http when --http-public is given, and --rls-grpc and
// --rls-http when --rls-public is given: the listeners off loopback. The
// Unix sockets, the loopback listeners and the status listener stay in the
// clear (kubelet's probes and Prometheus's scrapes reach --status-http).

// tlsFlags are TLS's flags.
type tlsFlags struct {
	cert, key, clientCA string
	insecureToken       bool
}

func (f *tlsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.cert, "tls-cert", "", "PEM certificate chain served on the listeners off loopback (--http with --http-public, --rls-grpc and --rls-http with --rls-public); reloaded when it changes (env OBOL_TLS_CERT)")
	fs.StringVar(&f.key, "tls-key", "", "PEM private key of --tls-cert (env OBOL_TLS_KEY)")
	fs.StringVar(&f.clientCA, "tls-client-ca", "", "PEM bundle of CAs a client certificate must chain to (mutual TLS): clients without one are refused (env OBOL_TLS_CLIENT_CA)")
	fs.BoolVar(&f.insecureToken, "insecure-token", false, "allow --http-public without --tls-cert: the bearer token crosses the network in the clear (env OBOL_INSECURE_TOKEN)")
}

// tlsEnv is TLS's environment.
type tlsEnv struct{ cert, key, clientCA, insecureToken string }

func readTLSEnv(getenv func(string) string) tlsEnv {
	return tlsEnv{cert: getenv("OBOL_TLS_CERT"), key: getenv("OBOL_TLS_KEY"), clientCA: getenv("OBOL_TLS_CLIENT_CA"),
		insecureToken: getenv("OBOL_INSECURE_TOKEN")}
}

// prepareTLS resolves TLS's settings (a flag wins over its variable) for
// the listeners st and rp set up, and loads the files: nil, nil when no
// certificate is given and none is needed.
func prepareTLS(f flags, e env, st settings, rp *rlsPlan) (*tlsfiles.Holder, error) {
	tf, te := f.tls, e.tls
	str := func(name, fv, ev, envName string) value {
		if f.set[name] {
			return value{fv, "--" + name}
		}
		return value{ev, envName}
	}
	var errs []error
	bad := func(v value, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%v: %s", v, fmt.Sprintf(format, args...)))
	}
	cert := str("tls-cert", tf.cert, te.cert, "OBOL_TLS_CERT")
	key := str("tls-key", tf.key, te.key, "OBOL_TLS_KEY")
	ca := str("tls-client-ca", tf.clientCA, te.clientCA, "OBOL_TLS_CLIENT_CA")
	insecure := boolSetting(f, "insecure-token", tf.insecureToken, te.insecureToken, "OBOL_INSECURE_TOKEN", bad)
	httpPublic := st.http != "" && st.httpPublic
	rlsPublic := rp != nil && rp.public && (rp.grpc != "" || rp.http != "")
	switch {
	case cert.v == "" && key.v == "":
		if ca.v != "" {
			bad(ca, "a client CA needs the server's own pair: give --tls-cert and --tls-key (OBOL_TLS_CERT, OBOL_TLS_KEY) too")
		}
		if httpPublic && !insecure {
			errs = append(errs, errors.New("--http-public without --tls-cert: the bearer token would cross the network in the clear; give --tls-cert and --tls-key (OBOL_TLS_CERT, OBOL_TLS_KEY), or --insecure-token (OBOL_INSECURE_TOKEN=true) where the network below is encrypted"))
		}
		return nil, errors.Join(errs...)
	case cert.v == "":
		bad(key, "a key needs its certificate: give --tls-cert (OBOL_TLS_CERT) too")
	case key.v == "":
		bad(cert, "a certificate needs its key: give --tls-key (OBOL_TLS_KEY) too")
	}
	if !httpPublic && !rlsPublic {
		bad(cert, "TLS serves the listeners off loopback (--http with --http-public, --rls-grpc or --rls-http with --rls-public), and none is set; the socket, the loopback listeners and --status-http stay in the clear")
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	h, err := tlsfiles.Load(tlsfiles.Files{Cert: cert.v, Key: key.v, ClientCA: ca.v,
		CertFlag: cert.from, KeyFlag: key.from, ClientCAFlag: ca.from}, nil)
	if err != nil {
		return nil, err
	}
	return h, nil
}

// watchTLS reloads h's files when their content changes, as the config
// file is watched (watch.go: every watchEvery, loaded once it has read the
// same for watchQuiet), until ctx is done. A refused pair is logged with
// its reason and counted; the pair in force stays.
func watchTLS(ctx context.Context, h *tlsfiles.Holder, path string, log *slog.Logger) {
	w := &watcher{path: path, what: "TLS files", keeps: "the pair in force stays, watching for the files", quiet: watchQuiet,
		known: func(d digest) bool { return h.Known(tlsfiles.Digest(d)) },
		read: func() observation {
			sum, err := h.Observe()
			return observation{sum: digest(sum), err: err}
		},
		reload: func() {
			changed, err := h.Reload()
			switch {
			case err != nil:
				log.Error("TLS files refused; the pair in force stays", "path", path, "err", err.Error())
			case changed:
				log.Info("TLS files reloaded", "path", path, "subject", h.Subject(), "not_after", h.NotAfter().UTC().Format(time.RFC3339))
			}
		},
		log: log}
	w.run(ctx, watchEvery)
}

// tlsSummary is --check-config's word on TLS: "" when off.
func tlsSummary(p plan) string {
	if p.tls == nil {
		return ""
	}
	var on []string
	if p.st.httpPublic && p.st.http != "" {
		on = append(on, "http")
	}
	if p.rls != nil && p.rls.public {
		on = append(on, "rls")
	}
	s := "; TLS on " + strings.Join(on, " and ") + " (" + p.tls.Subject() + ", until " + p.tls.NotAfter().UTC().Format(time.RFC3339)
	if p.tls.MutualTLS() {
		s += ", client certificates required"
	}
	return s + ")"
}
