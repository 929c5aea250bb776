// Package edgebench measures what a client of an edge waits for: how long
// one URL takes over HTTP/1.1 (h1), HTTP/2 (h2) or HTTP/3 (h3), split into
// the phases a user pays for.
//
// Every request is timed from its start with net/http/httptrace (quic-go's
// http3 transport reports the same hooks):
//
//   - DNS: name resolution (0 for an IP literal).
//   - Connect: the TCP handshake. For h3 there is no separate transport
//     handshake, so Connect is only the opening of the UDP socket and the
//     whole QUIC handshake, which carries TLS 1.3, is reported as TLS.
//   - TLS: the TLS handshake (for h3, the QUIC handshake up to its
//     completion: the dial returns only when the handshake is complete, so
//     no 0-RTT or 0.5-RTT data is mistaken for a finished handshake).
//   - Handshake: Connect+TLS, the fair figure to compare h2 against h3.
//   - TTFB: start to the first byte of the response, so it includes every
//     handshake the request waited for.
//   - Total: start to the last byte of the body.
//
// Connect and TLS are 0 for a request that reused a connection. On loopback
// the kernel completes a TCP handshake at once, so Connect reads near 0 and
// the cost of a new connection shows up in TLS and TTFB instead; that is
// what happened, and it is reported as such.
//
// Bodies are counted as they arrive on the wire: the transports never ask
// for or decode compression themselves, so to measure a compressed response
// send Accept-Encoding in Config.Header.
//
// Two ways to measure:
//
//   - [Run] (probe mode) sends Config.Requests requests one after another,
//     either Cold (a fresh transport, so a fresh connection and handshake, for
//     every request, closed afterwards) or warm (one transport reused; one
//     unmeasured warm-up request opens the connection first and is excluded
//     from the results).
//   - [Load] sends requests at a fixed rate for a duration, open loop: each
//     request starts at its scheduled time whether or not earlier ones have
//     answered, and its latency is measured from that scheduled time, so a
//     stalling server cannot slow the client down and hide its own latency
//     (coordinated omission).
//
// Both parse the server's Server-Timing header and trailer
// ([ParseServerTiming]) and aggregate each metric's dur by name (a name in
// both is summed; the split reads the header alone), for at most 64 names per response
// and per run (the rest under "(other)"), a response's sum for one name
// saturating at the largest dur accepted (1e9 ms). [WriteTable] and [WriteLoadTable]
// print several results side by side.
//
// Connection classes ([Class], Config.Mix): instead of cold or warm, every
// request opens a fresh connection that is new (full handshake), resumed
// (a TLS 1.3 session ticket; h1, h2, h3) or 0rtt (h3 only: the request in
// the first flight; Go's crypto/tls has no client 0-RTT over TCP, so a mix
// with 0rtt over h1/h2 is refused). A mix deals classes by weight. Each
// request is checked for what happened (DidResume, Used0RTT) and counted
// under that outcome, so "0rtt refused" or "not resumed" are never counted
// as the class asked for.
//
// Every run also fills per-outcome [Histogram]s (log-linear, quantiles
// within [HistogramPrecision], memory bounded whatever the count): their
// summaries with p99.9 are Result.Outcomes and LoadResult.Outcomes, and a
// [Report] draws them with the per-second Timeline as one self-contained
// HTML page ([Report.WriteHTML]).
package edgebench
