package recordlease

// Purpose is the namespace a record key belongs to. Records of different
// purposes share one table and one unique key (tenant, key); Key makes the
// stored keys of two purposes unequal whatever the caller's keys are.
type Purpose string

// The purposes of idempotency records.
const (
	// PurposeJob is the namespace of job idempotency keys. They are stored
	// as given, so the records API (GET /v1/idempotency/{key}) and every
	// existing job record keep their keys.
	PurposeJob Purpose = ""
	// PurposeHTTP is the namespace of the Idempotency-Key middleware.
	PurposeHTTP Purpose = "http"
	// PurposeDo is the namespace of Client.Do.
	PurposeDo Purpose = "do"
	// PurposeSchedule is reserved for the firings of schedules.
	PurposeSchedule Purpose = "schedule"
)

// separator starts and ends the purpose of an internal record key. It is a
// control byte (ASCII unit separator): every key a caller gives (job, Do,
// middleware, records API) is checked by idem.ValidateKey to be printable
// ASCII 0x21–0x7E, so no caller key contains it and no job key can equal
// an internal key. PostgreSQL text and SQLite TEXT store it as is (unlike
// NUL, which PostgreSQL refuses).
const separator = "\x1f"

// Key returns the stored record key of key in the namespace of p: key
// itself for PurposeJob, else separator + p + separator + key.
func Key(p Purpose, key string) string {
	if p == PurposeJob {
		return key
	}
	return separator + string(p) + separator + key
}
