package llm

import "net/http"

// HTTPClient is the client the providers share unless given another. Go's
// default transport keeps two idle connections per host, so with many
// sessions calling one provider at once nearly every step dialled a new
// connection (over TLS without HTTP/2, with a new handshake) and closed it
// after: at 1,000 sessions that churn cost the p99 turn overhead a quarter.
// Idle connections still close after the default 90 s.
var HTTPClient = &http.Client{Transport: providerTransport()}

func providerTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 4096
	t.MaxIdleConnsPerHost = 4096
	return t
}
