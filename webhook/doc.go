// Package webhook is charter's admission side: the HTTPS server that answers
// the API server's AdmissionReviews (webhook/server), served from the
// process's shared policy cache (clusterstate/policycache), the controllers that
// issue and rotate the serving certificate (webhook/certs) and write the
// webhook configurations from the installed policies (webhook/config), and
// the Prometheus metrics they record (webhook/metrics).
//
// Every verdict comes from the engine's PolicySet; this tree only moves
// requests in and decisions out.
package webhook
