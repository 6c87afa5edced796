package preempt

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strconv"

	"k8s.io/apimachinery/pkg/types"
)

// A hold is honoured only if this extender, or a replica sharing its key, wrote it: the record
// carries an HMAC-SHA256 (HoldRecord.MAC) over the pod's UID and the record's other fields,
// keyed by a secret the replicas share (--hold-key-file). Anyone allowed to annotate their own
// pod could otherwise write a hold that reserves a card for it, rebuilt at every restart. A
// hold that does not verify (written by hand, or under a key no longer in use) is ignored,
// logged once and counted (gpushare_preemption_holds_ignored_total). The UID binds a record to
// its pod: copied onto another pod it does not verify.

// MinHoldKeyBytes is the least key --hold-key-file must hold.
const MinHoldKeyBytes = 32

// ErrHoldKeyTooShort: the hold key file holds fewer than MinHoldKeyBytes bytes.
var ErrHoldKeyTooShort = errors.New("hold key too short")

// maxHoldKeyBytes bounds the key file read (a key is a few dozen bytes).
const maxHoldKeyBytes = 4 << 10

// LoadHoldKey reads the key that signs preemption holds from path: the file's bytes as they are,
// at least MinHoldKeyBytes of them.
func LoadHoldKey(path string) ([]byte, error) {
	f, err := os.Open(path) //nolint:gosec // G304: the operator names the file
	if err != nil {
		return nil, fmt.Errorf("hold key: %w", err)
	}
	defer func() { _ = f.Close() }()
	key, err := io.ReadAll(io.LimitReader(f, maxHoldKeyBytes+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("hold key %s: %w", path, err)
	case len(key) < MinHoldKeyBytes:
		return nil, fmt.Errorf("hold key %s: %w: %d bytes, at least %d are needed", path, ErrHoldKeyTooShort, len(key), MinHoldKeyBytes)
	case len(key) > maxHoldKeyBytes:
		return nil, fmt.Errorf("hold key %s: more than %d bytes", path, maxHoldKeyBytes)
	}
	return key, nil
}

// randomHoldKey is a key of this process alone: holds signed with it do not survive a restart
// or a change of leader (they are then ignored, and their preemptors compete again).
func randomHoldKey() []byte {
	key := make([]byte, MinHoldKeyBytes)
	_, _ = rand.Read(key) // never fails (crypto/rand, Go 1.24+)
	return key
}

// holdMAC is the MAC of rec for the pod of uid under key (rec.MAC aside), base64 without padding.
func holdMAC(key []byte, uid types.UID, rec *HoldRecord) string {
	m := hmac.New(sha256.New, key)
	writeField(m, "gpushare.io/preemption v1")
	writeField(m, string(uid))
	writeField(m, rec.Node)
	writeField(m, strconv.Itoa(rec.GPU))
	writeField(m, strconv.FormatInt(rec.Units, 10))
	writeField(m, strconv.FormatInt(rec.Until.UnixNano(), 10))
	writeField(m, strconv.Itoa(len(rec.Victims)))
	for _, v := range rec.Victims {
		writeField(m, v)
	}
	return base64.RawStdEncoding.EncodeToString(m.Sum(nil))
}

// writeField writes s to h after its length, so that no two field lists hash alike.
func writeField(h hash.Hash, s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	_, _ = h.Write(n[:]) // a hash never fails to write
	_, _ = h.Write([]byte(s))
}

// verifyHold reports whether rec's MAC is the one key gives for the pod of uid.
func verifyHold(key []byte, uid types.UID, rec *HoldRecord) bool {
	got, err := base64.RawStdEncoding.DecodeString(rec.MAC)
	if err != nil {
		return false
	}
	want, err := base64.RawStdEncoding.DecodeString(holdMAC(key, uid, rec))
	return err == nil && hmac.Equal(got, want)
}
