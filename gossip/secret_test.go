package gossip

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadSecret(t *testing.T) {
	key16, key24, key32 := testKey[:16], testKey[:24], testKey
	tests := []struct {
		name    string
		content string
		want    []byte
		errMsg  string // substring; empty for success
	}{
		{name: "hex 32 bytes", content: hex.EncodeToString(key32), want: key32},
		{name: "hex 16 bytes upper case, newline", content: strings.ToUpper(hex.EncodeToString(key16)) + "\n", want: key16},
		{name: "base64 32 bytes", content: base64.StdEncoding.EncodeToString(key32) + "\n", want: key32},
		{name: "base64 24 bytes unpadded", content: base64.RawStdEncoding.EncodeToString(key24), want: key24},
		{name: "base64 16 bytes, spaces", content: "  " + base64.StdEncoding.EncodeToString(key16) + " \r\n", want: key16},
		{name: "empty", content: " \n", errMsg: "is empty"},
		{name: "hex of 20 bytes", content: hex.EncodeToString(make([]byte, 20)), errMsg: "holds 40 hex digits"},
		{name: "odd hex", content: "abc", errMsg: "holds 3 hex digits"},
		{name: "base64 of 8 bytes", content: base64.StdEncoding.EncodeToString(make([]byte, 8)), errMsg: "decodes from base64 to 8 bytes"},
		{name: "neither", content: "not a key!", errMsg: "is neither hex nor base64"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "gossip.key")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := LoadSecret(path)
			if tc.errMsg != "" {
				if !errors.Is(err, ErrSecret) || !strings.Contains(err.Error(), tc.errMsg) || !strings.Contains(err.Error(), path) {
					t.Fatalf("err = %v, want ErrSecret naming %s and %q", err, path, tc.errMsg)
				}
				if !strings.Contains(err.Error(), "want 16, 24 or 32 bytes") {
					t.Fatalf("err = %v does not state the expected form", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("key = %x, want %x", got, tc.want)
			}
		})
	}
	if _, err := LoadSecret(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("missing file: err = %v", err)
	}
}
