package clientip

import (
	"errors"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// provisionSign compiles the sign block: the key's placeholders are
// expanded here, so a key that is unset or too short stops the config.
func (h *Handler) provisionSign() error {
	s := h.Sign
	if s.Header == "" {
		s.Header = defaultAssertionHeader
	}
	if s.Key == nil {
		return errors.New("client_ip: sign: no key: give one, e.g. key k1 {env.EDGE_KEY_K1}")
	}
	if err := checkKeyID("sign", s.Key.ID); err != nil {
		return err
	}
	secret, err := expandKey("sign", s.Key)
	if err != nil {
		return err
	}
	h.signer = &signer{
		header: http.CanonicalHeaderKey(s.Header),
		key:    newAssertionKey(s.Key.ID, []byte(secret)),
		now:    time.Now,
	}
	return nil
}

// provisionVerify compiles the verify block.
func (h *Handler) provisionVerify() error {
	v := h.Verify
	if v.Header == "" {
		v.Header = defaultAssertionHeader
	}
	if v.MaxAge == nil {
		d := caddy.Duration(defaultMaxAge)
		v.MaxAge = &d
	}
	if len(v.Keys) == 0 {
		return errors.New("client_ip: verify: no key: give the keys the PoPs sign with, e.g. key k1 {env.EDGE_KEY_K1}")
	}
	if err := checkKeyIDs(v.Keys); err != nil {
		return err
	}
	if v.ReplayCacheSize == 0 {
		v.ReplayCacheSize = defaultReplayCacheSize
	}
	vf := &verifier{
		header: http.CanonicalHeaderKey(v.Header),
		maxAge: time.Duration(*v.MaxAge),
		now:    time.Now,
	}
	if checkMaxAge(vf.maxAge) == nil && checkReplayCacheSize(v.ReplayCacheSize) == nil { // else Validate refuses them
		var err error
		if vf.used, h.replayKey, err = acquireReplayCache(vf.maxAge, v.ReplayCacheSize); err != nil {
			return err
		}
	}
	secrets := make(map[string]string, len(v.Keys))
	for i := range v.Keys {
		k := &v.Keys[i]
		secret, err := expandKey("verify", k)
		if err != nil {
			return err
		}
		// Retiring an id must retire its key: the same key under a second
		// id would stay accepted.
		if other, ok := secrets[secret]; ok {
			return errors.New("client_ip: verify keys " + other + " and " + k.ID + ": the same key under two ids: give each id its own key")
		}
		secrets[secret] = k.ID
		vf.keys = append(vf.keys, newAssertionKey(k.ID, []byte(secret)))
	}
	h.resolver.verify = vf
	return nil
}

func expandKey(role string, k *AssertionKey) (string, error) {
	secret, err := expandSecret(role+" key "+k.ID, k.Secret, "the key, at least 32 bytes")
	if err != nil {
		return "", err
	}
	return secret, checkKeyLength(role, k.ID, len(secret))
}

// validateAssertions refuses sign and verify settings that cannot work.
func (h *Handler) validateAssertions() error {
	if s := h.Sign; s != nil {
		if err := validHeaderName("sign header", s.Header); err != nil {
			return err
		}
	}
	v := h.Verify
	if v == nil {
		return nil
	}
	if err := validHeaderName("verify header", v.Header); err != nil {
		return err
	}
	if err := checkMaxAge(time.Duration(*v.MaxAge)); err != nil {
		return err
	}
	if err := checkReplayCacheSize(v.ReplayCacheSize); err != nil {
		return err
	}
	if h.Recursive || *h.Hops != 1 || len(h.headerList()) > 0 || h.Forwarded {
		return errors.New("client_ip: verify takes the client from the signed assertion: remove hops, recursive, header and forwarded, which read an unsigned chain")
	}
	return nil
}

// Cleanup lets go of the shared record of used assertions.
func (h *Handler) Cleanup() error {
	if h.replayKey != "" {
		_, _ = replayRecords.Delete(h.replayKey)
		h.replayKey = ""
	}
	return nil
}
