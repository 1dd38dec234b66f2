package app

import (
	"context"

	"github.com/agentd/agentd/internal/server"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/postgres"
)

// clusterOf lists the nodes sharing st for GET /node; nil where the node is
// alone (SQLite).
func clusterOf(st store.Store) func(context.Context) ([]server.ClusterNode, error) {
	pg, ok := st.(*postgres.Store)
	if !ok {
		return nil
	}
	return func(ctx context.Context) ([]server.ClusterNode, error) {
		nodes, err := pg.Nodes(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]server.ClusterNode, len(nodes))
		for i, n := range nodes {
			out[i] = server.ClusterNode{ID: n.ID, Since: n.Since, Leases: n.Leases}
		}
		return out, nil
	}
}
