package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
)

// journalSink writes to systemd-journald over its native protocol (one
// datagram of KEY=value fields per line on /run/systemd/journal/socket;
// systemd.journal-fields(7), "Native Journal Protocol"), with the fields
// oslo.log's OSJournalHandler sends that exist here. It needs no library.
type journalSink struct {
	conn     *net.UnixConn
	facility int
	ident    string
}

func dialJournal(path string, facility int) (*journalSink, error) {
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("journal socket %s: %w", path, err)
	}
	return &journalSink{conn: conn, facility: facility, ident: binaryName()}, nil
}

func (j *journalSink) emit(level slog.Level, line []byte) error {
	// A line longer than a datagram can carry (journald then wants a memfd)
	// is cut: the journal keeps the start of it rather than nothing.
	const maxMessage = 128 << 10
	m := bytes.TrimSuffix(line, []byte("\n"))
	if len(m) > maxMessage {
		m = m[:maxMessage]
	}
	var b bytes.Buffer
	journalField(&b, "MESSAGE", m)
	journalField(&b, "PRIORITY", []byte(strconv.Itoa(syslogPriority(level))))
	journalField(&b, "SYSLOG_IDENTIFIER", []byte(j.ident))
	journalField(&b, "SYSLOG_FACILITY", []byte(strconv.Itoa(j.facility)))
	journalField(&b, "SYSLOG_PID", []byte(strconv.Itoa(os.Getpid())))
	journalField(&b, "LOGGER_NAME", []byte(loggerName))
	journalField(&b, "LOGGER_LEVEL", []byte(levelName(level)))
	_, err := j.conn.Write(b.Bytes())
	return err
}

func (j *journalSink) close() { j.conn.Close() }

// journalField appends KEY=value, or, when the value holds a newline, the
// protocol's binary form: KEY, newline, little-endian 64-bit length, value.
func journalField(b *bytes.Buffer, key string, v []byte) {
	if !bytes.ContainsRune(v, '\n') {
		b.WriteString(key)
		b.WriteByte('=')
		b.Write(v)
		b.WriteByte('\n')
		return
	}
	b.WriteString(key)
	b.WriteByte('\n')
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(v)))
	b.Write(n[:])
	b.Write(v)
	b.WriteByte('\n')
}
