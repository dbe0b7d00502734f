package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// The query worker and this process speak in frames over stdin and stdout: a u32 length
// (little-endian, counting the kind byte), a kind byte, the payload.
//
//	worker → engine: 'Q' a request (JSON, engine.go `request`); 'S' the series a fetch asked for
//	                 (decodeSeries' binary form); 'E' a fetch that failed (its message)
//	engine → worker: 'F' a fetch (JSON: matchers, time range); 'A' the answer (the API's JSON body)
//
// One request at a time: while a request is evaluated, the only frames the worker sends are answers to
// its fetches, one for each, in order.
const (
	frameRequest = 'Q'
	frameSeries  = 'S'
	frameFailed  = 'E'
	frameFetch   = 'F'
	frameAnswer  = 'A'
)

func main() {
	// Times are UTC (the engine's functions say so); no zone file is read.
	time.Local = time.UTC
	if err := sandbox(); err != nil {
		fmt.Fprintf(os.Stderr, "promql engine: sandbox: %v\n", err)
		os.Exit(2)
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	var mu sync.Mutex
	fetch := func(req []byte) ([]byte, error) {
		// The engine may select from several goroutines: one fetch at a time on the pipe.
		mu.Lock()
		defer mu.Unlock()
		if err := writeFrame(out, frameFetch, req); err != nil {
			return nil, err
		}
		kind, payload, err := readFrame(in)
		if err != nil {
			return nil, err
		}
		switch kind {
		case frameSeries:
			return payload, nil
		case frameFailed:
			return nil, &apiError{"internal", string(payload)}
		}
		return nil, fmt.Errorf("unexpected frame %q in answer to a fetch", kind)
	}
	for {
		kind, payload, err := readFrame(in)
		if err != nil {
			// The worker closed the pipe (it ended, or stopped the engine): so does the engine.
			if errors.Is(err, io.EOF) {
				os.Exit(0)
			}
			fmt.Fprintf(os.Stderr, "promql engine: %v\n", err)
			os.Exit(1)
		}
		if kind != frameRequest {
			fmt.Fprintf(os.Stderr, "promql engine: unexpected frame %q\n", kind)
			os.Exit(1)
		}
		if err := writeFrame(out, frameAnswer, answer(payload, fetch)); err != nil {
			os.Exit(1)
		}
	}
}

func readFrame(r *bufio.Reader) (byte, []byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, nil, err
	}
	n := binary.LittleEndian.Uint32(head[:4])
	if n == 0 {
		return 0, nil, fmt.Errorf("frame of %d bytes", n)
	}
	payload := make([]byte, n-1)
	if _, err := io.ReadFull(r, payload); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return head[4], payload, nil
}

func writeFrame(w *bufio.Writer, kind byte, payload []byte) error {
	var head [5]byte
	binary.LittleEndian.PutUint32(head[:4], uint32(len(payload)+1))
	head[4] = kind
	if _, err := w.Write(head[:]); err != nil {
		return err
	}
	if _, err := w.Write(payload); err != nil {
		return err
	}
	return w.Flush()
}
