package app

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/events"
	"github.com/agentd/agentd/internal/metrics"
	"github.com/agentd/agentd/internal/netguard"
	"github.com/agentd/agentd/internal/server"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/webhook"
)

// webhooksFrom reads the operator's agentd.webhooks: every file read but
// the project's agentd.json (the workspace's, which the model can write),
// whose agentd.webhooks is reported ignored. A secret too short to sign
// with, an allow entry that is not an address or a duration that does
// not parse refuses the configuration.
func webhooksFrom(s Setup, loaded *config.Loaded) (webhook.Config, error) {
	project := ""
	if s.Workspace != "" {
		project = filepath.Join(s.Workspace, "agentd.json")
	}
	var wh *config.Webhooks
	for i, f := range loaded.Files {
		if f.Agentd.Webhooks == nil {
			continue
		}
		if loaded.Used[i] == project && !sameFile(project, s.ConfigFile) {
			loaded.Warnings = append(loaded.Warnings, config.Problem{File: project, Key: "agentd.webhooks",
				Msg: "only the operator's files (the global agentd.json, --config) set webhooks, not the project's"})
			continue
		}
		wh = f.Agentd.Webhooks
	}
	var c webhook.Config
	if wh == nil {
		return c, nil
	}
	if err := webhook.CheckSecret(wh.Secret); err != nil {
		return c, err
	}
	c.Secret = wh.Secret
	var err error
	if c.Allow, err = netguard.ParseAllow("agentd.webhooks.allow", wh.Allow); err != nil {
		return c, err
	}
	for _, d := range []struct {
		key, v string
		to     *time.Duration
	}{{"retryFor", wh.RetryFor, &c.RetryFor}, {"timeout", wh.Timeout, &c.Timeout}} {
		if d.v == "" {
			continue
		}
		if *d.to, err = time.ParseDuration(d.v); err != nil || *d.to <= 0 {
			return c, fmt.Errorf("agentd.webhooks.%s %q: want a positive duration such as \"10m\"", d.key, d.v)
		}
	}
	return c, nil
}

// startWebhooks builds the node's webhooks over the store's webhook side
// and starts their relay and dispatcher when a secret is configured; nil
// for a store that keeps no webhooks. Their metrics are registered either
// way, as are their routes (which list what is stored even while off).
func startWebhooks(ctx context.Context, cfg Config, db store.Store, st *store.Watched, hub *events.Hub, met *metrics.Metrics, node string) (*webhook.Service, error) {
	rd, ok := db.(store.WebhookReader)
	if !ok {
		return nil, nil
	}
	wc := cfg.Webhooks
	wc.Node, wc.Version, wc.Logger = node, cfg.Version, cfg.Logger
	if wc.Keep == 0 {
		wc.Keep = cfg.EventMaxAge
	}
	wc.Metrics = metrics.NewWebhooks(met, rd.DeliveryCounts, 5*time.Second)
	wh, err := webhook.New(st, rd, hub, wc)
	if err != nil {
		return nil, err
	}
	if err := wh.Start(ctx); err != nil {
		return nil, fmt.Errorf("start webhooks: %w", err)
	}
	return wh, nil
}

// callbacksOf is the webhooks as the APIs register prompts' callbackUrl
// (nil when there are none).
func callbacksOf(wh *webhook.Service) server.Callbacks {
	if wh == nil {
		return nil
	}
	return wh
}
