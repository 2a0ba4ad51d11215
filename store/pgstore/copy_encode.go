package pgstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// COPY rows in PostgreSQL's binary format, encoded here for the two
// tables the insert paths copy into: the column types are the schema's
// (jobs: copyColumns; records: recordCopyColumns), fixed by the
// migrations, so the rows are written without pgx's per-COPY describe
// round trip and without boxing every value (BENCHMARKS.md, "keyed
// batches by COPY"). The format: a signature and two zero words, per row
// a field count and each field as its length (-1 = NULL) and bytes, and
// a -1 trailer.

// copySignature opens a binary COPY stream (with its flags and header
// extension length, both zero).
var copySignature = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

// pgEpochMicros is 2000-01-01 00:00:00 UTC, PostgreSQL's timestamp epoch,
// in microseconds since the Unix epoch.
const pgEpochMicros = 946684800 * 1_000_000

// int8OID is the type of depends_on's elements.
const int8OID = 20

// copyBuf accumulates a binary COPY stream.
type copyBuf struct{ b []byte }

// maxPooledCopyBuf is the largest buffer copyBufs keeps (a batch of 1,000
// jobs encodes about 250 KB, its records about 150 KB).
const maxPooledCopyBuf = 4 << 20

// copyBufs recycles the buffers of COPY streams between batches: a fresh
// buffer per batch is zeroed by the allocator and soon collected again,
// which cost the client more than the encoding (BENCHMARKS.md, eleventh
// session).
type copyBufs struct{ pool sync.Pool }

// get starts a stream with room for about n bytes.
func (p *copyBufs) get(n int) *copyBuf {
	c, _ := p.pool.Get().(*copyBuf)
	if c == nil || cap(c.b) < n {
		c = &copyBuf{b: make([]byte, 0, n)}
	}
	c.b = append(c.b[:0], copySignature...)
	return c
}

// sent returns c to the pool after copyRows sent its stream: only when
// the COPY succeeded, because pgconn's CopyFrom can return on a broken
// connection before its goroutine has stopped reading the stream.
func (p *copyBufs) sent(c *copyBuf, err error) error {
	if err == nil && cap(c.b) <= maxPooledCopyBuf {
		p.pool.Put(c)
	}
	return err
}

func (c *copyBuf) row(fields int) { c.b = binary.BigEndian.AppendUint16(c.b, uint16(fields)) }
func (c *copyBuf) null()          { c.b = binary.BigEndian.AppendUint32(c.b, 0xffffffff) }

// text writes a text or json field.
func (c *copyBuf) text(s string) {
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(len(s)))
	c.b = append(c.b, s...)
}

// textBytesOrNull writes a text or json field; nil or empty is NULL.
func (c *copyBuf) textBytesOrNull(s []byte) {
	if len(s) == 0 {
		c.null()
		return
	}
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(len(s)))
	c.b = append(c.b, s...)
}

func (c *copyBuf) int4(v int32) {
	c.b = binary.BigEndian.AppendUint32(c.b, 4)
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(v))
}

func (c *copyBuf) int8(v int64) {
	c.b = binary.BigEndian.AppendUint32(c.b, 8)
	c.b = binary.BigEndian.AppendUint64(c.b, uint64(v))
}

// timestamptz writes t at microsecond precision (truncated, as pgx
// sends times).
func (c *copyBuf) timestamptz(t time.Time) {
	c.int8(t.Unix()*1_000_000 + int64(t.Nanosecond())/1000 - pgEpochMicros)
}

// int8Array writes a one-dimensional bigint[] (zero dimensions when empty).
func (c *copyBuf) int8Array(vs []int64) {
	if len(vs) == 0 {
		c.b = binary.BigEndian.AppendUint32(c.b, 12)
		c.b = binary.BigEndian.AppendUint32(c.b, 0) // dimensions
		c.b = binary.BigEndian.AppendUint32(c.b, 0) // no nulls
		c.b = binary.BigEndian.AppendUint32(c.b, int8OID)
		return
	}
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(20+12*len(vs)))
	c.b = binary.BigEndian.AppendUint32(c.b, 1)
	c.b = binary.BigEndian.AppendUint32(c.b, 0)
	c.b = binary.BigEndian.AppendUint32(c.b, int8OID)
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(len(vs)))
	c.b = binary.BigEndian.AppendUint32(c.b, 1) // lower bound
	for _, v := range vs {
		c.b = binary.BigEndian.AppendUint32(c.b, 8)
		c.b = binary.BigEndian.AppendUint64(c.b, uint64(v))
	}
}

// end closes the stream.
func (c *copyBuf) end() []byte {
	c.b = binary.BigEndian.AppendUint16(c.b, 0xffff)
	return c.b
}

// jobRow writes the row of it in copyColumns' order.
func (c *copyBuf) jobRow(it *insertItem) {
	p := it.p
	c.row(len(copyColumns))
	c.int8(it.id)
	c.text(p.Tenant)
	c.text(p.Queue)
	c.text(p.Kind)
	if len(p.Args) == 0 {
		c.text("{}")
	} else {
		c.textBytesOrNull(p.Args)
	}
	c.text(string(it.state))
	c.int4(int32(p.Priority))
	c.int4(int32(p.MaxAttempts))
	c.timestamptz(p.RunAt)
	c.timestamptz(it.now)
	c.text(p.PartitionKey)
	c.text(p.IdempotencyKey)
	c.int8Array(p.DependsOn)
	c.textBytesOrNull(p.Metadata)
	c.text(it.lastErr)
	c.int8(micros(p.DedupWindow))
	c.int8(micros(p.ResultTTL))
	c.textBytesOrNull(p.RetryPolicy)
	c.int8(micros(p.Timeout))
}

// recordRow writes the record of leader it in recordCopyColumns' order:
// what qInsertFast's rec writes.
func (c *copyBuf) recordRow(it *insertItem) {
	p := it.p
	c.row(len(recordCopyColumns))
	c.text(p.Tenant)
	c.text(p.IdempotencyKey)
	c.text("in_progress")
	c.text(p.Fingerprint)
	c.int8(it.id)
	c.timestamptz(it.now)
	if p.DedupWindow > 0 {
		d := it.now.Add(p.DedupWindow)
		c.timestamptz(d)
		c.timestamptz(d)
	} else {
		c.null()
		c.null()
	}
}

// copyStatement is the COPY of cols into the schema's table, binary.
func (s *Store) copyStatement(table string, cols []string) string {
	var b strings.Builder
	b.WriteString("COPY ")
	b.WriteString(pgx.Identifier{s.schema, table}.Sanitize())
	b.WriteString(" (")
	for i, col := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(pgx.Identifier{col}.Sanitize())
	}
	b.WriteString(") FROM STDIN BINARY")
	return b.String()
}

// copyJobs copies the jobs of items into the jobs table on conn.
func (s *Store) copyJobs(ctx context.Context, conn *pgxpool.Conn, items []*insertItem) error {
	c := s.copyBufs.get(len(items) * 256)
	for _, it := range items {
		c.jobRow(it)
	}
	return s.copyBufs.sent(c, s.copyRows(ctx, conn, s.copyStatement("jobs", copyColumns), c.end(), len(items)))
}

// copyRecords copies the records of the leaders lead of items.
func (s *Store) copyRecords(ctx context.Context, conn *pgxpool.Conn, items []*insertItem, lead []int) error {
	c := s.copyBufs.get(len(lead) * 160)
	for _, i := range lead {
		c.recordRow(items[i])
	}
	return s.copyBufs.sent(c, s.copyRows(ctx, conn, s.copyStatement("records", recordCopyColumns), c.end(), len(lead)))
}

// copyRows sends one binary COPY stream and checks its row count.
func (s *Store) copyRows(ctx context.Context, conn *pgxpool.Conn, sql string, data []byte, n int) error {
	tag, err := conn.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(data), sql)
	if err != nil {
		return err
	}
	if got := tag.RowsAffected(); got != int64(n) {
		return fmt.Errorf("%d rows for %d", got, n)
	}
	return nil
}
