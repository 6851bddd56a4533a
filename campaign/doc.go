// Package campaign holds streamrun's fault campaign: a test that runs
// several pipelines under load across host processes (`streamrun run`)
// and an embedded broker process (`streamrun broker --data --brokers 3`),
// injects faults at random — in the handler plugins, the broker, the
// network and the hosts — and keeps a ledger of every message, failing
// when a message whose send receipt arrived never comes out. It runs only
// when STREAMRUN_CAMPAIGN is set (scripts/campaign); docs/reliability.md
// describes it and holds its figures. The package has no code outside its
// tests.
package campaign
