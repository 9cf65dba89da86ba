package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/veloq/veloq/internal/selfsigned"
)

// tlsFlags are the TLS options every mode shares.
type tlsFlags struct {
	cert, key  string
	selfSigned bool
	offLoop    bool // -tls-handshake-off-loop
}

// config loads the TLS configuration the flags ask for, or returns nil
// for plaintext.
func (f tlsFlags) config() (*tls.Config, error) {
	switch {
	case f.selfSigned && (f.cert != "" || f.key != ""):
		return nil, errors.New("-tls-self-signed and -tls-cert/-tls-key exclude each other")
	case f.selfSigned:
		// A fresh ECDSA P-256 certificate for localhost and the loopback
		// addresses, for benchmarks: clients must skip verification (wrk
		// and h2load do; curl needs -k).
		c, err := selfsigned.New(365 * 24 * time.Hour)
		if err != nil {
			return nil, err
		}
		return c.ServerConfig(), nil
	case f.cert != "" || f.key != "":
		if f.cert == "" || f.key == "" {
			return nil, errors.New("-tls-cert and -tls-key go together")
		}
		pair, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return nil, fmt.Errorf("loading the TLS key pair: %w", err)
		}
		return &tls.Config{Certificates: []tls.Certificate{pair}}, nil
	}
	return nil, nil
}
